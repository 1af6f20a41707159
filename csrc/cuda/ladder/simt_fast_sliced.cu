// simt_fast's configs for problems with few 128 x 128 tiles: sliced-K blocks
// (simt_fast_sliced.cuh), ladder steps 96 (64 x 64 tile) and 97 (32 x 32
// tile).  simt_fast_gemm (simt_fast.cu) picks them by size.
#include "simt_fast_sliced.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// The 64 x 64 config issues each k's FFMAs column by column (warp_outer's
// FmaOrder::cols), which measured better than row by row (same bits) on an
// H100 (strict fp32, paired with cuBLAS, 9fe877c), rows / columns: 1024^3
// NN / TN / NT 0.919 / 0.905 / 0.870 -> 0.961 / 0.934 / 0.953, 128x4096x4096
// 0.692 -> 0.720, 512x4096x4096 0.812 -> 0.858, 2048x1024x2048 0.760 ->
// 0.801.  The 32 x 32 config (M or N <= 32, memory-bound) measured 0.6-1.4%
// slower with it (32x4096x4096 0.787 -> 0.777, 4096x16x4096 0.795 -> 0.784)
// and stays row by row.
const char* run_simt_sliced_mid(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_sliced<SlicedMidCfg, FmaOrder::cols>(p, dev, s);
}
const char* run_simt_sliced_small(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_sliced<SlicedSmallCfg, FmaOrder::rows>(p, dev, s);
}
size_t simt_sliced_smem_bytes() {
  return static_cast<size_t>(SlicedMidCfg::kSmemBytes > SlicedSmallCfg::kSmemBytes
                                 ? SlicedMidCfg::kSmemBytes
                                 : SlicedSmallCfg::kSmemBytes);
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
