// Hopper (sm_90a) tensor-core GEMM: what it can take, which tile config it
// uses, and the launch.  The kernels themselves are instantiated per dtype in
// hopper_bf16.cu / hopper_f16.cu / hopper_tf32.cu (parallel compile).
//
// Built for real only when the extension targets sm_90a (setup.py defines
// TILED_WITH_SM90A); otherwise hopper_can_run is always false and nothing
// here references a kernel.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../dispatch.h"
#include "../epilogue.cuh"
#include "../settings.h"
#include "hopper.h"

namespace tiled {
namespace cuda {

namespace {

using sm90::Choice;
using sm90::Tile;
using sm90::tile_bn;
using sm90::tile_swapped_only;
using sm90::slab_width_index;
using sm90::c_tma_ok;
using sm90::tma_stride_ok;

[[maybe_unused]] constexpr int64_t kMaxInt = 0x7fffffff;

// The operand's stride that TMA walks as its second dimension: the row stride
// of a row-major operand, the column stride of a column-major one.
[[maybe_unused]] int64_t outer_stride(const Operand& o) { return o.row_major() ? o.row_stride : o.col_stride; }

[[maybe_unused]] bool operand_ok(const Operand& o, int64_t batch, int es) {
  if (pointer_alignment(o.ptr) < 16) return false;
  if (!tma_stride_ok(outer_stride(o), es)) return false;
  if (batch > 1 && o.batch_stride != 0 && !tma_stride_ok(o.batch_stride, es)) return false;
  return true;
}

// tf32 reads B only K-major (wgmma has no tf32 transpose; only A can come
// from registers).  A row-major B (with a row-major A: the NN of x @ W and of
// nn.Linear's input gradient) is run as C^T = B^T A^T, whose A = B^T is
// M-major (read through registers) and whose B = A^T is K-major; the kernel
// writes C^T's tiles transposed into C (Choice::c_trans).  A column-major A
// with a row-major B (TN) fits neither way: dispatch stages one operand.
[[maybe_unused]] bool tf32_swapped(const GemmProblem& p) {
  return p.dtype == DType::f32 && p.a.row_major() && p.b.row_major();
}
[[maybe_unused]] GemmProblem swap_operands(const GemmProblem& p) {
  GemmProblem q = p;
  q.M = p.N;
  q.N = p.M;
  q.a = Operand{p.b.ptr, p.b.batch_stride, p.b.col_stride, p.b.row_stride};  // B^T: [N, K]
  q.b = Operand{p.a.ptr, p.a.batch_stride, p.a.col_stride, p.a.row_stride};  // A^T: [K, M]
  return q;
}

// The SM count the wave estimates divide by (1 where unknown).
[[maybe_unused]] int64_t sm_count(const DeviceInfo& dev) { return dev.num_sms > 0 ? dev.num_sms : 1; }

// Forward declaration: choose() is below.
[[maybe_unused]] Choice choose(const GemmProblem& p, const DeviceInfo& dev);

// A problem with its choose(), computed on first use: plan() weighs both
// orientations of the caller's problem, and asks for each choice several
// times.
struct Planned {
  GemmProblem p;
  const DeviceInfo& dev;
  bool chosen = false;
  Choice c;
  const Choice& choice() {
    if (!chosen) {
      c = choose(p, dev);
      chosen = true;
    }
    return c;
  }
};

// Tile choice: estimated time ~ waves * work per tile, with a 128x128 tile
// doing half the work of a 128x256 one at ~90% of its efficiency.  Prefer
// 128x256 unless the smaller tile fills the machine in fewer weighted waves.
[[maybe_unused]] Choice choose(const GemmProblem& p, const DeviceInfo& dev) {
  Choice c;
  c.a_mn = !p.a.row_major();
  c.b_mn = p.b.row_major();
  const int64_t sms = sm_count(dev);
  const int64_t tm = ceil_div(p.M, 128), tn128 = ceil_div(p.N, 128);
  const int64_t tiles128 = tm * tn128 * p.batch;
  const int64_t waves256 = ceil_div(tm * ceil_div(p.N, 256) * p.batch, sms);
  const int64_t waves128 = ceil_div(tiles128, sms);
  const int64_t k_blocks = ceil_div(p.K, p.dtype == DType::f32 ? 32 : 64);  // 128 bytes of K each
  // cost256 = waves256 * 1.0, cost128 = waves128 * 0.5 / 0.9
  c.tile = (waves128 * 5 < waves256 * 9) ? Tile::k128x128 : Tile::k128x256;
  // Schedule and clusters below (another configuration is forced by name:
  // plan_forced).
  // From 4 waves of 128x128 tiles (16-bit, >= 2 tile rows): cooperative
  // 128x256 tiles in 2-CTA clusters over tile-row pairs (B multicast), unless
  // pairing the tile rows costs a wave (M = 777, N = 14336: 7 tile rows run
  // as 4 pairs, 4 waves of pairs against 3 of single tiles).  Measured on an
  // H100 (bf16, paired with cuBLAS, 62f22e0), ping-pong+clusters (the
  // previous default) / cooperative / cooperative+clusters: 4096^3 0.871 /
  // 0.962 / 0.966, 8192^3 0.975 / 1.006 / 0.982 (ours 1664 / 1636 / 1614 us),
  // 4096x14336x4096 0.928 / 0.981 / 0.933 (ours 732 / 743 / 721 us),
  // 4096x4096x14336 0.920 / 1.004 / 0.983, 14336x4096x8192 TN 0.912 / 0.960
  // / 0.975, 3000x5000x4096 0.743 / 0.646 / 0.912; below 4 waves clusters
  // lose (2048^3 0.966 -> 0.924).  On an H200 ping-pong+clusters and
  // cooperative were within 3% of each other (docs/hopper.md, round 4).
  // Ping-pong + clusters (128x128 tiles, each consumer warpgroup its own,
  // epilogues under the other's mainloop) only where its finer tiles save
  // enough of a last wave: a ping-pong wave of 128x128 tiles costs 0.54 of a
  // 128x256 one.  Measured on an H100 (4aeed24), cooperative+clusters /
  // ping-pong+clusters: 1024x14336x4096 0.917 / 0.968 (NT 0.848 / 0.920; 4
  // waves of pairs against 7 of ping-pong pairs), 1280x14336x4096 0.885 /
  // 0.921 (5 / 9); and as predicted against it: 2048x14336x4096 ours 359 /
  // 368 us (7 / 14), 768x14336x4096 0.964 / 0.910 (3 / 6), 3000x5000x4096
  // 0.911 / 0.747 (4 / 8).
  bool auto_cluster = false, auto_pp = false;
  // tf32 takes the same tiles and clusters (no ping-pong):
  // measured on an H100 (paired with cuBLAS, 92938cf), without / with:
  // 4096^3 NT 0.988 / 1.012, NN 1.028 / 1.021, 8192^3 NN 0.980 / 1.011, NT
  // 0.979 / 1.001, 4096x14336x4096 NN 1.153 / 1.202, 4096x4096x14336 NN
  // 0.990 / 1.008; 2048^3 (below 4 waves) NN 1.003 / 0.981.
  if (tm >= 2 && tiles128 >= 4 * sms) {
    const int64_t slots = sms / 2 > 0 ? sms / 2 : 1;
    const int64_t waves_pairs = ceil_div(ceil_div(tm, 2) * ceil_div(p.N, 256) * p.batch, slots);
    auto_cluster = waves_pairs <= waves256;
    if (p.dtype != DType::f32) {
      const int64_t waves_pp = ceil_div(ceil_div(tm, 2) * tn128 * p.batch, slots);
      auto_pp = waves_pp * 54 < (auto_cluster ? waves_pairs : waves256) * 100;
      if (auto_pp) auto_cluster = true;
    }
    // 128x256 from 4 waves of 128x128 tiles, whatever the wave count says:
    // tf32 NN 4097x4096x4096 (run as 4096x4097x4096: 8 waves of 128x128
    // against 5 of 128x256) measured 248 TFLOP/s, 0.87-0.91 of cuBLAS, with
    // 128x128 tiles against 343-371 with 128x256 at nearby shapes (tf32
    // sweep, 721f560).  Except tf32 tiles with A from shared memory over <= 8
    // tile rows, where the wave rule held: NT 1024x14336x4096 (7 waves of
    // 128x128 against 4 of 128x256 pairs) measured 1.107-1.122 of cuBLAS
    // with 128x128 tiles against 0.954-0.963 with 128x256c2 (sweep b8fcd9f,
    // explore 85401f2).
    const bool wave_rule = p.dtype == DType::f32 && tm <= 8 && !c.a_mn;
    if (!wave_rule) c.tile = Tile::k128x256;
  }
  if (auto_pp) {
    c.tile = Tile::k128x128;
    c.pingpong = true;
  }
  // 2-CTA clusters with B multicast (128x256 cooperative, or 16-bit 128x128
  // ping-pong; >= 2 tile rows), as above.
  // (tf32: cooperative 128x256 tiles only.)
  if (auto_cluster && tm >= 2 &&
      (p.dtype != DType::f32 ? c.tile == Tile::k128x256 || c.pingpong : c.tile == Tile::k128x256 && !c.pingpong))
    c.cluster = 2;
  // 128x192 tiles (cooperative, no cluster) where the 128x256 grid would
  // leave much of its last wave idle and 128x192 needs fewer weighted waves
  // (a 128x192 tile does 0.75 of a 128x256 one's work, costed at 95% of its
  // efficiency: 171 * waves256 against 135 * waves192, and 95 * waves128
  // for the 128x128 rule above), e.g. 1536^3: 72 tiles of 128x256 on 132
  // SMs (one 55%-full wave) against 96 of 128x192.  Measured on an H100
  // (bf16, paired with cuBLAS, eb2d433), 128x256 / 128x192: 1536^3 0.69 /
  // 0.84, 640x4096x4096 0.76 / 0.91, 768x3072x4096 0.71 / 0.89, tf32 1536^3
  // 0.97 / 1.18; forced beyond the rule it lost (2048^3 0.95 / 0.70, two
  // waves instead of one; 4096^3 against clusters 0.97 / 0.87).
  const int64_t waves192 = ceil_div(tm * ceil_div(p.N, 192) * p.batch, sms);
  const bool want192 = c.tile == Tile::k128x256 && c.cluster == 1 && waves192 * 135 < waves256 * 171;
  if (want192 && !c.pingpong) {
    c.tile = Tile::k128x192;
    c.cluster = 1;
  }
  // Split K over a cluster of S CTAs per 128x128 tile (cooperative, no
  // cluster along M; 128x128sk2/4/8 by name).  Measured on an H200 (bf16
  // NN, paired with cuBLAS): S = 2 where the 128x128 tiles fill at most half
  // the SMs beats 128x128 tiles (128x4096x4096 0.68 -> 0.78, 256x4096x4096
  // 0.83 -> 0.87-0.90) but the 128x64 tiles below beat both (0.84, 0.99),
  // so that is not the rule.  Larger S lose: clusters of 4 fit only 30 at
  // a time on 132 SMs (GPC packing), so 32 tiles x 4 ran as two waves (0.61).
  // The rule: S = 8 for very few tiles and a deep K: 128x128
  // tiles <= 1/12 of the SMs (<= 11 on 132) and >= 128 k-blocks.  Measured
  // on an H100 (bf16, paired with cuBLAS, 4c4e2b5), whole 128x64 tiles /
  // stream-K / S = 8: 256x256x8192 0.38 / 0.62 / 0.73, 384x384x8192 0.52 /
  // 0.79 / 0.91, 256x256x65536 0.18 / 0.67 / 0.73; with 16 such tiles
  // stream-K (below) is as good or better: 512x512x16384 0.47 / 0.63 / 0.60,
  // 256x1024x16384 0.58 / 0.80 / 0.73, 128x2048x32768 0.55 / 0.73 / 0.77.
  if (!c.pingpong && c.cluster == 1) {
    const int s = tiles128 * 12 <= sms && k_blocks >= 128 ? 8 : 0;
    // The grid (tiles * S CTAs) must fit gridDim.x.
    if (s > 1 && tiles128 * s <= kMaxInt) {
      c.tile = Tile::k128x128;
      c.split_k = s;
    }
  }
  // Few tiles and no split: 128x64 tiles double the CTA count.
  // 1024^3: 64 tiles of 128x128 on 132 SMs, one per CTA, 16 k-blocks each,
  // about half of each CTA's time fill and epilogue -> 128 CTAs of 128x64.
  // Measured (H200, bf16, paired, 53c3254), 128x128 -> 128x64: 1024^3 0.79
  // -> 0.92, 512x1024x1024 0.70 -> 0.86, 256x4096x1024 0.83 -> 0.93,
  // 128x4096x4096 0.68 -> 0.84, 256x4096x4096 0.83 -> 0.99.
  // Not where stream-K takes the tiles (below) and N is 65..128: two 128x64
  // tiles would each stream the same rows of A through all of K, and with
  // stream-K their pieces run at different k, so A comes from DRAM twice
  // (tf32 NN with M = 128, N = K = 4096 runs as 4096x128x4096: 0.66 of
  // cuBLAS with 128x64 tiles against 0.90 for the same problem in NT).
  // And wherever N <= 64: the same tiles as 128x128 with half the padding
  // (tf32 NT, H200, config_sweep.py, 128x128 -> 128x64: 12608x16x768 0.82
  // -> 1.08, 16384x8x4096 0.76 -> 1.04 of torch; docs/skinny.md, "tf32").
  const bool want_sk = tiles128 * 4 <= sms && k_blocks >= 128;
  const bool narrow_rereads_a = want_sk && p.N > 64 && p.N <= 128;
  if (!c.pingpong && c.cluster == 1 && c.split_k == 0 && (tiles128 * 2 <= sms || p.N <= 64) && !narrow_rereads_a)
    c.tile = Tile::k128x64;
  // Stream-K over the last partial wave (cooperative without cluster or
  // split; 128x256streamk, 128x128streamk, 128x64streamk by name): the rule
  // takes it only for few tiles
  // and a deep K: 128x128 tiles fill <= a quarter of the SMs and K has >= 128
  // k-blocks.  Measured on an H100 (bf16, paired with cuBLAS, 52aec00 /
  // 8ba0ad4), whole tiles / stream-K: 256x256x65536 0.18 / 0.59,
  // 512x512x16384 0.47 / 0.61, 256x1024x16384 0.58 / 0.76, 128x2048x32768
  // 0.56 / 0.72, 384x384x8192 0.52 / 0.68; elsewhere it lost: 128x4096x4096
  // (64 k-blocks) 0.84 / 0.80, 1024x1024x8192 0.93 / 0.53, 1536^3 0.69 /
  // 0.55, 2048^3 0.93 / 0.70, 777x4096x4096 0.82 / 0.49, 4096^3 without
  // clusters 0.96 / 0.75.  Pieces of one tile run at different k at the
  // same time, so the CTAs no longer share A and B k-slices in L2 as a wave
  // of whole tiles does, and each piece moves a 32-128 KB fp32 partial
  // (docs/hopper.md).  (want_sk: above.)
  // 128x64 tiles that still fill at most half the SMs (e.g. 128x4096x4096:
  // 64 tiles on 132 SMs, each streaming a 64-wide band of B through all of
  // K): K split over 2-CTA clusters, 128 CTAs, when stream-K does not take
  // them and each CTA keeps >= 16 k-blocks.  Measured on an H100 (bf16, paired
  // with cuBLAS, 9072ff8), whole 128x64 tiles / split in two: 128x4096x4096
  // 0.85 / 0.90 (NT 0.84 / 0.86-0.89), 100x4096x4096 0.80 / 0.86,
  // 200x1000x2048 0.71 / 0.76, 256x2048x4096 0.80 / 0.80.  Predicted
  // 0.95-1.0 for 128x4096x4096 (twice the CTAs pulling B); both sides sit
  // near the flushed-L2 floor of reading B (docs/skinny.md), ours 2 us above.
  // Not for a grid of more tile rows than tile columns (a tall A, a narrow
  // N): there whole tiles measured faster (H100, bf16, A-B-B-A against
  // no split, explore-*-9091a42-bf16-smalln.txt): 4096x128x4096
  // NN 0.85 -> 1.00, TN 0.86 -> 1.03 of cuBLAS.
  const int64_t tiles64 = tm * ceil_div(p.N, 64) * p.batch;
  if (!want_sk && c.tile == Tile::k128x64 && tiles64 * 2 <= sms && k_blocks >= 32 && tiles64 * 2 <= kMaxInt &&
      tm <= ceil_div(p.N, 64))
    c.split_k = 2;
  if (want_sk && !c.pingpong && c.cluster == 1 && c.split_k == 0 && c.tile != Tile::k128x192) {
    const int64_t tiles = tm * ceil_div(p.N, tile_bn(c.tile)) * p.batch;
    c.sk_tiles = stream_k_tiles(tiles, sms, k_blocks);
  }
  return c;
}

// A tf32 NT (row-major A, column-major B) with a small M runs swapped as
// well: C^T = B^T A^T is again NT, now with the big B as the 128-row tile
// operand and M as the (64-wide) tile's N, so each pipeline stage carries
// twice the rows of B and half the padding.  Measured on an H100 (tf32
// sweep, 721f560), NT as called / NN (which always runs swapped) at N = K =
// 4096: M = 1..64 0.76-0.86 / 0.93-0.95 of cuBLAS.
[[maybe_unused]] bool tf32_nt_swap_wanted(const GemmProblem& p) {
  if (p.dtype != DType::f32 || !p.a.row_major() || p.b.row_major()) return false;
  return p.M <= 64 && p.N > 64;
}

// The time of a whole-tile schedule in 128x256 cooperative waves (x100),
// from the weights choose() uses: a wave of 128x192 tiles 0.79, of 128x128
// cooperative tiles 0.56, of ping-pong 128x128 tiles 0.54; 2-CTA clusters
// count waves of pairs on half the SMs.  -1 for schedules not priced so
// (128x64 tiles, split-K, stream-K).
[[maybe_unused]] int64_t wave_cost(const GemmProblem& p, const Choice& c, int64_t sms) {
  if (c.split_k > 1 || c.sk_tiles > 0 || c.tile == Tile::k128x64) return -1;
  const int64_t tm = ceil_div(p.M, 128), tn = ceil_div(p.N, tile_bn(c.tile));
  const int64_t waves = c.cluster == 2 ? ceil_div(ceil_div(tm, 2) * tn * p.batch, sms / 2 > 0 ? sms / 2 : 1)
                                       : ceil_div(tm * tn * p.batch, sms);
  const int64_t weight = c.pingpong ? 54 : c.tile == Tile::k128x256 ? 100 : c.tile == Tile::k128x192 ? 79 : 56;
  return waves * weight;
}

// A bf16/fp16 problem (any layout), or a tf32 NT, runs swapped, C^T = B^T
// A^T with C^T's tiles stored transposed by TMA, where the swapped
// problem's tiles need at least 5% fewer weighted waves (wave_cost): 128x256
// tiles run 128 rows of M by 256 columns of N, so a small remainder of N
// past a multiple of 256 costs a wave that the same remainder of M would
// not.  E.g. 4096x4104x4096 on 132 SMs: 544 tiles of 128x256 (4.1 waves),
// or ping-pong 128x128 in clusters (8 waves of 0.54), against 4104x4096
// swapped: 528 tiles, 4 waves.  Only where the swapped choice is cooperative
// 128x256 tiles (with or without clusters; for 16-bit types the kernels
// built with the transposed epilogue) and C is 16-byte aligned for its TMA
// stores.  (tf32 NN always runs swapped, see tf32_swapped; a swapped tf32
// TT or TN would need an N-major B.)  (128x256sw by name: wherever such a
// swapped choice exists.)
// `pp`: the caller's problem, `qq`: it swapped.
[[maybe_unused]] bool swap_fills_waves(Planned& pp, Planned& qq) {
  const GemmProblem& p = pp.p;
  const bool tf32_nt = p.dtype == DType::f32 && p.a.row_major() && !p.b.row_major();
  if ((p.dtype == DType::f32 && !tf32_nt) || p.M < 1 || p.N < 1) return false;
  if (!c_tma_ok(p, p.dtype == DType::f32 ? 4 : 2)) return false;
  const Choice& cq = qq.choice();
  if (cq.tile != Tile::k128x256 || cq.pingpong || cq.split_k > 1 || cq.sk_tiles > 0) return false;
  const int64_t sms = sm_count(pp.dev);
  const int64_t cost_p = wave_cost(p, pp.choice(), sms), cost_q = wave_cost(qq.p, cq, sms);
  return cost_p > 0 && cost_q > 0 && cost_q * 100 < cost_p * 95;
}

// The swapped-only widths, narrowest first, and their weight per wave in
// 128x256 waves (x100): the width's share of 256 columns at 97% of the
// 128x256 tile's efficiency per column, as measured for 144, 160 and 208
// (forced at 4096^3 on an H100, against 128x256 pairs; docs/hopper.md,
// round 14), e.g. 128x144 0.58, 128x232 0.93.
constexpr Tile kSwapWidths[7] = {Tile::k128x144, Tile::k128x160, Tile::k128x176, Tile::k128x200,
                                 Tile::k128x208, Tile::k128x224, Tile::k128x232};
constexpr int swap_width_index(Tile t) {
  int i = 0;
  while (kSwapWidths[i] != t) ++i;
  return i;
}
// A TN problem runs swapped with both operands MN-major: its B (the caller's
// A^T) arrives in whole 64-column boxes, and the narrow widths are bound by
// those loads, not by the width's wgmmas.  Its columns of work per k-block:
// the width, or 0.53 x the rows loaded (128 of A, the width rounded up to 64
// of B) where that is more: 144 and 160 as 169, 176 as 176, 208 as 208
// (fitted to the H200's TN sweep, bf16: 128x144sw ran at 0.84 of its NN
// speed at 3072 x 768 x 4096, 160 at 0.93, 176 at 0.97, 208 and 224 at
// 0.98-0.99).  200 and 232 (odd multiples of 8) are not taken: with an
// N-major B they ran at 0.55-0.75 of the widths beside them.
constexpr bool swap_width_mn_ok(Tile t) { return tile_bn(t) % 16 == 0; }
constexpr int64_t swap_width_cols(Tile t, bool tn) {
  const int64_t w = tile_bn(t), load = 53 * (128 + (w + 63) / 64 * 64) / 100;
  return tn && load > w ? load : w;
}
constexpr int64_t swap_width_weight(Tile t, bool tn) {
  return (swap_width_cols(t, tn) * 10000 + 256 * 97 / 2) / (256 * 97);
}
bool tn_layout(const GemmProblem& p) { return !p.a.row_major() && p.b.row_major(); }
// The waves of the caller's problem on swapped-only tiles `t` (128 rows of
// N by the width's columns of M).
int64_t swap_width_waves(const GemmProblem& p, Tile t, int64_t sms) {
  return ceil_div(ceil_div(p.N, 128) * ceil_div(p.M, tile_bn(t)) * p.batch, sms);
}
// Those waves weighted, x 100 (a width a TN problem does not take: past any other).
[[maybe_unused]] int64_t swap_width_cost(const GemmProblem& p, Tile t, int64_t sms) {
  const bool tn = tn_layout(p);
  if (tn && !swap_width_mn_ok(t)) return int64_t{1} << 40;
  return swap_width_waves(p, t, sms) * swap_width_weight(t, tn) * 100;
}

// A bf16/fp16 problem with a row-major A may run swapped on 128-row tiles of
// N by 144, 160, 176, 200, 208, 224 or 232 columns of M (C^T = B^T A^T, whose B = A^T is then
// K-major, so a tile of any width arrives as exactly that many rows; C^T's
// tiles stored transposed by TMA), and so may a TN problem (the weight
// gradient dY^T X: swapped it is TN again, B = A^T N-major, read in whole
// 64-column boxes; swap_width_cols prices that), within two waves and not on
// 200 / 232.  H200, bf16, against the kernels it replaced (config_ab.py,
// 3 rounds): the 23 corpus GEMMs it moves 0.92 -> 0.98 of torch in geomean
// (3072 x 768 x 4096 0.88 -> 0.92, 3072 x 1024 x 4112 0.83 -> 0.95), a grid
// of 50 TN shapes no rule was made from 0.87 -> 0.94 (fp16 likewise); slower
// by > 3%: 768 x 3072 x 12608 / 16384 (the table's 128x128streamk, 1.07 ->
// 1.00), 3840 x 1280 x 514 (0.91 -> 0.87), 1152 x 4096 x 4096 (0.76 -> 0.68).
// M is covered in steps that whole tiles of
// 128 or 256 columns pack badly into waves, e.g. 1536^3 on 132 SMs: 96 tiles
// of 128x192 (one wave, 73% of the SMs) against 132 of 128x144 swapped;
// 777x4096: 112 tiles of 128x256 against 128 of 128x200 (4 x 200 = 800
// columns of M).  The width with the fewest weighted waves (the narrowest
// of equals), if they undercut the choice as called (wave_cost) by >= 5%;
// none where that choice is not
// priced so (split-K, stream-K, 128x64 tiles) or C cannot be stored by TMA;
// where the 128x256 swap (swap_fills_waves) applies, the cheaper of the two
// is the one to undercut.
// Returns the tile, or Tile::k128x256 for none.  (128x144sw ... 128x232sw
// by name: that width wherever the layout and C allow it.)  `pp`, `qq`: the
// caller's problem and it swapped; `fills`: swap_fills_waves(pp, qq).
[[maybe_unused]] Tile swap_width(Planned& pp, Planned& qq, bool fills) {
  const GemmProblem& p = pp.p;
  const bool tn = tn_layout(p);
  if (p.dtype == DType::f32 || (!p.a.row_major() && !tn) || p.M < 1 || p.N < 1 || !c_tma_ok(p, 2)) return Tile::k128x256;
  const int64_t sms = sm_count(pp.dev);
  int64_t cost_p = wave_cost(p, pp.choice(), sms);
  if (cost_p <= 0) return Tile::k128x256;
  if (fills) {  // the 128x256 swap is the one to beat
    const int64_t cost_q = wave_cost(qq.p, qq.choice(), sms);
    if (cost_q > 0 && cost_q < cost_p) cost_p = cost_q;
  }
  Tile best = Tile::k128x256;
  int64_t best_cost = cost_p * 95;  // x100: at least 5% fewer weighted waves
  for (Tile t : kSwapWidths) {
    // TN: within two waves, where the waves saved outweigh the loads' cost
    // (3072 x 3072 x 4096 on 3 waves of 128x208sw: 0.89 against 0.95 for the table's 128x192).
    if (tn && swap_width_waves(p, t, sms) > 2) continue;
    const int64_t cost = swap_width_cost(p, t, sms);
    // (TN: the widest of equals, whose fewer tiles load fewer boxes)
    if (cost < best_cost || (tn && cost == best_cost && best != Tile::k128x256)) {
      best = t;
      best_cost = cost;
    }
  }
  return best;
}

// One-slab tiles for a small M: a 16-bit NN, NT or TN problem runs
// swapped on tiles of 64 rows of N by W columns of M (kSlabWidths, one
// consumer warpgroup), M cut into as many tile columns as still fit one
// wave next to the N / 64 tile rows (one column where those alone pass a
// wave), e.g. 64x4096x4096 on 132 SMs: 64 tile
// rows x 2 tiles of 32 columns (128 CTAs, each streaming 64 rows of B^T
// through all of K, no split), where 128-row tiles give 32 or 64 tiles and
// a split K (or the skinny kernel's 64-row tiles, split 4 ways).  The
// tiles of a tile row are launched next to each other (plan_as).  Measured
// on an H100 (bf16, paired with cuBLAS), as called / one-slab: 64x4096x4096
// NN 0.82 (skinny) / 0.94-0.96, NT 0.80 / 0.95-0.97, 48x4096x4096 NT
// 0.80 / 0.97-0.99, 100x4096x4096 0.85-0.87 (128x64sk2) / 0.95-0.96,
// 128x4096x4096 NN 0.90 / 0.95-0.98, NT 0.89 / 0.96-0.98, 128x2048x4096
// 0.88 / 0.98-1.00, 64x8192x4096 0.90 (128x64) / 0.99, 64x6144x4096 0.81 /
// 0.96 (explore 2c32691, 9d93905, aa65e63, 069e338), and against the
// skinny kernel (dispatch prefers them from M = 17) 32x4096x4096 NN 0.88 /
// 0.96, 17x4096x4096 NT 0.86-0.89 / 0.94 (explore 4ef3737).  Returns W, or 0 for
// none.  (64x8sw ... 64x64sw by name: width W wherever the layout and C
// allow it.)
// slab_rule: the rule for a problem that passed slab_width's checks (or
// slab_width_as_called's); `b_n_major`: its B is N-major (the NN branch).
[[maybe_unused]] int slab_rule(const Planned& pp, bool b_n_major) {
  const GemmProblem& p = pp.p;
  const int64_t sms = sm_count(pp.dev);
  const int64_t rows = ceil_div(p.N, 64) * p.batch;  // tile rows (64 of the caller's N each)
  if (p.M > 128) return 0;
  // An N-major B (NN): the skinny kernel is ahead for M <= 16, and for
  // M <= 32 against more tile rows than SMs (16x14336x4096 1.05 / 1.02,
  // 16x11008x4096 1.01 / 0.94, 8x6144x4096 0.98 / 0.94, 32x14336x4096 0.98 /
  // 0.97; skinny / one-slab, explore e47869d-slabwide).  K-major (NT): the
  // one-slab tiles are (16x8192x4096 0.93 / 0.99, 8x4096x4096 0.98 / 1.03).
  if (b_n_major && (p.M <= 16 || (p.M <= 32 && rows > sms))) return 0;
  int64_t w;
  if (rows > sms) {
    // More tile rows than SMs: one tile column (M rounded up to 8), where
    // the tile rows fill their waves to >= 60% (64x8704x4096, 136 rows:
    // 0.90 -> 0.82), >= 70% above 16 rows of M (172 rows: 16x11008x4096 NT
    // 0.94 -> 0.97 against the skinny kernel's 16-row tiles, but
    // 32x11008x4096 NT 0.98 -> 0.96, 64x11008x4096 NN 0.925 -> 0.916) and,
    // above 32 rows, within two waves (128-row tiles stream a longer N as
    // fast: 64x28672x4096 NN 0.95 -> 0.92, 64x32000x4096 NT 1.07 -> 1.06).
    // Measured (as called / one-slab):
    // 64x14336x4096 NN 0.92 / 0.98, NT 0.95-0.97 / 1.00, 40x14336x4096 NN
    // 0.89 / 0.98, 64x11008x4096 0.89 / 0.89, 64x14336x1024 0.92 / 0.96,
    // 32x28672x4096 NT 0.94 / 1.01, 16x32000x4096 NT 1.01 / 1.08,
    // 8x128256x4096 NT 1.01 / 1.08, 1x14336x4096 NT 0.96 / 1.00 (explore
    // e47869d-slabwide*, afbfd75-bf16-slabwide-rule).
    // (Not that last limit for a batch: there the alternative is the skinny
    // kernel, and the one-slab tiles measured 3-4x faster on attention-style
    // PV products, e.g. 128 x 512x64x512 NN: 0.35 -> 1.00x torch, 96 x
    // 1024x64x1024 0.43 -> 1.03 on 64x64 as called; H200, table off,
    // explore/dispatch-ab-NVIDIA-H200.json's batched_small_n.)
    const int64_t waves = ceil_div(rows, sms);
    if (p.M > 64 || rows * 10 < waves * sms * (p.M <= 16 ? 6 : 7) || (p.M > 32 && waves > 2 && p.batch == 1))
      return 0;
    w = ceil_div(p.M, 8) * 8;
  } else {
    // At most 4 tile columns: narrower tiles re-read B^T's rows too often
    // (128x1024x8192 on 6 columns of 24: 0.88 -> 0.73, 64x512x16384 0.55 ->
    // 0.42, 128x256x8192 0.74 -> 0.50 against the split-K / skinny choices;
    // explore 4ef3737).
    if (sms / rows > 4) return 0;
    w = ceil_div(ceil_div(p.M, sms / rows), 8) * 8;
  }
  if (w > 64) return 0;
  // Up to 32 rows of M, where the alternative is the skinny kernel's 16- or
  // 32-row tiles splitting K over every SM, only with tile rows for >= 2/5
  // of the SMs: at 36 (N = 2304) they lose on an H200 (skinny / one-slab:
  // 16x2304x4096 NT 1.00 / 0.93 on two columns of 8, 1.01 / 0.90 on one of
  // 24; 24x2304x4096 NT 0.97 / 0.92) though not on an H100 (0.94 / 1.01,
  // 0.90 / 1.03); at 64 (N = 4096) they win on both (explore
  // 3617b20-slabwide-rule, 3ef21d1-slab816).
  if (p.M <= 32 && rows * 5 < sms * 2) return 0;
  return static_cast<int>(w);
}

// The width of one-slab tiles whose B is N-major and `n` wide (NN / TN as
// called, TN swapped; slab_width_as_called has the measurements), given
// the rule's width `w`: none unless B's rows are whole 32-byte sectors,
// never where the rule says 8 or 56.  As called, one tile column where n <=
// 64 (16 wide, not for TN; 32; 64 for 48 and 64 columns), 64-wide columns
// past it: the rule's narrower split of n (w < n, e.g. 4096x64 on two
// columns of 32) re-reads A once per column and B's 64-wide boxes (H100,
// bf16, rule's width / one column: 4096x64x4096 NN 1.03 / 1.13 (64), TN
// 0.99-1.00 / 1.16, 4096x32x4096 NN 0.89-0.90 (16) / 0.98 (32), TN 0.81
// (skinny) / 0.91, 3072x32x4096 NN 0.87-0.88 / 0.94, TN 0.86-0.88 / 0.91,
// 4096x32x8192 TN 0.96 / 1.04, 2048x64x4096 NN 0.71 (16) / 0.94-0.95, TN
// 0.70-0.73 (skinny) / 0.92-0.94; explore 1771da0-smalln32, -smalln64;
// 2048x32x4096 TN, rule 8, stays on the skinny kernel: 0.92 / 0.90 on 32).
// Swapped (TN with a small M, C^T's B the caller's A^T): 32 or 64 only
// (skinny / one-slab: 64x4096x4096 0.91 / 0.95-0.96 on 32, 128x4096x4096
// 0.99 (128x64sk2) / 1.12-1.17 and 64x14336x4096 1.00 (128x128) / 1.06-1.07
// on 64, but 48x4096x4096 0.97 / 0.94 rounded up from 24 to 64,
// 32x4096x4096 0.92-0.93 / 0.88 on 16; explore 86a59f2-nmajor-*).
[[maybe_unused]] int n_major_width(int w, int64_t n, bool tn, bool swapped) {
  if (n % 16 != 0 || w == 0 || w == 8 || w == 56) return 0;
  if (swapped) return w == 32 || w == 64 ? w : 0;
  return n <= 16 ? (tn ? 0 : 16) : n <= 32 ? 32 : 64;
}

// 33..64 rows of M (the small side) against at most a wave of N / 64 tile
// rows, K 1024..2048, one batch: where the rules above leave such a problem
// to the skinny kernel (too few tile rows for their tile columns, or a
// width a TN problem's N-major B cannot take), one column of 64-wide
// one-slab tiles instead.  Measured (H200, bf16, table off, 3 interleaved
// rounds, few_rows_slab in explore/dispatch-ab-NVIDIA-H200.json): over every
// layout, both orientations, small side 48 and 64, long side 512-4096, the
// skinny kernel (split 4-8 ways) ran 0.45-0.67 of torch, the 64-wide
// one-slab tiles 0.83-1.05 (TN 64x1024x2048 0.57 -> 0.89, 1024x64x2048
// 0.55 -> 0.88, NN 64x1024x2048 0.57 -> 0.90, NT 1024x64x2048 0.56 ->
// 0.93); at K = 8192 the skinny kernel's deeper split wins (0.69-0.83
// against 0.46-0.83), K = 4096 and K < 1024 were not measured.
[[maybe_unused]] bool few_rows_slab(const Planned& pp) {
  const GemmProblem& p = pp.p;
  return p.batch == 1 && p.M > 32 && p.M <= 64 && p.K >= 1024 && p.K <= 2048 &&
         ceil_div(p.N, 64) <= sm_count(pp.dev);
}

// What either orientation of the one-slab tiles needs: a 16-bit type, not
// TT, C's rows 16-byte aligned.
[[maybe_unused]] bool slab_problem(const GemmProblem& p) {
  return p.dtype != DType::f32 && (p.a.row_major() || p.b.row_major()) && c_tma_ok(p, 2);
}

// slab_width: the rule's checks for a small M run swapped.
[[maybe_unused]] int slab_width(const Planned& pp) {
  const GemmProblem& p = pp.p;
  // (p.M > p.N: one-slab tiles lie along the longer side, so such a problem
  // is slab_width_as_called's.)
  if (!slab_problem(p) || p.M < 1 || p.M > p.N) return 0;
  const int w = slab_rule(pp, p.b.row_major());
  // A column-major A (TN, e.g. LoRA's dA = dH^T X): C^T's B is then A^T,
  // N-major and `p.M` wide.
  const auto width = [&](int rule_w) { return p.a.row_major() ? rule_w : n_major_width(rule_w, p.M, true, true); };
  const int got = width(w);
  return got == 0 && few_rows_slab(pp) ? width(64) : got;
}

// One-slab tiles for a small N: a 16-bit NN, NT or TN problem runs as
// called on tiles of 64 rows of M by W columns of N.  With a column-major B
// (NT: e.g. a linear layer with few outputs) that is the kernel slab_width
// gives the swapped problem `qq` (N x M, also NT): the same operands in the
// same shared-memory layouts, the same tile order and L2 policy; only C is
// stored as it is.  A row-major B (NN: e.g. LoRA's dY @ B; TN: its weight
// gradient dY^T @ X, A M-major) arrives as one 64-wide box per k-block, of
// which wgmma reads the first W columns.  The rule is slab_width's for qq
// with a K-major B; for a row-major B only where B's rows are whole 32-byte sectors
// (N % 16 == 0), in one tile column 16 (not TN), 32 or 64 wide up to N = 64
// and 64-wide columns past it (n_major_width).  Measured (H100, bf16, before
// / one-slab): an 8-column tile
// loads 8 times the B it uses (4096x16x4096 NN 0.94-0.96 (skinny) / 0.64);
// rows that are not 32-byte multiples lose (4096x40x4096 NN 0.94-0.97 / 0.90 (64) /
// 0.69 (32), 14336x40x4096 0.94 / 0.81, 4096x72x4096 0.87-0.88 / 0.78,
// 4096x120x4096 0.80 on 64 against 0.91-0.93 on 128x64); tiles 24-56 wide lose (4096x48
// NN on 24: 0.87 / 0.67, 4096x112 on 56: 1.00 / 0.82) where the 64-wide
// ones win (4096x48x4096 NN 0.86-0.88 / 0.98-1.00, 6144x48 0.74 / 1.00,
// 8192x48 0.84-0.85 / 1.11, 4096x80 0.99-1.00 / 1.08, 4096x96 1.02-1.03 /
// 1.13-1.14, 2048x96 0.76 / 0.97; TN 8192x48 0.88 / 1.03, 4096x96 1.03 /
// 1.07-1.09), but not 56 (4096x112 0.98-1.00 / 0.94-0.95 on 64); 16 columns are
// even against the skinny kernel (4096x32x4096 NN 0.81-0.82 / 0.85-0.87, TN
// 0.83 / 0.83-0.84, where one 32-wide column wins: 0.98 / 0.91,
// n_major_width; 14336x16x4096 NN 1.02-1.03 / 1.04) but TN loses past
// a wave (14336x16x4096 1.08 / 0.94); 32 and 64 win (4096x64x4096 NN
// 0.77-0.78 / 1.03, TN 0.78 / 0.98, 8192x64x4096 NN 0.79 / 1.13, TN 0.83 /
// 1.13-1.14, 4096x128x4096 NN 0.98-0.99 / 1.10, TN 1.01 / 1.13-1.14;
// explore 3ebaf51-smalln-nn, 87e3624-smalln-widths, 10ad704-nn-roundup,
// aedad6b-tn-ascalled, aedad6b-roundup64).  Returns W, or 0 for none.
[[maybe_unused]] int slab_width_as_called(const Planned& pp, const Planned& qq) {
  const GemmProblem& p = pp.p;
  if (!slab_problem(p) || p.M <= p.N || p.N < 1) return 0;
  const int w = slab_rule(qq, false);
  const auto width = [&](int rule_w) {
    return p.b.row_major() ? n_major_width(rule_w, p.N, !p.a.row_major(), false) : rule_w;
  };
  const int got = width(w);
  return got == 0 && few_rows_slab(qq) ? width(64) : got;
}

// One-slab tiles for mid-size problems (both sides > 128), which the rules
// give 128x64 tiles (whole, or K split in two) because 128x128 ones would
// fill at most half the SMs, or 128x128 tiles within one wave: a 16-bit NN
// or NT problem runs swapped on tiles of 64 rows of N by W columns of M, W
// the narrowest width (of kSlabWidths from 32 to 160) at which the N / 64
// tile rows times M / W tile columns fit one wave, where such a tile holds
// <= 85% of the work a 128x64 / 128x128 tile (or its half, split) holds per
// SM and wave.  The 128x128 case (widths 144 and 160 added for it; H200,
// bf16, config_ab.py against the kernels replaced): 60 NN / NT shapes of M
// 300-1700 by N 768-4096 0.80 -> 0.96 of torch, none slower; corpus
// 1584 x 768 x 3072 NT 0.77 -> 0.94 (cuBLAS runs 64x144 there), 394 x 2304
// x 768 NT 0.84 -> 0.98.  E.g. 514 x 1280
// x 3840 NN on 132 SMs: 5 x 20 tiles of 128x64, the last tile row 2 / 128
// used, against 20 x 6 of 64x88 (0.69 of the work per SM); cuBLAS runs it
// on 120 CTAs of 64x88 (ncu, H200: 11.5 us against our 22.1).  Returns W,
// or 0 for none.  (64x72sw ... 64x128sw by name: wherever the layout and C
// allow it.)
[[maybe_unused]] int mid_slab_width(Planned& pp) {
  const GemmProblem& p = pp.p;
  if (!slab_problem(p) || !p.a.row_major() || p.M <= 128 || p.N <= 128) return 0;
  const Choice& c = pp.choice();
  if ((c.tile != Tile::k128x64 && c.tile != Tile::k128x128) || c.sk_tiles > 0 || c.cluster != 1 || c.pingpong)
    return 0;
  const int64_t sms = sm_count(pp.dev);
  const int64_t bn = tile_bn(c.tile);
  // 128x128 tiles: only where they fill at most one wave.
  if (bn == 128 && (c.split_k > 1 || ceil_div(p.M, 128) * ceil_div(p.N, 128) * p.batch > sms)) return 0;
  const int64_t rows = ceil_div(p.N, 64) * p.batch;
  if (rows > sms) return 0;
  const int64_t need = ceil_div(p.M, sms / rows);
  int w = 0;
  for (int x : sm90::kSlabWidths)
    if (w == 0 && x >= need) w = x;
  // Not narrower than 32 columns: many narrow tile columns each stream all
  // of B^T's rows (slab_rule: 128x256x8192 on tiles 8 wide lost 0.74 ->
  // 0.50).
  if (w < 32) return 0;
  const int64_t split = c.split_k > 1 ? c.split_k : 1;
  const int64_t waves = ceil_div(ceil_div(p.M, 128) * ceil_div(p.N, bn) * p.batch * split, sms);
  return int64_t{64} * w * 100 * split <= waves * 128 * bn * 85 ? w : 0;
}

// TN problems (weight gradients dW = dY^T X of small layers) whose 128x64
// tiles, whole or K split in two, fill at most half the SMs run as called
// on one-slab tiles of 64 rows of M by 64 columns of N: twice the CTAs,
// each streaming all of K.  K 1024-4096, one batch, M and N past 64, B's
// rows whole 32-byte sectors (n_major_width).  Measured (H200, bf16, table
// off, config_sweep.py, 3 interleaved rounds; tn_sub_wave in
// explore/dispatch-ab-NVIDIA-H200.json), rules / 64x64: 320x1024x1024 0.88
// / 1.05, x2048 0.76 (128x64sk2) / 0.97, x4096 0.75 / 0.91; 640x640x1024
// 0.80 / 0.93, x2048 0.84 / 1.07, x4096 0.99 / 1.01; 1024x384x1024 0.82 /
// 1.02, x2048 0.80 / 0.94, x4096 0.69 / 0.90 (48-50 tiles of 128x64); the
// tuning pass, 1152x384x1576 (54 tiles) 0.76 -> 0.95, fp16 0.80 -> 0.96.
// From 80 tiles 128x64 wins (256x2560x2048 0.83 / 0.70, 512x1536 0.87 /
// 0.71, 1408x640 0.91 / 0.78); 64x32 and 64x48 tiles lose past K = 1024,
// split K (128x64sk2, 128x128sk2) everywhere here.  Returns W, or 0 for none.
[[maybe_unused]] int tn_few_tiles_slab(Planned& pp) {
  const GemmProblem& p = pp.p;
  if (!slab_problem(p) || p.a.row_major() || !p.b.row_major() || p.batch != 1 || p.M <= 64 || p.N <= 64 ||
      p.K < 1024 || p.K > 4096)
    return 0;
  const Choice& c = pp.choice();
  if (c.tile != Tile::k128x64 || c.sk_tiles > 0 || c.cluster != 1 || c.pingpong) return 0;  // (128x64 splits K in two at most)
  if (ceil_div(p.M, 128) * ceil_div(p.N, 64) * 2 > sm_count(pp.dev)) return 0;
  return n_major_width(64, p.N, true, false);
}

// Whether the Hopper kernel takes `p` (already swapped where `swapped`); if
// so, its Choice (c_trans set when swapped).  `width`: a swapped-only
// 128-row tile (swap_width), `slab`: a one-slab width (slab_width, or
// slab_width_as_called where not swapped).
bool plan_as(Planned& planned, bool swapped, Choice* choice, Tile width = Tile::k128x256, int slab = 0) {
#if !defined(TILED_WITH_SM90A)
  (void)planned;
  (void)swapped;
  (void)width;
  (void)slab;
  (void)choice;
  return false;
#else
  const GemmProblem& p = planned.p;
  const DeviceInfo& dev = planned.dev;
  if (dev.sm_major != 9 || dev.sm_minor != 0 || dev.num_sms <= 0) return false;
  int es = 0;
  switch (p.dtype) {
    case DType::bf16:
    case DType::f16: es = 2; break;
    case DType::f32:
      if (!p.allow_tf32) return false;
      // wgmma reads tf32 only K-major from shared memory: B column-major (a
      // row-major B was swapped above); a column-major A is read into
      // registers by cooperative whole-tile configs only.  Other fp32
      // layouts are staged or go to the SIMT kernels.
      if (p.b.row_major()) return false;
      es = 4;
      break;
    default: return false;
  }
  if (p.M < 1 || p.N < 1 || p.K < 1 || p.batch < 1) return false;
  if (p.M > kMaxInt || p.N > kMaxInt || p.K > kMaxInt || p.batch > kMaxInt) return false;
  if (ceil_div(p.M, 128) * ceil_div(p.N, 128) * p.batch > kMaxInt) return false;
  if (!operand_ok(p.a, p.batch, es) || !operand_ok(p.b, p.batch, es)) return false;
  Choice c = planned.choice();
  if (slab > 0 || tile_swapped_only(width)) {  // cooperative whole tiles, no cluster
    Choice w;
    w.tile = width;
    w.slab = slab;
    w.a_mn = c.a_mn;
    w.b_mn = c.b_mn;
    // One-slab tiles: the tiles of one tile row (the same 64 rows of B^T)
    // adjacent in launch order (measured on an H100, bf16, groups of 8 / 1 tile rows: 64x4096x4096 NN
    // 0.89 / 0.93-0.97, NT 0.91 / 0.95-0.97, 128x2048x4096 0.90-0.91 /
    // 0.98-1.00; explore aa65e63).
    w.group_m = slab > 0 ? 1 : c.group_m;
    // One-slab tiles: the layouts built for them; 144-232: swapped, a K-major
    // B or both operands MN-major (the caller's TN).
    if (slab > 0 ? !sm90::slab_built(slab, w.a_mn, w.b_mn, swapped) : (!swapped || (w.b_mn && !w.a_mn))) return false;
    c = w;
  }
  if (dev.max_smem_per_block_optin <
      static_cast<size_t>(c.slab > 0 ? sm90::slab_smem_bytes(c.slab, c.b_mn) : sm90::tile_smem_bytes(c.tile, c.b_mn)))
    return false;
  // Neither a tf32 register A nor a transposed C has ping-pong or split-K kernels.
  if ((swapped || (p.dtype == DType::f32 && c.a_mn)) && (c.pingpong || c.split_k > 1)) return false;
  c.c_trans = swapped;
  if (choice) *choice = c;
  return true;
#endif
}

// The configurations, by name: "sm90_<dtype>_<variant>[sw]_<a><b>" (see
// hopper_config_name).  The variant's index is the list's, which the Choice
// <-> name mapping below (variant_index, variant_choice) follows.
const char* const kDtypes[3] = {"bf16", "f16", "tf32"};
constexpr int kNumVariants = 37;
const char* const kVariants[kNumVariants] = {
    "128x256",    "128x128",   "128x256c2",      "128x128pp",      "128x128ppc2",   "128x128sk2",
    "128x128sk4", "128x128sk8", "128x64",        "128x256streamk", "128x128streamk", "128x64streamk",
    "128x192",    "128x64sk2",
    // the swapped-only widths, in kSwapWidths order
    "128x144", "128x160", "128x176", "128x200", "128x208", "128x224", "128x232",
    // the one-slab widths, in kSlabWidths order
    "64x8", "64x16", "64x24", "64x32", "64x40", "64x48", "64x56", "64x64", "64x72", "64x80", "64x88", "64x96",
    "64x112", "64x128", "64x144", "64x160"};
constexpr int kFirstSwapWidth = 14, kFirstSlab = 21;
static_assert(kFirstSwapWidth + sizeof(kSwapWidths) / sizeof(kSwapWidths[0]) == kFirstSlab &&
                  kFirstSlab + sizeof(sm90::kSlabWidths) / sizeof(sm90::kSlabWidths[0]) == kNumVariants,
              "one name per width");
const char* const kLayouts[4] = {"nt", "nn", "tt", "tn"};  // [a_mn][b_mn]

int variant_index(const Choice& c) {
  const bool sk = c.sk_tiles > 0;
  return c.slab > 0                                ? kFirstSlab + sm90::slab_width_index(c.slab)
         : c.pingpong                              ? (c.cluster == 2 ? 4 : 3)
         : c.split_k > 1 && c.tile == Tile::k128x64 ? 13
         : c.split_k > 1                           ? (c.split_k == 2 ? 5 : c.split_k == 4 ? 6 : 7)
         : c.tile == Tile::k128x256                ? (c.cluster == 2 ? 2 : sk ? 9 : 0)
         : c.tile == Tile::k128x64                 ? (sk ? 11 : 8)
         : c.tile == Tile::k128x192                ? 12
         : tile_swapped_only(c.tile)               ? kFirstSwapWidth + swap_width_index(c.tile)
                                                   : (sk ? 10 : 1);
}

// The schedule fields of variant `v` (tile, cluster, ping-pong, split-K,
// stream-K as a flag, one-slab width) over the layout fields of `base`.
Choice variant_choice(int v, const Choice& base, bool* streamk) {
  Choice c;
  c.a_mn = base.a_mn;
  c.b_mn = base.b_mn;
  c.group_m = base.group_m;
  *streamk = v == 9 || v == 10 || v == 11;
  static const Tile kTiles[14] = {Tile::k128x256, Tile::k128x128, Tile::k128x256, Tile::k128x128, Tile::k128x128,
                                  Tile::k128x128, Tile::k128x128, Tile::k128x128, Tile::k128x64,  Tile::k128x256,
                                  Tile::k128x128, Tile::k128x64,  Tile::k128x192, Tile::k128x64};
  if (v >= kFirstSlab) {
    c.slab = sm90::kSlabWidths[v - kFirstSlab];
  } else if (v >= kFirstSwapWidth) {
    c.tile = kSwapWidths[v - kFirstSwapWidth];
  } else {
    c.tile = kTiles[v];
    c.cluster = v == 2 || v == 4 ? 2 : 1;
    c.pingpong = v == 3 || v == 4;
    c.split_k = v == 5 || v == 13 ? 2 : v == 6 ? 4 : v == 7 ? 8 : 0;
  }
  return c;
}

// A configuration forced by name (TILED_CONFIG, or the table's or the
// autotuner's choice: settings.h's forced_config), as hopper_config_name
// (and ttg.kernel_name) spells it: "sm90_bf16_128x128pp_nt" takes bf16 NT
// problems onto ping-pong 128x128 tiles; a bare variant ("128x128pp",
// "128x200sw") takes any dtype and layout.  Where the configuration cannot
// run the problem (another dtype or layout, a width or schedule its layout
// has no kernel for, too few k-blocks to split) it is declined and the
// choice is the usual one.  For tf32 the orientation is the rules' (its
// names carry no "sw").  Returns false when `name` is no sm90 configuration
// that applies; else plans it as plan() does.
bool plan_named(const GemmProblem& caller, const DeviceInfo& dev, std::string v, GemmProblem* launched,
                Choice* choice) {
  if (caller.M < 1 || caller.N < 1 || caller.K < 1) return false;
  const int d = caller.dtype == DType::bf16 ? 0 : caller.dtype == DType::f16 ? 1 : 2;
  if (v.rfind("sm90_", 0) == 0) {
    const std::string head = std::string("sm90_") + kDtypes[d] + "_";
    const std::string tail = std::string("_") + kLayouts[(caller.a.row_major() ? 0 : 2) + (caller.b.row_major() ? 1 : 0)];
    if (v.rfind(head, 0) != 0 || v.size() < head.size() + tail.size() ||
        v.compare(v.size() - tail.size(), tail.size(), tail) != 0)
      return false;
    v = v.substr(head.size(), v.size() - head.size() - tail.size());
  }
  const bool tf32 = caller.dtype == DType::f32;
  bool swapped = false;
  if (v.size() > 2 && v.compare(v.size() - 2, 2, "sw") == 0) {
    if (tf32) return false;
    swapped = true;
    v.resize(v.size() - 2);
  }
  int index = -1;
  for (int i = 0; i < kNumVariants; ++i)
    if (v == kVariants[i]) index = i;
  if (index < 0) return false;
  if (tf32) swapped = tf32_swapped(caller) || tf32_nt_swap_wanted(caller);
  if (index >= kFirstSwapWidth && index < kFirstSlab && !swapped) return false;  // swapped only
  Planned pp{caller, dev}, qq{swap_operands(caller), dev};
  Planned& target = swapped ? qq : pp;
  bool streamk = false;
  Choice c = variant_choice(index, target.choice(), &streamk);
  // What the rules never combine (the kernels that exist): 2-CTA clusters
  // over >= 2 tile rows, 128x256 (16-bit also ping-pong) only, tf32 no
  // ping-pong cluster; split-K and stream-K cooperative without cluster;
  // 128x64 / 128x192 without cluster; a split no deeper than the k-blocks.
  const GemmProblem& q = target.p;
  const int64_t tm = ceil_div(q.M, 128);
  const int64_t k_blocks = ceil_div(q.K, tf32 ? 32 : 64);
  if (c.cluster == 2 && (tm < 2 || (tf32 && c.pingpong))) return false;
  if (c.split_k > k_blocks || (c.split_k > 1 && ceil_div(q.N, tile_bn(c.tile)) * tm * q.batch * c.split_k > kMaxInt))
    return false;
  if (swapped && !tf32 && c.slab == 0 && !tile_swapped_only(c.tile) &&
      (c.tile != Tile::k128x256 || c.pingpong || c.split_k > 1 || streamk))
    return false;  // the 16-bit transposed-C kernels: 128x256 cooperative, or the swapped-only widths
                   // (tf32: every cooperative whole-tile kernel; plan_as checks)
  if (streamk) {
    const int64_t tiles = tm * ceil_div(q.N, tile_bn(c.tile)) * q.batch;
    c.sk_tiles = stream_k_tiles(tiles, sm_count(dev), k_blocks);
    if (c.sk_tiles <= 0) return false;
  }
  target.c = c;
  target.chosen = true;
  const bool other = c.slab > 0 || tile_swapped_only(c.tile);
  if (!plan_as(target, swapped, choice, other ? c.tile : Tile::k128x256, c.slab)) return false;
  if (launched) *launched = target.p;
  return true;
}

// The first name of the forced configuration list that plan_named takes.
bool plan_forced(const GemmProblem& caller, const DeviceInfo& dev, GemmProblem* launched, Choice* choice) {
  return any_config_item(forced_config(),
                         [&](const std::string& name) { return plan_named(caller, dev, name, launched, choice); });
}

// `off32`, where given: set when the choice is off32_cluster's.
bool plan_rules(const GemmProblem& caller, const DeviceInfo& dev, GemmProblem* launched, Choice* choice,
                bool* off32 = nullptr);

// Whether the Hopper kernel takes `caller`; if so, the problem it launches
// (the caller's, or tf32 swapped as above) and its Choice, where asked for.
// A 16-bit problem with an epilogue to fuse whose rules' choice is a
// cooperative whole tile as called runs on the ping-pong tiles of the same
// clustering instead: there one warpgroup's epilogue overlaps the other's
// mainloop, in a cooperative kernel it does not (H100: the in-kernel
// epilogue of a 4096 x 11008 x 4096 SiLU GEMM +46 us on 128x128ppc2, +119
// us on 128x256c2; docs/fused.md).
bool plan(const GemmProblem& caller, const DeviceInfo& dev, GemmProblem* launched = nullptr,
          Choice* choice = nullptr) {
  if (plan_forced(caller, dev, launched, choice)) return true;
  if (!caller.epi.any() || caller.dtype == DType::f32) return plan_rules(caller, dev, launched, choice);
  GemmProblem q;
  Choice c;
  if (!plan_rules(caller, dev, &q, &c)) return false;
  if (!c.c_trans && c.slab == 0 && !c.pingpong && c.split_k <= 1 && c.sk_tiles == 0 &&
      plan_named(caller, dev, c.cluster == 2 ? "128x128ppc2" : "128x128pp", launched, choice))
    return true;
  if (launched) *launched = q;
  if (choice) *choice = c;
  return true;
}

// A 16-bit problem of few k-blocks whose choice as called is 128x256 in
// 2-CTA clusters runs ping-pong 128x128 tiles without clusters, before the
// swapped-only widths are considered (the A/B below measured those at
// 0.90-1.02 where this gives 1.01-1.11): with so short a mainloop the
// cooperative tile's epilogue is a large share of its time, and ping-pong
// overlaps one warpgroup's with the other's mainloop.  Measured in the
// H200's tuning pass (bf16, 135 GEMMs whose rules' choice was 128x256c2):
// at K = 128 ... 1280 (2-20 k-blocks) 128x128pp ran 4-16% faster on 25 of 28
// non-batched ones (NN 8192 x 8192 x 256 1.12, NT 16384 x 4096 x 512 1.15,
// TN 4096 x 4096 x 1024 1.10), the losses a TT (8192^2 x 1000 0.79) and two
// C whose rows are not 16-byte aligned (N = 50257, 30522); from K = 2048
// they were even (0.98-1.07), from 3072 slower.  (Not for batches: attention
// products at K = 64-128 were even.)  The rule against the kernels it
// replaced (benchmarks/research/config_ab.py, table off, 3 rounds;
// explore/dispatch-ab-NVIDIA-H200.json): 40 of 43 GEMMs faster, 0.955 ->
// 1.066x torch in geomean, none below 0.97 (27 before), e.g. TN 256000 x
// 2048 x 512 0.93 -> 1.17, NT 12608 x 1536 x 384 (128x144sw) 0.90 -> 1.11;
// slower NT 16384 x 8192 x 96 1.04 -> 1.01, NN 3000 x 5120 x 1280
// (128x232sw) 1.00 -> 0.98.
bool low_k_pingpong(const GemmProblem& p, const Choice& c) {
  const int64_t k_blocks = ceil_div(p.K, 64);
  const bool tt = !p.a.row_major() && !p.b.row_major();
  return p.dtype != DType::f32 && p.batch == 1 && k_blocks >= 2 && k_blocks <= 20 && !tt && c_tma_ok(p, 2) &&
         c.tile == Tile::k128x256 && c.cluster == 2 && !c.pingpong && c.split_k <= 1 && c.sk_tiles == 0 &&
         !c.c_trans && c.slab == 0;
}

// A 16-bit operand whose rows, as TMA reads them, start 16 bytes past a
// 32-byte boundary (a leading dimension of 8 mod 16 elements: K = 1000,
// 3000, 5000 ...; or such a base pointer) is read at about half the speed:
// H200, bf16, NT 3072 x 3072 x K on 128x144sw, paired with torch.matmul
// (table off): K = 2984 / 3000 / 3016 / 3032 / 3048 / 3064 0.53-0.55, K =
// 2992 / 3008 / 3024 / 3040 / 3056 0.85-0.96; K = 3000 with rows padded to
// 3008 0.94, only A's or only B's 0.75 / 0.70.  A 2-CTA cluster loads each
// multicast box once for both CTAs, which halves the rows one of them reads,
// and so runs such problems near their aligned speed: 128x256c2 from ~one
// wave of its tiles (2048^2 x 3000 NT 0.67 -> 0.90, 4096^2 x 1000 NT 0.53
// -> 0.94, 4096 x 1000 x 4096 NN 0.71 -> 0.97, 3000^3 NT 0.55 -> 0.72),
// 128x128ppc2 where 128x128 tiles fill a third to one wave (1024^2 x 3000
// NT 0.64 -> 0.78, 1000^3 NN 0.73 -> 0.84, 3072 x 512 x 3000 NT 0.63 ->
// 0.82).  Between those bands (more than a wave of 128x128 tiles, less than
// 9/10 of one of 128x256) 128x256c2 where A is row-major (NN, NT: 7 shapes,
// 0.65-1.92 -> 0.67-2.72, 1536^2 x 3000 NT 0.71 -> 0.80; one TT, 1536^2 x
// 1000, lost: 0.83 -> 0.69).  After the one-slab rules: before them,
// 128x128ppc2 lost to 64x72sw / 64x80sw at 129-300 rows (0.63-0.91 ->
// 0.55-0.74).  Over the 51 GEMMs it moves of a grid no rule was made from
// (K = 1000 ... 5000, all four layouts, config_ab.py): bf16 0.74 -> 0.88 in
// geomean, one slower (TT 2048 x 500 x 3000 1.68 -> 1.54); fp16 (41) 0.69
// -> 0.82.  Copying the operands to aligned rows measured slower (0.60-0.85,
// the copy's time).  (docs/dispatch.md, "Rows 16 bytes off a 32-byte
// boundary"; not measured for batches, tf32 or split K.)
bool rows_off32(const GemmProblem& p) {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return false;
  auto off = [&](const Operand& o) {
    return reinterpret_cast<uintptr_t>(o.ptr) % 32 != 0 || outer_stride(o) * 2 % 32 != 0 ||
           (p.batch > 1 && o.batch_stride * 2 % 32 != 0);
  };
  return off(p.a) || off(p.b);
}

// `c`: the choice as called (a split K or stream-K choice is kept).  From 8
// k-blocks (measured: K = 1000 ... 5000).
const char* off32_cluster(const GemmProblem& p, const DeviceInfo& dev, const Choice& c) {
  if (p.batch != 1 || p.M <= 128 || p.N < 128 || p.K < 8 * 64 || c.split_k > 1 || c.sk_tiles > 0 || !rows_off32(p))
    return nullptr;
  const int64_t sms = sm_count(dev), tm = ceil_div(p.M, 128), tiles128 = tm * ceil_div(p.N, 128);
  if (tiles128 > sms && (tm * ceil_div(p.N, 256) * 10 >= sms * 9 || p.a.row_major())) return "128x256c2";
  if (tiles128 * 3 >= sms && tiles128 <= sms) return "128x128ppc2";
  return nullptr;
}

// The rules' choice (plan without a forced configuration).
bool plan_rules(const GemmProblem& caller, const DeviceInfo& dev, GemmProblem* launched, Choice* choice,
                bool* off32) {
  const bool nn = tf32_swapped(caller), tf32_nt = tf32_nt_swap_wanted(caller);
  Planned pp{caller, dev}, qq{swap_operands(caller), dev};
  const bool fills = !nn && !tf32_nt && swap_fills_waves(pp, qq);
  // The swapped problem on `width` / `slab` tiles (see plan_as), if it can run;
  // the problem as called on `slab` tiles (0: the rules' whole tiles).
  auto swapped = [&](Tile width, int slab) {
    if (!plan_as(qq, true, choice, width, slab)) return false;
    if (launched) *launched = qq.p;
    return true;
  };
  auto as_called = [&](int slab) {
    if (!plan_as(pp, false, choice, Tile::k128x256, slab)) return false;
    if (launched) *launched = caller;
    return true;
  };
  const int slab = slab_width(pp);
  if (slab > 0 && swapped(Tile::k128x256, slab)) return true;
  const int slab_n = slab_width_as_called(pp, qq);
  if (slab_n > 0 && as_called(slab_n)) return true;
  const int mid = mid_slab_width(pp);
  if (mid > 0 && swapped(Tile::k128x256, mid)) return true;
  const int tn_slab = tn_few_tiles_slab(pp);
  if (tn_slab > 0 && as_called(tn_slab)) return true;
  const char* cluster = off32_cluster(caller, dev, pp.choice());
  if (cluster && plan_named(caller, dev, cluster, launched, choice)) {
    if (off32) *off32 = true;
    return true;
  }
  if (low_k_pingpong(caller, pp.choice()) && plan_named(caller, dev, "128x128pp", launched, choice)) return true;
  const Tile width = swap_width(pp, qq, fills);
  if (tile_swapped_only(width) && swapped(width, 0)) return true;
  if (nn || fills || tf32_nt) {
    if (swapped(Tile::k128x256, 0)) return true;
    if (nn) return false;  // NN has no unswapped form: dispatch stages an operand
  }
  return as_called(0);
}

}  // namespace

bool hopper_can_run(const GemmProblem& p, const DeviceInfo& dev) { return plan(p, dev); }

bool hopper_off32_cluster(const GemmProblem& p, const DeviceInfo& dev) {
  bool off32 = false;
  return rows_off32(p) && plan_rules(p, dev, nullptr, nullptr, &off32) && off32;
}

bool hopper_config_forced(const GemmProblem& p, const DeviceInfo& dev) { return plan_forced(p, dev, nullptr, nullptr); }

const char* hopper_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  Choice c;
  if (!plan(p, dev, nullptr, &c)) return nullptr;
  // "sm90_<dtype>_<variant>_<a><b>" with BLAS letters: a/b 'n' row-major,
  // 't' column-major.  Variants: 128x256, 128x192, 128x128, 128x64 (cooperative), 128x256c2
  // (2-CTA cluster), 128x128pp (ping-pong), 128x128ppc2, 128x128sk{2,4,8}
  // (split-K over a cluster of 2/4/8 CTAs), 128x64sk2, 128x256streamk, 128x128streamk,
  // 128x64streamk (stream-K over the last wave); a 16-bit problem run
  // swapped (C^T stored transposed) adds "sw", e.g. 128x256sw; 128x144sw,
  // 128x160sw, 128x176sw, 128x200sw, 128x208sw, 128x224sw and 128x232sw run
  // swapped only (swap_width); the one-slab tiles run swapped for a small M,
  // 64x8sw ... 64x64sw (slab_width), and as called for a small N, 64x8 ...
  // 64x64 (slab_width_as_called).  Built once.
  static const std::string* const names = [] {
    auto* n = new std::string[2 * 3 * kNumVariants * 4];
    for (int sw = 0; sw < 2; ++sw)
      for (int d = 0; d < 3; ++d)
        for (int v = 0; v < kNumVariants; ++v)
          for (int l = 0; l < 4; ++l)
            n[((sw * 3 + d) * kNumVariants + v) * 4 + l] =
                std::string("sm90_") + kDtypes[d] + "_" + kVariants[v] + (sw ? "sw_" : "_") + kLayouts[l];
    return n;
  }();
  const int d = p.dtype == DType::bf16 ? 0 : p.dtype == DType::f16 ? 1 : 2;
  const int v = variant_index(c);
  // The caller's layout (a swapped problem runs its tiles over C^T).
  const int l = (p.a.row_major() ? 0 : 2) + (p.b.row_major() ? 1 : 0);
  const int sw = c.c_trans && p.dtype != DType::f32 ? 1 : 0;
  return names[((sw * 3 + d) * kNumVariants + v) * 4 + l].c_str();
}

std::vector<std::string> hopper_config_list(const GemmProblem& p) {
  std::vector<std::string> out;
  if (p.dtype != DType::bf16 && p.dtype != DType::f16 && p.dtype != DType::f32) return out;
  const int d = p.dtype == DType::bf16 ? 0 : p.dtype == DType::f16 ? 1 : 2;
  const std::string head = std::string("sm90_") + kDtypes[d] + "_";
  const std::string tail = std::string("_") + kLayouts[(p.a.row_major() ? 0 : 2) + (p.b.row_major() ? 1 : 0)];
  // tf32: the whole-tile variants (its swapped runs carry no "sw"); 16-bit:
  // those as called (not the swapped-only widths), then run swapped the
  // 128x256 tiles (alone or in 2-CTA clusters), the swapped-only widths and
  // the one-slab tiles.
  // (tf32 has no ping-pong kernel in clusters.)
  auto narrow_slab = [](int v) { return v >= kFirstSlab && sm90::kSlabWidths[v - kFirstSlab] <= sm90::kMaxNarrowSlab; };
  for (int v = 0; v < kNumVariants; ++v)
    if (p.dtype == DType::f32 ? v < kFirstSwapWidth && v != 4 : v < kFirstSwapWidth || narrow_slab(v))
      out.push_back(head + kVariants[v] + tail);
  if (p.dtype != DType::f32)
    for (int v = 0; v < kNumVariants; ++v)
      if (v == 0 || v == 2 || v >= kFirstSwapWidth) out.push_back(head + kVariants[v] + "sw" + tail);
  return out;
}

int64_t hopper_swap_width_cost(const GemmProblem& p, const DeviceInfo& dev, int width) {
  for (Tile t : kSwapWidths)
    if (tile_bn(t) == width) return swap_width_cost(p, t, sm_count(dev));
  return -1;
}

bool hopper_one_slab(const GemmProblem& p, const DeviceInfo& dev) {
  Choice c;
  return plan(p, dev, nullptr, &c) && c.slab > 0;
}

bool hopper_fuses_epilogue(const GemmProblem& p, const DeviceInfo& dev) {
  GemmProblem q;
  Choice c;
  if (!p.epi.any() || !plan(p, dev, &q, &c)) return false;
  // Ping-pong kernels only: a cooperative kernel's consumers run the
  // epilogue while no wgmma is in flight, which cost more than the
  // separate pass (H100, docs/fused.md).  Their C boxes all go through
  // shared memory to TMA (launch_sm90's c_tma) where C allows it.
  const int es = p.dtype == DType::f32 ? 4 : 2;
  return c.pingpong && c.slab == 0 && !c.c_trans && c_tma_ok(q, es) &&
         epilogue_vectors_ok(p, p.c, p.c_batch_stride, p.c_row_stride, 16 / es);
}

size_t hopper_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  Choice c;
  if (!plan(p, dev, nullptr, &c)) return 0;
  return c.sk_tiles > 0 ? stream_k_workspace_bytes(dev.num_sms, tile_bn(c.tile)) : 0;
}

const char* hopper_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
#if !defined(TILED_WITH_SM90A)
  (void)p;
  (void)dev;
  (void)stream;
  (void)workspace;
  return "sm90: built without sm_90a (TILED_WITH_SM90A undefined)";
#else
  GemmProblem q;
  Choice c;
  if (!plan(p, dev, &q, &c)) return "sm90: problem not supported by the Hopper kernel";
  switch (p.dtype) {
    case DType::bf16: return sm90::launch_bf16(q, dev, stream, c, workspace);
    case DType::f16: return sm90::launch_f16(q, dev, stream, c, workspace);
    case DType::f32: return sm90::launch_tf32(q, dev, stream, c, workspace);
    default: return "sm90: unsupported dtype";
  }
#endif
}

}  // namespace cuda
}  // namespace tiled
