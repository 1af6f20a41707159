// simt_fast tuning round 3 (ladder steps 100-102): step 95's tile with a lean
// main loop (11_lean_pipeline.cuh).  Own translation unit so its 24 kernels
// compile in parallel with simt_tuning.cu.  See docs/ladder.md for what each
// should change.
#include "11_lean_pipeline.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// Steps 100, 101: step 95's config (128 x 128 x 16, 4 warps of 64 x 64,
// 8 x 16 per thread, 3 stages = 50.7 KB, 2 blocks / SM).
using LeanBk16Cfg = WarpTileCfg<128, 128, 16, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/2,
                                /*NAMED=*/false>;
// Step 102: BK 32 (3 stages = 101 KB, still 2 blocks / SM): half the
// per-k-tile work again, and a K-contiguous k-tile row is a whole 128-byte line.
using LeanBk32Cfg = WarpTileCfg<128, 128, 32, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/2,
                                /*NAMED=*/false>;

const char* run_simt_lean(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<LeanBk16Cfg, HilbertOrder, false>(p, dev, s,
                                                       "ladder step 100 supports float32 only");
}
const char* run_simt_lean_prefetch(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<LeanBk16Cfg, HilbertOrder, true>(p, dev, s,
                                                      "ladder step 101 supports float32 only");
}
const char* run_simt_lean_bk32(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<LeanBk32Cfg, HilbertOrder, true>(p, dev, s,
                                                      "ladder step 102 supports float32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
