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
// (99 stays unused: tests/test_ladder.py probes it as an invalid step.)
// kLadderSteps (dispatch.h) counts the main line 1..8; 9, 20, 90..98 and 100..105 are
// extras for tests and benchmarks.  Any other number returns an error string.
//
// Steps 1-4 take float32, float64 (accumulating in double), float16 and
// bfloat16 (accumulating in float); steps 5-9 float32 only (strict fp32 math,
// whatever allow_tf32 says).
#include "ladder_steps.h"

namespace tiled {
namespace cuda {

const char* ladder_gemm(const GemmProblem& p, int step, const DeviceInfo& dev,
                        cudaStream_t stream) {
  switch (step) {
    case 1: return ladder::run_naive(p, stream);
    case 2: return ladder::run_smem_tiled(p, 32, stream);
    case 20: return ladder::run_smem_tiled(p, 16, stream);
    case 3: return ladder::run_thread_tiled(p, stream);
    case 4: return ladder::run_two_level(p, stream);
    case 5: return ladder::run_vectorized(p, stream);
    case 6: return ladder::run_warp_tiled(p, stream);
    case 7: return ladder::run_cp_async(p, dev, stream);
    case 8: return ladder::run_hilbert(p, dev, stream);
    case 9: return simt_fast_gemm(p, dev, stream);
    case 91:
    case 92:
    case 93: return ladder::run_simt_candidate(step - 90, p, dev, stream);
    case 90: return ladder::run_simt_base(p, dev, stream);
    case 94: return ladder::run_simt_warps16(p, dev, stream);
    case 95: return ladder::run_simt_bk16(p, dev, stream);
    case 96: return ladder::run_simt_sliced_mid(p, dev, stream);
    case 97: return ladder::run_simt_sliced_small(p, dev, stream);
    case 98: return ladder::run_simt_bk16_staged(p, dev, stream);
    case 100: return ladder::run_simt_lean(p, dev, stream);
    case 101: return ladder::run_simt_lean_prefetch(p, dev, stream);
    case 102: return ladder::run_simt_lean_bk32(p, dev, stream);
    case 103: return ladder::run_simt_kc(p, dev, stream);
    case 104: return ladder::run_simt_lean_wide(p, dev, stream);
    case 105: return ladder::run_simt_kc_wide(p, dev, stream);
  }
  return "ladder_gemm: invalid step (valid: 1-9, 20, 90-98, 100-105)";
}

const char* ladder_step_name(int step) {
  switch (step) {
    case 1: return "naive";
    case 2: return "smem tiling (TILE 32)";
    case 20: return "smem tiling (TILE 16)";
    case 3: return "thread tiling (4x4)";
    case 4: return "two-level tiling (64x64, 4x4)";
    case 5: return "vectorized 128-bit loads (128x128, 8x8)";
    case 6: return "warp tiling (256x128, 64x64 warps)";
    case 7: return "cp.async 4-stage pipeline";
    case 8: return "hilbert block order";
    case 9: return "simt_fast (size dispatch: 128x128 / sliced-K 64x64 / 32x32)";
    case 90: return "simt_fast 128x128 config (no size dispatch)";
    case 94: return "128x128x8, 8 warps of 64x32, 8x8/thread, 2 blocks/SM";
    case 95: return "128x128x16, 4 warps of 64x64, 3 stages";
    case 96: return "sliced-K 64x64 tile, 4 warps x k/4";
    case 97: return "sliced-K 32x32 tile, 4 warps x k/4";
    case 98: return "128x128x16, 3 stages, 16-byte staged transpose of K-contiguous operands";
    case 100: return "128x128x16, 3 stages, lean loop (fast-path copies, __syncthreads)";
    case 101: return "128x128x16, 3 stages, lean loop + cross-k-tile fragment prefetch";
    case 102: return "128x128x32, 3 stages, lean loop + cross-k-tile fragment prefetch";
    case 103: return "101 + K-contiguous operand kept along k in smem (16-byte copies)";
    case 104: return "101 on a 128x256x16 block, 8 warps, 1 block/SM";
    case 105: return "128x256x16, 8 warps, K-contiguous operand kept along k";
    case 91:
    case 92:
    case 93: return ladder::simt_candidate_name(step - 90);
  }
  return nullptr;
}

}  // namespace cuda
}  // namespace tiled
