// Host-only check of stream-K's division of work (csrc/cuda/stream_k.h, the
// helpers the sm_90a kernels and the strict-fp32 SIMT kernel run): for every
// (tiles, grid, k-blocks) read from stdin as "tiles grid k_blocks" lines,
// with sk_tiles as stream_k_tiles deals them, it walks every CTA's run the
// way the kernels do and checks that
//   * the pieces cover each tile's k-blocks exactly once;
//   * a piece that does not end its tile is the first its CTA computes, and
//     no CTA has two (one partial slot per CTA);
//   * a tile's owner (the piece ending it, when it does not also start it)
//     is the last piece its CTA computes, and the CTAs it waits for
//     (sk_first_run .. owner - 1) are exactly those holding the tile's other
//     pieces.
// Prints "ok <cases>" or the first violation.  Built and run by
// tests/test_streamk_host.py, so CI checks the kernel's bookkeeping without
// a GPU.
#include <cstdio>
#include <vector>

#include "cuda/stream_k.h"

using namespace tiled::cuda;

namespace {

struct Piece {
  int cta, order, unit, kb0, kb1;
};

// Returns nullptr when every rule holds, else what broke.
const char* check(int64_t sk_tiles, int grid, int k_blocks) {
  std::vector<Piece> pieces;
  std::vector<int> parked(grid, 0), count(grid, 0);
  for (int c = 0; c < grid; ++c) {
    SkRun run{sk_run_begin(sk_tiles, k_blocks, c, grid), sk_run_begin(sk_tiles, k_blocks, c + 1, grid)};
    if (run.end <= run.pos) return "an empty run";
    int unit, kb0, kb1;
    while (sk_prev(run, k_blocks, unit, kb0, kb1)) pieces.push_back({c, count[c]++, unit, kb0, kb1});
  }
  std::vector<std::vector<int>> covered(sk_tiles, std::vector<int>(k_blocks, 0));
  for (const Piece& p : pieces) {
    if (p.unit < 0 || p.unit >= sk_tiles || p.kb0 < 0 || p.kb1 > k_blocks || p.kb0 >= p.kb1) return "a bad piece";
    for (int k = p.kb0; k < p.kb1; ++k) ++covered[p.unit][k];
    if (p.kb1 < k_blocks) {
      if (p.order != 0) return "a parked piece that is not its CTA's first";
      if (++parked[p.cta] > 1) return "two parked pieces in one CTA";
    }
  }
  for (const auto& tile : covered)
    for (int c : tile)
      if (c != 1) return "a k-block covered other than once";
  for (const Piece& p : pieces) {
    if (p.kb1 != k_blocks || p.kb0 == 0) continue;  // not an owner that waits
    if (p.order != count[p.cta] - 1) return "an owner that is not its CTA's last piece";
    const int first = sk_first_run(sk_tiles, k_blocks, p.unit, grid);
    std::vector<int> holders;
    for (const Piece& q : pieces)
      if (q.unit == p.unit && q.cta != p.cta) holders.push_back(q.cta);
    if (static_cast<int>(holders.size()) != p.cta - first) return "the owner waits for the wrong number of CTAs";
    // The SIMT kernel's owner waits for the CTA before only (lean_kernel).
    if (sk_tiles >= grid && first != p.cta - 1) return "runs of a tile or more, yet a tile of three pieces";
    for (int h : holders)
      if (h < first || h >= p.cta) return "the owner waits for the wrong CTAs";
  }
  return nullptr;
}

}  // namespace

int main() {
  long long tiles, grid, k_blocks, cases = 0;
  while (std::scanf("%lld %lld %lld", &tiles, &grid, &k_blocks) == 3) {
    const int64_t sk = stream_k_tiles(tiles, grid, k_blocks);
    if (sk == 0) continue;  // whole tiles only: nothing to check
    if (const char* e = check(sk, static_cast<int>(grid), static_cast<int>(k_blocks))) {
      std::printf("%s: tiles %lld grid %lld k_blocks %lld (sk_tiles %lld)\n", e, tiles, grid, k_blocks,
                  static_cast<long long>(sk));
      return 1;
    }
    ++cases;
  }
  std::printf("ok %lld\n", cases);
  return 0;
}
