// Sliced-K blocks for problems with too few output tiles (simt_fast's small
// and mid-size configs, ladder steps 96 / 97).
//
// With 128 x 128 tiles, 1024^3 makes 64 blocks and 128 x 4096 x 4096 makes
// 32: most of the 132 SMs idle.  Smaller tiles alone give more blocks but
// fewer FMAs per loaded word and, for M = 16, still compute mostly padding.
// Here a block of KS warps owns ONE warp-sized output tile (64 x 64 or
// 32 x 32) and its warps split every k-tile between them: a stage holds
// KS * BK k values, warp w multiplies rows [w*BK, (w+1)*BK) of it.  So a
// small tile still has KS warps of parallel work, and the block count is that
// of the small tile (1024^3 at 64 x 64: 256 blocks; 16 x 4096 x 4096 at
// 32 x 32: 128 blocks).
//
// At the end the KS partial tiles are summed through shared memory in a
// FIXED order (warp 0's + warp 1's + ... + warp KS-1's), so results are
// deterministic; no workspace, no atomics.  The mainloop is step 7's:
// cp.async multi-stage pipeline with zero-filled edges, here with a whole-
// block barrier (every warp reads the whole stage).
#pragma once
#include "08_hilbert.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

// W: the per-warp tile (a WarpTileCfg whose block tile IS the warp tile:
// BM = WM, BN = WN, BK = the k values one warp takes per stage).
template <class W, int KS_, int STAGES_, int MINB_> struct SlicedCfg {
  using Warp = W;
  static_assert(W::kWarpsM == 1 && W::kWarpsN == 1, "the warp tile is the block tile");
  static constexpr int BM = W::BM, BN = W::BN, KS = KS_, kStages = STAGES_, kMinBlocks = MINB_;
  static constexpr int kThreads = 32 * KS;
  static constexpr int kKTile = KS * W::BK;  // k values per stage
  static constexpr int kStageFloats = kKTile * (W::kLdA + W::kLdB);
  static constexpr int kPipeFloats = kStages * kStageFloats;
  static constexpr int kRedFloats = (KS - 1) * BM * BN;  // partial tiles of warps 1..KS-1
  static constexpr int kSmemBytes = 4 * (kPipeFloats > kRedFloats ? kPipeFloats : kRedFloats);
  static_assert(KS >= 2 && kStages >= 2, "two slices, two stages at least");
};

