// Step 109: step 106 with each k's FFMAs in 2x2 quads (warp_outer's
// FmaOrder::quads), simt_fast's large config.
//
// This translation unit alone is compiled with `-Xptxas -O1` (setup.py,
// PTXAS_O1_SOURCES): at ptxas's default -O3 the scheduler reorders the
// unrolled FFMAs of a k-tile whatever their source order (step 108's fast
// k-tile: 7.6% of its FFMAs read three registers, 10.8% in quads), and at
// -O1 it keeps them (quads: 2.0%; cuBLAS's SGEMM 3.8%).  Nothing else in the
// kernel depends on the optimisation level: its loads, copies and barriers
// are the source's, and each accumulator gets step 95's FFMAs in step 95's k
// order (the same bits, tested).  Measured on an H100 against step 108
// (strict fp32, paired with cuBLAS, docs/ladder.md round 7).
#include "11_lean_pipeline.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

const char* run_simt_quads(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x256Cfg, HilbertOrder, true, true, FmaOrder::quads>(
      p, dev, s, "ladder step 109 supports float32 only");
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
