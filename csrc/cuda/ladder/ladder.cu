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
//    9  simt_fast: step 8 tuned for Hopper             simt_fast.cu          float32
//   90  simt_fast's 128x128 config alone (no size dispatch) simt_fast.cu
//  91..93  simt_fast tuning candidates (NN, aligned B only), see simt_fast.cu
//   94  128x128x8, 8 warps, 8x8/thread, 2 blocks/SM      simt_tuning.cu  (all layouts)
//   95  simt_fast's tile with BK 16, 3 stages             simt_tuning.cu  (all layouts)
//   96  sliced-K 64x64 tile, 4 warps on k quarters       simt_small.cu   (simt_fast: mid size)
//   97  sliced-K 32x32 tile, 4 warps on k quarters       simt_small.cu   (simt_fast: M or N <= 32)
//   98  step 95 + 16-byte copies of K-contiguous operands, transposed
//       through a staging buffer                        simt_tuning.cu  (all layouts)
//  100  step 95's tile, lean loop: fast-path copies for interior tiles,
//       one __syncthreads per k-tile                     simt_tuning2.cu (all layouts)
//  101  100 + fragments prefetched across k-tiles       simt_tuning2.cu (all layouts)
//  102  101 with BK 32 (3 stages, 101 KB)               simt_tuning2.cu (all layouts)
//  103  101 + K-contiguous operand kept along k in smem  simt_tuning3.cu (all layouts)
//  104  101 on a 128x256 block, 8 warps, 1 block/SM     simt_tuning3.cu (all layouts)
//  105  103 on 104's block                              simt_tuning3.cu (all layouts)
//  106  104 with each k-tile's copies spread into the
//       next k-tile's loop (k = 1, 5)                   simt_tuning3.cu (all layouts)
//  107  106 with BK 8, 4 stages                         simt_tuning3.cu (all layouts)
//  108  106 with the FFMAs of a k column by column      simt_tuning3.cu (all layouts)
//  109  106 with the FFMAs of a k in 2x2 quads, compiled
//       with ptxas -O1 (its order kept)                 simt_quads.cu   (all layouts)
// (99 stays unused: tests/test_ladder.py probes it as an invalid step.)
// kLadderSteps (dispatch.h) counts the main line 1..8; 9, 20, 90..98 and 100..109 are
// extras for tests and benchmarks.  Any other number returns an error string.
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

// Every step, its name and its launcher in one place (the simt_fast tuning
// candidates 91-93 are named by simt_fast.cu).
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
    TILED_STEP(90, "simt_fast 128x128 config (no size dispatch)", ladder::run_simt_base(p, dev, s)),
    TILED_STEP(91, ladder::simt_candidate_name(1), ladder::run_simt_candidate(1, p, dev, s)),
    TILED_STEP(92, ladder::simt_candidate_name(2), ladder::run_simt_candidate(2, p, dev, s)),
    TILED_STEP(93, ladder::simt_candidate_name(3), ladder::run_simt_candidate(3, p, dev, s)),
    TILED_STEP(94, "128x128x8, 8 warps of 64x32, 8x8/thread, 2 blocks/SM", ladder::run_simt_warps16(p, dev, s)),
    TILED_STEP(95, "128x128x16, 4 warps of 64x64, 3 stages", ladder::run_simt_bk16(p, dev, s)),
    TILED_STEP(96, "sliced-K 64x64 tile, 4 warps x k/4", ladder::run_simt_sliced_mid(p, dev, s)),
    TILED_STEP(97, "sliced-K 32x32 tile, 4 warps x k/4", ladder::run_simt_sliced_small(p, dev, s)),
    TILED_STEP(98, "128x128x16, 3 stages, 16-byte staged transpose of K-contiguous operands",
               ladder::run_simt_bk16_staged(p, dev, s)),
    TILED_STEP(100, "128x128x16, 3 stages, lean loop (fast-path copies, __syncthreads)", ladder::run_simt_lean(p, dev, s)),
    TILED_STEP(101, "128x128x16, 3 stages, lean loop + cross-k-tile fragment prefetch",
               ladder::run_simt_lean_prefetch(p, dev, s)),
    TILED_STEP(102, "128x128x32, 3 stages, lean loop + cross-k-tile fragment prefetch",
               ladder::run_simt_lean_bk32(p, dev, s)),
    TILED_STEP(103, "101 + K-contiguous operand kept along k in smem (16-byte copies)", ladder::run_simt_kc(p, dev, s)),
    TILED_STEP(104, "101 on a 128x256x16 block, 8 warps, 1 block/SM", ladder::run_simt_lean_wide(p, dev, s)),
    TILED_STEP(105, "128x256x16, 8 warps, K-contiguous operand kept along k", ladder::run_simt_kc_wide(p, dev, s)),
    TILED_STEP(106, "104 with copies spread into the next k-tile's loop", ladder::run_simt_lean_wide_spread(p, dev, s)),
    TILED_STEP(107, "106 with BK 8 and 4 stages", ladder::run_simt_lean_wide_k8(p, dev, s)),
    TILED_STEP(108, "106 with the FFMAs column by column", ladder::run_simt_lean_wide_cols(p, dev, s)),
    TILED_STEP(109, "106 with the FFMAs in 2x2 quads, ptxas -O1", ladder::run_simt_quads(p, dev, s)),
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
  return "ladder_gemm: invalid step (valid: 1-9, 20, 90-98, 100-109)";
}

const char* ladder_step_name(int step) {
  const Step* s = find_step(step);
  return s ? s->name : nullptr;
}

}  // namespace cuda
}  // namespace tiled