template <class S, class Order, bool AXC, bool BXC, bool VEC, FmaOrder O>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    sliced_k_kernel(Params<float> p, int64_t tiles_m, int64_t tiles_n, int panel) {
  using W = typename S::Warp;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const WarpTilePos<W> pos(lane);  // position inside the (only) warp tile
  int64_t tm, tn;
  Order::tile(blockIdx.x, tiles_m, tiles_n, panel, tm, tn);
  const int64_t m0 = tm * S::BM, n0 = tn * S::BN;
  const int m_rem = clamp_int(p.M - m0, 0, S::BM), n_rem = clamp_int(p.N - n0, 0, S::BN);
  const int64_t KT = (p.K + S::kKTile - 1) / S::kKTile;

  TILED_BATCH_LOOP(p, b) {
    const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
    const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
    auto load = [&](int stage, int64_t kt) {
      float* As = smem + stage * S::kStageFloats;
      float* Bs = As + S::kKTile * W::kLdA;
      const int64_t k0 = kt * S::kKTile;
      const int k_rem = clamp_int(p.K - k0, 0, S::kKTile);
      copy_tile_async<AXC, VEC, S::BM, S::kKTile, S::kThreads, W::kLdA>(
          As, A.at(m0, k0), A.base, A.ld, m_rem, k_rem, tid);
      copy_tile_async<BXC, VEC, S::BN, S::kKTile, S::kThreads, W::kLdB>(
          Bs, B.at(n0, k0), B.base, B.ld, n_rem, k_rem, tid);
    };
    float acc[W::TM][W::TN] = {};
#pragma unroll
    for (int s = 0; s < S::kStages - 1; ++s) {
      if (s < KT) load(s, s);
      cp_async_commit();
    }
    int read_stage = 0, write_stage = S::kStages - 1;
    for (int64_t kt = 0; kt < KT; ++kt) {
      cp_async_wait<S::kStages - 2>();
      __syncthreads();  // stage kt visible to all; stage kt-1 retired
      if (kt + S::kStages - 1 < KT) load(write_stage, kt + S::kStages - 1);
      cp_async_commit();
      const float* As = smem + read_stage * S::kStageFloats + warp * W::BK * W::kLdA;
      const float* Bs = smem + read_stage * S::kStageFloats + S::kKTile * W::kLdA +
                        warp * W::BK * W::kLdB;
      warp_tile_fma<W, O>(As, Bs, acc, pos.a_off(), pos.b_off());
      read_stage = read_stage == S::kStages - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == S::kStages - 1 ? 0 : write_stage + 1;
    }
    cp_async_wait<0>();  // (only empty groups are left; keeps the reuse below safe)
    __syncthreads();     // every warp is done with the pipeline stages

    // Fixed-order reduction.  Warp w >= 1 parks its tile in slot w-1 as
    // float4s indexed (quad, lane): consecutive lanes, consecutive 16 bytes.
    constexpr int kQuads = W::TM * W::TN / 4;
    float4* red = reinterpret_cast<float4*>(smem);
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < W::TM; ++i)
#pragma unroll
        for (int g = 0; g < W::TN / 4; ++g)
          red[((warp - 1) * kQuads + i * (W::TN / 4) + g) * 32 + lane] =
              make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int w = 1; w < S::KS; ++w)
#pragma unroll
        for (int i = 0; i < W::TM; ++i)
#pragma unroll
          for (int g = 0; g < W::TN / 4; ++g) {
            const float4 v = red[((w - 1) * kQuads + i * (W::TN / 4) + g) * 32 + lane];
            acc[i][4 * g] += v.x;
            acc[i][4 * g + 1] += v.y;
            acc[i][4 * g + 2] += v.z;
            acc[i][4 * g + 3] += v.w;
          }
      warp_tile_store<W>(p, p.c + b * p.c_bs, acc, m0 + pos.a_off(), n0 + pos.b_off());
    }
    __syncthreads();  // the next batch's prologue overwrites the reduction slots
  }
}

// Launches sliced_k_kernel<S, HilbertOrder, layout..., O>; every f32
// problem.  O: the order of each k's FFMAs (warp_outer).
template <class S, FmaOrder O>
const char* launch_sliced(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream) {
  return launch_tiled_f32<S, HilbertOrder>(
      pr, dev, stream,
      {"sliced-K SIMT kernel supports float32 only",
       "sliced-K SIMT kernel: needs more shared memory per block than this device has",
       "sliced-K SIMT kernel: cudaFuncSetAttribute(max dynamic smem) failed"},
      [](auto a, auto b, auto v) {
        return sliced_k_kernel<S, HilbertOrder, decltype(a)::value, decltype(b)::value, decltype(v)::value, O>;
      });
}

// Mid-size (step 96): 64 x 64 output tile, 4 warps each doing the whole tile
// (8 x 16 per thread, as simt_fast) on a quarter of every 32-deep k-tile;
// 3 stages (52 KB), 2 blocks / SM.
using SlicedMidCfg = SlicedCfg<WarpTileCfg<64, 64, 8, 64, 64, 8, 16>, 4, 3, 2>;
// Small M or N (step 97): 32 x 32 output tile, 4 x 8 per thread, 4 warps on
// k quarters, 4 stages (37 KB), 3 blocks / SM (at 4, ptxas's 128-register
// cap spilled).
using SlicedSmallCfg = SlicedCfg<WarpTileCfg<32, 32, 8, 32, 32, 4, 8>, 4, 4, 3>;

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
