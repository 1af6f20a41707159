// simt_fast's configs for problems with few 128 x 128 tiles: sliced-K blocks
// (09_sliced_k.cuh), ladder steps 96 (64 x 64 tile) and 97 (32 x 32 tile).
// simt_fast_gemm (simt_fast.cu) picks them by size.
#include "09_sliced_k.cuh"
#include "../settings.h"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// Each k's FFMAs column by column (warp_outer's COLS) unless
// TILED_SIMT_SLICED_ROWS=1 (row by row, as before; A/B runs).
const char* run_simt_sliced_mid(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return setting_is("TILED_SIMT_SLICED_ROWS", "1") ? launch_sliced<SlicedMidCfg, false>(p, dev, s)
                                                   : launch_sliced<SlicedMidCfg, true>(p, dev, s);
}
const char* run_simt_sliced_small(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return setting_is("TILED_SIMT_SLICED_ROWS", "1") ? launch_sliced<SlicedSmallCfg, false>(p, dev, s)
                                                   : launch_sliced<SlicedSmallCfg, true>(p, dev, s);
}
size_t simt_sliced_smem_bytes() {
  return static_cast<size_t>(SlicedMidCfg::kSmemBytes > SlicedSmallCfg::kSmemBytes
                                 ? SlicedMidCfg::kSmemBytes
                                 : SlicedSmallCfg::kSmemBytes);
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
