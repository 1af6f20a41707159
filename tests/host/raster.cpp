// Host-only check of the sm90 kernel's tile order (csrc/cuda/raster.h):
// FastDiv against plain division over divisors 1 .. 70,000 and a few large
// ones, at the numerators where a multiply-high division goes wrong if
// anywhere (multiples of the divisor and their neighbours, powers of two,
// the top of the range, pseudo-random ones); Raster::coord against the
// grouped raster written with plain divisions, for every unit of many
// shapes.  Prints "ok <checks>" or the first mismatch.  Built and run by
// tests/test_raster_host.py.
#include <cstdint>
#include <cstdio>

#include "cuda/raster.h"

using namespace tiled::cuda;

namespace {

bool check_div(uint32_t d, uint32_t n, long long& checks) {
  ++checks;
  if (FastDiv::of(d).div(n) == n / d) return true;
  std::printf("FastDiv(%u).div(%u) = %u, not %u\n", d, n, FastDiv::of(d).div(n), n / d);
  return false;
}

TileCoord plain(int unit, int rows, int cols, int group_m) {
  TileCoord t;
  const int per_batch = rows * cols;
  t.b = unit / per_batch;
  const int r = unit - t.b * per_batch;
  const int span = group_m * cols;
  const int group = r / span;
  const int first = group * group_m;
  const int in_group = rows - first < group_m ? rows - first : group_m;
  const int rr = r - group * span;
  t.tm = first + rr % in_group;
  t.tn = rr / in_group;
  return t;
}

bool check_raster(int rows, int cols, int batch, int group_m, long long& checks) {
  const Raster r = Raster::of(rows, cols, group_m);
  for (int u = 0; u < rows * cols * batch; ++u) {
    ++checks;
    const TileCoord a = r.coord(u), b = plain(u, rows, cols, group_m);
    if (a.b != b.b || a.tm != b.tm || a.tn != b.tn) {
      std::printf("Raster(%d, %d, group %d).coord(%d) = (%d, %d, %d), not (%d, %d, %d)\n", rows, cols, group_m, u, a.b,
                  a.tm, a.tn, b.b, b.tm, b.tn);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  long long checks = 0;
  uint64_t x = 88172645463325252ull;  // xorshift64
  auto next = [&]() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const uint32_t top = 0x7fffffffu;
  auto check_divisor = [&](uint32_t d) {
    const uint32_t fixed[] = {0, 1, 2, d - 1, d, d + 1, 2 * d - 1, 2 * d, top, top - 1, top - d, 1u << 30, (1u << 30) - 1};
    for (uint32_t n : fixed)
      if (n <= top && !check_div(d, n, checks)) return false;
    for (int i = 0; i < 64; ++i) {
      const uint32_t q = static_cast<uint32_t>(next() % (top / d + 1));
      for (uint32_t n : {q * d, q * d - 1, q * d + d - 1})
        if (n <= top && !check_div(d, n, checks)) return false;
      if (!check_div(d, static_cast<uint32_t>(next() % (uint64_t{top} + 1)), checks)) return false;
    }
    return true;
  };
  for (uint32_t d = 1; d <= 70000; ++d)
    if (!check_divisor(d)) return 1;
  for (uint32_t d = 70001; d < (1u << 30); d = d * 3 + 1)
    if (!check_divisor(d) || !check_divisor(d + 1) || !check_divisor((d | 1) << 1)) return 1;
  for (uint32_t d : {(1u << 30) - 1, 1u << 30, (1u << 30) + 1, top - 1, top})
    if (!check_divisor(d)) return 1;
  for (int rows = 1; rows <= 37; ++rows)
    for (int cols = 1; cols <= 23; ++cols)
      for (int group_m : {1, 2, 3, 4, 8, 16, 64})
        for (int batch : {1, 3})
          if (!check_raster(rows, cols, batch, group_m, checks)) return 1;
  const int large[][4] = {{1000, 3000, 1, 8}, {24, 24, 384, 8}, {4097, 33, 2, 8}, {66, 257, 5, 8}, {129, 1, 1000, 8}};
  for (const auto& s : large)
    if (!check_raster(s[0], s[1], s[2], s[3], checks)) return 1;
  std::printf("ok %lld\n", checks);
  return 0;
}
