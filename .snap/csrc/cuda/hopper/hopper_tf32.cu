// tf32 instantiations of the sm_90a GEMM (split per dtype for parallel compile).
#include "hopper.h"

#if defined(TILED_WITH_SM90A)
#include "gemm_sm90.cuh"

namespace tiled {
namespace cuda {
namespace sm90 {

const char* launch_tf32(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, Choice c, void* workspace) {
  return launch_choice<float>(p, dev, stream, c, workspace);
}

}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
#endif  // TILED_WITH_SM90A
