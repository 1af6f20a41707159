// simt_fast's large config, ladder step 109: the lean pipeline
// (simt_fast_lean.cuh) on a 128 x 256 block of 8 warps, each k-tile's copies
// spread into the next k-tile's loop, each k's FFMAs in 2x2 quads
// (warp_outer's FmaOrder::quads), stream-K capable.
//
// This translation unit alone is compiled with `-Xptxas -O1` (setup.py,
// PTXAS_O1_SOURCES): at ptxas's default -O3 the scheduler reorders the
// unrolled FFMAs of a k-tile whatever their source order (FFMAs column by
// column: 7.6% of the fast k-tile's FFMAs read three registers, 10.8% in
// quads), and at -O1 it keeps them (quads: 2.0%; cuBLAS's SGEMM 3.8%).
// Nothing else in the kernel depends on the optimisation level: its loads,
// copies and barriers are the source's, and each accumulator gets step
// 101's FFMAs in step 101's k order (the same bits, tested).  Measured on an
// H100 (strict fp32, paired with cuBLAS, docs/ladder.md).
#include "simt_fast_lean.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

// Whole tiles: the stream-K instances with no stream-K tiles (so this file
// builds one kernel per layout, and step 109 with and without stream-K runs
// the same code; docs/ladder.md).
const char* run_simt_large(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return run_simt_large_streamk(p, dev, s, nullptr, 0, 0);
}

// Stream-K (simt_fast.cu decides; batch 1): the first sk_tiles tiles dealt
// to `grid` CTAs, the rest whole; `ws` holds stream_k_workspace_bytes(grid,
// 256) bytes, its flags zeroed here.
const char* run_simt_large_streamk(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s, void* ws,
                                   int64_t sk_tiles, int grid) {
  LeanStreamK sk;
  sk.sk_tiles = sk_tiles;
  sk.sk_grid = grid;
  if (grid > 0) {
    sk.flags = static_cast<int*>(ws);
    sk.partials = reinterpret_cast<float*>(static_cast<char*>(ws) + stream_k_flag_bytes(grid));
    if (cudaMemsetAsync(ws, 0, stream_k_flag_bytes(grid), s) != cudaSuccess)
      return "simt_fast stream-K: flag reset failed";
  }
  return launch_lean<Lean128x256Cfg, HilbertOrder, /*SPREAD=*/true, FmaOrder::quads, /*SK=*/true>(
      p, dev, s, "ladder step 109 supports float32 only", sk);
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
