// Step 8: L2-aware block order along a Hilbert curve (seed 004).
//
// Steps 1-7 hand out output tiles row by row: the ~132 blocks resident at
// once cover 1-2 rows of tiles, i.e. a few BM-row panels of A but ALL of B,
// so B is streamed from DRAM once per tile row.  Ordering tiles along a
// Hilbert curve makes any run of consecutive blocks a compact, roughly square
// patch: a patch of P tiles touches ~2*sqrt(P) panels instead of P + 1, and
// the next patch is adjacent (it shares rows or columns with the last one), so
// more of A and B is served from L2.  Seed 004's example: 64 blocks as a 64x1
// strip read 16512*K elements, as an 8x8 square 3072*K.
//
// A Hilbert curve needs a 2^k x 2^k square.  The grid is cut into bands of S
// tile rows and each band into S x S squares, S = the largest power of two
// <= min(tiles_m, tiles_n), capped at 16 (256 tiles: about one wave of
// blocks).  Full squares are walked along the curve, the ragged squares on
// the right and bottom edges row by row.  The math is unchanged from step 7.
#pragma once
#include "07_cp_async_pipeline.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

// Position (x, y) of index d on the Hilbert curve filling an n x n square
// (n a power of two).
__host__ __device__ __forceinline__ void hilbert_d2xy(int n, int d, int& x, int& y) {
  x = 0;
  y = 0;
  for (int s = 1; s < n; s *= 2) {
    const int rx = 1 & (d / 2), ry = 1 & (d ^ rx);
    if (ry == 0) {
      if (rx == 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      const int t = x;
      x = y;
      y = t;
    }
    x += s * rx;
    y += s * ry;
    d /= 4;
  }
}

struct HilbertOrder {
  static constexpr const char* name = "hilbert";
  static constexpr int kMaxPanel = 16;
  static int panel(int64_t tiles_m, int64_t tiles_n) {
    const int64_t mn = tiles_m < tiles_n ? tiles_m : tiles_n;
    int s = 1;
    while (2 * s <= mn && s < kMaxPanel) s *= 2;
    return s;
  }
  __host__ __device__ __forceinline__ static void tile(int64_t t, int64_t tiles_m, int64_t tiles_n,
                                                       int S,
                                              int64_t& tm, int64_t& tn) {
    const int64_t band = t / (S * tiles_n);  // every band but the last has S rows
    const int64_t m_base = band * S;
    const int h = static_cast<int>(tiles_m - m_base < S ? tiles_m - m_base : S);
    const int64_t r = t - band * S * tiles_n;
    const int64_t sq = r / (h * S);  // every square but the last is S wide
    const int64_t n_base = sq * S;
    const int w = static_cast<int>(tiles_n - n_base < S ? tiles_n - n_base : S);
    const int l = static_cast<int>(r - sq * h * S);
    int x, y;
    if (h == S && w == S) {
      hilbert_d2xy(S, l, x, y);
    } else {
      y = l / w;
      x = l - y * w;
    }
    tm = m_base + y;
    tn = n_base + x;
  }
};

// Step 8's configuration: step 7's.
using HilbertCfg = CpAsyncCfg;

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
