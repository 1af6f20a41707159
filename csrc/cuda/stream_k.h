// Stream-K's division of work, shared by the sm_90a kernels (hopper/
// gemm_sm90.cuh) and the strict-fp32 SIMT kernel (ladder/simt_fast_lean.cuh),
// as plain integer arithmetic for host and device, so tests/host/
// sm90_streamk.cpp can check it without a GPU; and the GPU-scope flags the
// pieces of a tile meet on.
//
// The first sk_tiles output tiles, k_blocks k-blocks each, are I = sk_tiles *
// k_blocks global k-iterations; CTA i of a grid of g takes the run [I * i / g,
// I * (i + 1) / g) (never empty: the host launches stream-K only with I >= g).
// A run is cut at tile boundaries into pieces, which the CTA takes last tile
// first: every CTA starts at k-block 0 of a tile at the same moment and then
// walks the end of its first tile, so the tiles in flight stand at two k
// positions and share their k-slices of A and B in L2.  The piece holding a
// tile's last k-block owns the tile and is its CTA's last; every other piece
// of the tile ends inside it, so it ends its run and is its CTA's first: that
// CTA parks the fp32 partial and raises a flag before waiting on anything,
// and the owner adds the partials of CTAs sk_first_run(...) .. itself - 1.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define TILED_SK_FN __host__ __device__ __forceinline__
#else
#define TILED_SK_FN inline
#endif

namespace tiled {
namespace cuda {

// A CTA's run of global k-iterations [pos, end); sk_prev consumes it from the end.
struct SkRun {
  int64_t pos, end;
};

// The first global k-iteration of CTA `cta`'s run.
TILED_SK_FN int64_t sk_run_begin(int64_t sk_tiles, int k_blocks, int cta, int grid) {
  return sk_tiles * k_blocks * cta / grid;
}

// The run's next piece, last tile first: unit (tile) and its k-blocks [kb0, kb1).
TILED_SK_FN bool sk_prev(SkRun& r, int k_blocks, int& unit, int& kb0, int& kb1) {
  if (r.end <= r.pos) return false;
  unit = static_cast<int>((r.end - 1) / k_blocks);
  const int64_t tile_start = static_cast<int64_t>(unit) * k_blocks;
  kb0 = static_cast<int>(r.pos > tile_start ? r.pos - tile_start : 0);
  kb1 = static_cast<int>(r.end - tile_start);
  r.end = tile_start + kb0;
  return true;
}

// The CTA whose run holds tile `unit`'s first k-block (s_j <= tile_start <
// s_{j+1}); the owner of the tile waits for CTAs from here up to its own.
TILED_SK_FN int sk_first_run(int64_t sk_tiles, int k_blocks, int unit, int grid) {
  const int64_t iters = sk_tiles * k_blocks;
  const int64_t tile_start = static_cast<int64_t>(unit) * k_blocks;
  int first = static_cast<int>(tile_start * grid / iters);
  if (sk_run_begin(sk_tiles, k_blocks, first + 1, grid) <= tile_start) ++first;
  return first;
}

// Stream-K tiles for `tiles` output tiles of `k_blocks` k-blocks on a grid
// of `grid` CTAs: all of them when they fill less than one wave, else the
// last partial wave plus one full wave (so a tile is split over at most two
// CTAs); 0 when the tiles fill whole waves, or some CTA would get no k-block.
constexpr int64_t stream_k_tiles(int64_t tiles, int64_t grid, int64_t k_blocks) {
  if (grid <= 1 || tiles % grid == 0) return 0;
  const int64_t sk = tiles < grid ? tiles : tiles % grid + grid;
  return sk * k_blocks >= grid ? sk : 0;
}
// Workspace of a stream-K launch on `grid` CTAs: two zeroed flags per CTA
// (one per consumer warpgroup of the sm_90a kernels; the SIMT kernel uses
// the first), rounded to 256 bytes, then one fp32 partial tile of 128 x bn
// per CTA.
constexpr size_t stream_k_flag_bytes(int64_t grid) { return static_cast<size_t>((grid * 2 * 4 + 255) / 256 * 256); }
constexpr size_t stream_k_workspace_bytes(int64_t grid, int bn) {
  return stream_k_flag_bytes(grid) + static_cast<size_t>(grid) * 128 * bn * 4;
}

#if defined(__CUDACC__)
// GPU-scope flags between CTAs (stream-K partial tiles): a release store
// after this thread's (and, through a preceding barrier, its peers') global
// writes; an acquire load that later reads may rely on.
__device__ __forceinline__ void st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
#endif

}  // namespace cuda
}  // namespace tiled

#undef TILED_SK_FN
