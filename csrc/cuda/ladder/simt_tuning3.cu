// simt_fast tuning round 4 (ladder steps 103-105), built on step 101:
//  103  K-contiguous operand kept as is in shared memory (12_kc_fragments.cuh)
//  104  step 101's loop on a 128 x 256 block of 8 warps, 1 block / SM
//  105  103's along-k operand on 104's block
//  106  104 with the copies spread into the next k-tile's loop
//  107  106 with BK 8 and 4 stages (half the unrolled loop: instruction fetch)
//  108  106 with the FFMAs column by column (fewer three-register reads)
// Own translation unit so its kernels compile in parallel with
// simt_tuning{,2}.cu.  See docs/ladder.md (Round 4) for what each should change.
#include "12_kc_fragments.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// Step 103: step 101's block (128 x 128 x 16, 4 warps of 64 x 64, 3 stages,
// 2 blocks / SM); the 16 x 8 thread tile serves TT, whose K-contiguous
// operand is B.
using Kc128x128Cfg = WarpTileCfg<128, 128, 16, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/2,
                                 /*NAMED=*/false>;
using Kc128x128TallCfg = WarpTileCfg<128, 128, 16, 64, 64, 16, 8, /*STAGES=*/3, /*MINB=*/2,
                                     /*NAMED=*/false>;
// Steps 104, 105: 128 x 256 x 16 (Lean128x256Cfg, 11_lean_pipeline.cuh).
using Lean128x256TallCfg = WarpTileCfg<128, 256, 16, 64, 64, 16, 8, /*STAGES=*/3, /*MINB=*/1,
                                       /*NAMED=*/false>;

const char* run_simt_kc(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_kc<Kc128x128Cfg, Kc128x128TallCfg, HilbertOrder>(
      p, dev, s, "ladder step 103 supports float32 only");
}
const char* run_simt_lean_wide(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256Cfg, HilbertOrder, true>(p, dev, s,
                                                         "ladder step 104 supports float32 only");
}
// Step 107: 106 on k-tiles of 8 (4 stages, 49 KB): half of 106's unrolled
// k-tile (~1200 instructions instead of ~2400) against twice the barriers.
using Lean128x256K8Cfg = WarpTileCfg<128, 256, 8, 64, 64, 8, 16, /*STAGES=*/4, /*MINB=*/1,
                                     /*NAMED=*/false>;
const char* run_simt_lean_wide_k8(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256K8Cfg, HilbertOrder, true, true>(p, dev, s,
                                                                 "ladder step 107 supports float32 only");
}
const char* run_simt_lean_wide_spread(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256Cfg, HilbertOrder, true, true>(p, dev, s,
                                                               "ladder step 106 supports float32 only");
}
// Step 108: 106 with the FFMAs of each k column by column (warp_outer's
// FmaOrder::cols): fewer FFMAs that read three registers.
const char* run_simt_lean_wide_cols(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256Cfg, HilbertOrder, true, true, FmaOrder::cols>(p, dev, s,
                                                                     "ladder step 108 supports float32 only");
}
const char* run_simt_kc_wide(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_kc<Lean128x256Cfg, Lean128x256TallCfg, HilbertOrder>(
      p, dev, s, "ladder step 105 supports float32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
