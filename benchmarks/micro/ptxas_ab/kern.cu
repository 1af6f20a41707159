// One build of the strict-fp32 large config (ladder steps 108 / 109: 128 x
// 256 x 16 blocks, the lean pipeline with spread copies) per object: the
// namespace is renamed per build (-Dladder=l_<variant>) so several builds
// link into one program, FMA_ORDER picks warp_outer's order and the build
// script the ptxas optimisation level.  See main.cu.
#include "cuda/ladder/11_lean_pipeline.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

const char* run_kernel(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256Cfg, HilbertOrder, true, true, FmaOrder::FMA_ORDER>(p, dev, s, "f32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
