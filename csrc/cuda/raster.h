// Tile order of the persistent sm90 kernel (grouped raster), with the
// divisions it needs done as multiply-high and shift by constants the host
// computes once per launch.  Host and device code: tests/host checks every
// coordinate against plain division.
//
// Why: a CTA that runs one or two tiles spends most of its life before its
// first load.  With the divisions by run-time values (a dozen dependent
// instructions each through MUFU.RCP and back to the uniform registers),
// the producer thread took ~1,260 cycles from its start to its first TMA
// load on an H200, the consumers as long to reach their first wait
// (docs/hopper.md, round 33).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define TILED_RASTER_FN __host__ __device__ __forceinline__
#else
#define TILED_RASTER_FN inline
#endif

namespace tiled {
namespace cuda {

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: q = (hi32(n * mul) + n) >> shift,
// with shift = ceil(log2 d) and mul = floor(2^32 * (2^shift - d) / d) + 1, the
// round-up multiplier of division by invariant integers (exact for n < 2^31;
// the sum stays below 2^32 because hi32(n * mul) < n).  tests/host checks it.
struct FastDiv {
  uint32_t d = 1, mul = 0, shift = 0;

  static FastDiv of(uint32_t divisor) {
    FastDiv f;
    f.d = divisor < 1 ? 1 : divisor;
    while ((uint64_t{1} << f.shift) < f.d) ++f.shift;
    f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - f.d)) / f.d + 1);
    return f;
  }
  TILED_RASTER_FN uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * mul) >> 32);
#endif
    return (hi + n) >> shift;
  }
};

struct TileCoord {
  int b, tm, tn;
};

// Units (tiles, or tile pairs of a cluster) are numbered batch by batch;
// inside a batch in groups of group_m unit rows, walked column by column, so
// the units in flight at once share a few row bands of A and a band of B in L2.
struct Raster {
  FastDiv per_batch;   // units of one batch: rows * cols
  FastDiv group_span;  // units of one full group: group_m * cols
  FastDiv group_m;     // unit rows of a full group
  FastDiv last_rows;   // unit rows of the last group (rows % group_m, or group_m)
  int rows = 0, cols = 0;

  static Raster of(int rows, int cols, int group_m) {
    Raster r;
    r.rows = rows;
    r.cols = cols;
    group_m = group_m < 1 ? 1 : group_m;
    r.per_batch = FastDiv::of(static_cast<uint32_t>(rows) * static_cast<uint32_t>(cols));
    r.group_span = FastDiv::of(static_cast<uint32_t>(group_m) * static_cast<uint32_t>(cols));
    r.group_m = FastDiv::of(static_cast<uint32_t>(group_m));
    r.last_rows = FastDiv::of(static_cast<uint32_t>(rows % group_m == 0 ? group_m : rows % group_m));
    return r;
  }
  TILED_RASTER_FN TileCoord coord(int unit) const {
    const uint32_t u = static_cast<uint32_t>(unit);
    TileCoord t;
    const uint32_t b = per_batch.div(u);
    const uint32_t in_batch = u - b * per_batch.d;
    const uint32_t group = group_span.div(in_batch);
    const uint32_t first_row = group * group_m.d;
    const uint32_t in_group = in_batch - group * group_span.d;
    // Every group but the last has group_m rows.
    const FastDiv& span = first_row + group_m.d <= static_cast<uint32_t>(rows) ? group_m : last_rows;
    const uint32_t col = span.div(in_group);
    t.b = static_cast<int>(b);
    t.tm = static_cast<int>(first_row + (in_group - col * span.d));
    t.tn = static_cast<int>(col);
    return t;
  }
};

}  // namespace cuda
}  // namespace tiled
