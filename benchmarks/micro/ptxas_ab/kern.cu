// One build of the strict-fp32 large config (ladder steps 108 / 109: 128 x
// 256 blocks of 8 warps, the lean pipeline with spread copies) per object:
// the namespace is renamed per build (-Dladder=l_v<i>) so several builds link
// into one program; FMA_ORDER picks warp_outer's order, AB_BK / AB_STAGES
// the k-tile and ring depth (16 / 3: the library's), the build script the ptxas
// optimisation level and VNAME the label.  See main.cu.
#include "cuda/ladder/11_lean_pipeline.cuh"


namespace tiled {
namespace cuda {
namespace ladder {

using AbCfg = WarpTileCfg<128, 256, AB_BK, 64, 64, 8, 16, AB_STAGES, /*MINB=*/1, /*NAMED=*/false>;

const char* run_kernel(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  // The stream-K-capable instance with whole tiles, as the library runs it
  // (its register allocation differs from the whole-tile-only build's).
  return launch_lean<AbCfg, HilbertOrder, true, true, FmaOrder::FMA_ORDER, true>(p, dev, s, "f32 only");
}
const char* name() { return VNAME; }

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
