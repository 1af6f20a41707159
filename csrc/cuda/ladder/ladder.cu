// The teaching ladder: ladder_gemm(p, step) runs one step of the seed ladder.
//
// Step numbers:
//    1  naive, one thread per output                  01_naive.cuh          all dtypes
//    2  shared-memory tiling, TILE 32                  02_smem_tiling.cuh    all dtypes
//   20  shared-memory tiling, TILE 16 (step 2 variant) 02_smem_tiling.cuh    all dtypes
//    3  register (thread) tiling, 4x4 per thread       03_thread_tiling.cuh  all dtypes
//    4  smem + register tiling, cooperative fetching   04_two_level_tiling.cuh all dtypes
//    5  128-bit coalesced loads, transposed smem       05_vectorized.cuh     float32
//    6  256x128 block / 64x64 warp / 8x16 thread tile  06_warp_tiling.cuh    float32
//    7  4-stage cp.async pipeline, named barriers      07_cp_async_pipeline.cuh float32
//    8  Hilbert block order                            08_hilbert.cuh        float32
//    9  simt_fast: the production strict-fp32 kernel   simt_fast.cu          float32
//       (size dispatch over the configs below)
// simt_fast's configs, each alone (for tests and benchmarks):
//   96  sliced-K 64x64 tile, 4 warps on k quarters    simt_fast_sliced.cu   (few tiles)
//   97  sliced-K 32x32 tile, 4 warps on k quarters    simt_fast_sliced.cu   (M or N <= 32)
//  101  lean pipeline, 128x128x16 block, 4 warps      simt_fast.cu          (GPUs without 75 KB smem)
//  109  lean pipeline, 128x256x16 block, 8 warps,
//       FFMAs in 2x2 quads, ptxas -O1                 simt_fast_large.cu    (large problems)
// The numbers are those of the tuning rounds in docs/ladder.md; the losing
// candidates of those rounds (steps 90-95, 98, 100, 102-108) were deleted, their
// measurements are written down there.  kLadderSteps (dispatch.h) counts the
// main line 1..8.  Any other number returns an error string.
//
// Steps 1-4 take float32, float64 (accumulating in double), float16 and
// bfloat16 (accumulating in float); steps 5-9 float32 only (strict fp32 math,
// whatever allow_tf32 says).
#include "ladder_steps.h"

namespace tiled {
namespace cuda {

namespace {

using StepFn = const char* (*)(const GemmProblem&, const DeviceInfo&, cudaStream_t);
struct Step {
  int step;
  const char* name;
  StepFn run;
};

// Every step, its name and its launcher in one place.
#define TILED_STEP(N, NAME, CALL) \
  Step { N, NAME, [](const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) -> const char* { \
    (void)dev;                                                                                      \
    return CALL;                                                                                     \
  } }
const Step kSteps[] = {
    TILED_STEP(1, "naive", ladder::run_naive(p, s)),
    TILED_STEP(2, "smem tiling (TILE 32)", ladder::run_smem_tiled(p, 32, s)),
    TILED_STEP(20, "smem tiling (TILE 16)", ladder::run_smem_tiled(p, 16, s)),
    TILED_STEP(3, "thread tiling (4x4)", ladder::run_thread_tiled(p, s)),
    TILED_STEP(4, "two-level tiling (64x64, 4x4)", ladder::run_two_level(p, s)),
    TILED_STEP(5, "vectorized 128-bit loads (128x128, 8x8)", ladder::run_vectorized(p, s)),
    TILED_STEP(6, "warp tiling (256x128, 64x64 warps)", ladder::run_warp_tiled(p, s)),
    TILED_STEP(7, "cp.async 4-stage pipeline", ladder::run_cp_async(p, dev, s)),
    TILED_STEP(8, "hilbert block order", ladder::run_hilbert(p, dev, s)),
    TILED_STEP(9, "simt_fast (size dispatch: 128x256 / sliced-K 64x64 / 32x32)", simt_fast_gemm(p, dev, s, nullptr)),
    TILED_STEP(96, "simt_fast config: sliced-K 64x64 tile, 4 warps x k/4", ladder::run_simt_sliced_mid(p, dev, s)),
    TILED_STEP(97, "simt_fast config: sliced-K 32x32 tile, 4 warps x k/4", ladder::run_simt_sliced_small(p, dev, s)),
    TILED_STEP(101, "simt_fast config: lean pipeline, 128x128x16, 4 warps", ladder::run_simt_lean_128x128(p, dev, s)),
    TILED_STEP(109, "simt_fast config: lean pipeline, 128x256x16, 8 warps, FFMAs in 2x2 quads",
               ladder::run_simt_large(p, dev, s)),
};
#undef TILED_STEP

const Step* find_step(int step) {
  for (const Step& s : kSteps)
    if (s.step == step) return &s;
  return nullptr;
}

}  // namespace

const char* ladder_gemm(const GemmProblem& p, int step, const DeviceInfo& dev, cudaStream_t stream) {
  if (const Step* s = find_step(step)) return s->run(p, dev, stream);
  return "ladder_gemm: invalid step (valid: 1-9, 20, 96, 97, 101, 109)";
}

const char* ladder_step_name(int step) {
  const Step* s = find_step(step);
  return s ? s->name : nullptr;
}

}  // namespace cuda
}  // namespace tiled
