// Ladder steps 5-8 (float32 only).  Each instantiates its kernel for the four
// operand layouts and, where it matters, the aligned (16-byte) and scalar
// load variants.
#include "08_hilbert.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

const char* run_vectorized(const GemmProblem& p, cudaStream_t s) { return launch_vectorized(p, s); }
const char* run_warp_tiled(const GemmProblem& p, cudaStream_t s) { return launch_warp_tiled(p, s); }
const char* run_cp_async(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_pipelined<CpAsyncCfg, RowMajorOrder>(
      p, dev, s, "ladder step 7 (cp.async pipeline) supports float32 only");
}
const char* run_hilbert(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_pipelined<HilbertCfg, HilbertOrder>(
      p, dev, s, "ladder step 8 (Hilbert order) supports float32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
