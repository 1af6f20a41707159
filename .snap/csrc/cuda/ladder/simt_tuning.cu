// simt_fast tuning candidates for large problems, every layout and alignment
// (ladder steps 94, 95, 98).  Separate translation unit: 17 kernels that compile
// in parallel with simt_fast.cu.  See docs/ladder.md for what each should
// change and simt_fast.cu for how one becomes the default.
#include "10_transpose_staging.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// Step 94: 16 warps per SM.  128 x 128 x 8 block of 8 warps (2 x 4 warps of
// 64 x 32, 8 x 8 per thread), 4 stages (33.8 KB), __launch_bounds__(256, 2):
// registers capped at 128 so two blocks (16 warps, 4 per scheduler) fit.
// FMA : LDS.128 = 64 : 4 per thread per k (simt_fast: 128 : 6).
using SimtWarps16Cfg = WarpTileCfg<128, 128, 8, 64, 32, 8, 8, /*STAGES=*/4, /*MINB=*/2,
                                   /*NAMED=*/true>;
// Step 95: simt_fast's tile with BK = 16: half the barriers, cp.async waits
// and loop overhead per FMA; 3 stages (50.7 KB), 2 blocks / SM.
using SimtBk16Cfg = WarpTileCfg<128, 128, 16, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/2,
                                /*NAMED=*/true>;

const char* run_simt_warps16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_pipelined<SimtWarps16Cfg, HilbertOrder>(p, dev, s,
                                                        "ladder step 94 supports float32 only");
}
const char* run_simt_bk16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_pipelined<SimtBk16Cfg, HilbertOrder>(p, dev, s,
                                                     "ladder step 95 supports float32 only");
}
// Step 98: step 95's config; K-contiguous operands copied 16 bytes at a time
// into a staging buffer and transposed through registers
// (10_transpose_staging.cuh).
const char* run_simt_bk16_staged(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_staged<SimtBk16Cfg, HilbertOrder>(p, dev, s, "ladder step 98 supports float32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
