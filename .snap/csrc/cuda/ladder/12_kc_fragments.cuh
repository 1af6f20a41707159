// Steps 103, 105: step 101's lean loop with one K-contiguous operand kept as
// it lies in global memory (no transposition on the way into shared memory).
//
// Steps 7-102 store both operands k-major and copy a K-contiguous operand
// (row-major A, column-major B) with 4-byte cp.async, 8 lanes per 32-byte
// sector: NN and TT issue 16 such copies per thread per k-tile, NT 32 (TN,
// both X-contiguous, 8 copies of 16 bytes in all).  Here the K-contiguous
// operand whose thread fragment is 8 wide (A with the 8 x 16 thread tile;
// B with a 16 x 8 tile, used for TT) is copied 16 bytes (4 k) at a time into
// an "along-k" layout and read back the same way: one LDS.128 gives a thread
// 4 consecutive k of one of its 8 rows, so the FFMA of k = 4q + j takes its
// operand straight from register j of that row's vector (no transposition,
// no MOV).  The LDS.128 count is unchanged (8 per 4 k for the 8 rows, as 2
// per k before); the cost is registers: the 8 rows x 4 k (32) stay live for
// 4 k, where k-major double-buffered fragments hold 2 x 8.  The next group's
// vectors are loaded row by row in the group's last k, each as soon as its
// row's FFMAs are issued, so they need no second buffer.
//
// Along-k layout of an XS x BK tile: 16-byte chunk (x, c) (k = 4c .. 4c+3)
// at chunk index c * (XS + XS/8) + x + x/8.  A warp's 8 rows of one read are
// x = 4t + e + const (t = 0..7): chunk indices 4t + t/2 + const, i.e. 8
// different 4-bank groups (one wavefront); a copy's 8 consecutive rows are 8
// consecutive chunks.  The padding (one chunk per 8 rows) replaces a swizzle
// so that every read address is a per-thread base plus an immediate.
//
// The other operand keeps step 101's k-major tile and copies (4-byte
// transposing copies for NT's column-major B).  Unaligned problems (VEC
// false) run step 101's loop on this config (both operands k-major).  Each
// accumulator still gets its FFMAs in k order with the same operands, so the
// results are bitwise equal to step 95's (and 101's).
#pragma once
#include <atomic>
#include <type_traits>

#include "11_lean_pipeline.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

template <int XS> struct AlongK {
  static constexpr int kPad = XS + XS / 8;  // chunks per 4-k chunk row
  __device__ __forceinline__ static int chunk(int x) { return x + (x >> 3); }
};

// Shared memory per stage: along-k operands take BK * (XS + XS/8) floats,
// k-major ones BK * (XS + 4).
template <class C, bool KA, bool KB> struct KcSmem {
  static constexpr int kAFloats = KA ? C::BK * AlongK<C::BM>::kPad : C::BK * C::kLdA;
  static constexpr int kBFloats = KB ? C::BK * AlongK<C::BN>::kPad : C::BK * C::kLdB;
  static constexpr int kStageFloats = kAFloats + kBFloats;
  static constexpr int kBytes = C::kStages * kStageFloats * 4;
};

// Thread gt's first chunk of an along-k copy: chunk column c = gt % (BK/4),
// row gt / (BK/4); later rows are G / (BK/4) apart (a multiple of 8, so the
// padding adds a constant per row step).
template <int XS, int BK, int G> struct KcMap {
  static constexpr int kCpr = BK / 4, kRowStep = G / kCpr, kIters = XS / kRowStep;
  static_assert(BK % 4 == 0 && G % kCpr == 0 && kRowStep % 8 == 0 && XS % kRowStep == 0,
                "along-k copy: whole chunks, rows split evenly, row steps of 8");
  __device__ __forceinline__ static int x_first(int gt) { return gt / kCpr; }
  __device__ __forceinline__ static int k_first(int gt) { return 4 * (gt % kCpr); }
  __device__ __forceinline__ static int dst_first(int gt) {
    return 4 * ((gt % kCpr) * AlongK<XS>::kPad + AlongK<XS>::chunk(x_first(gt)));
  }
  static constexpr int kDstStep = 4 * (kRowStep + kRowStep / 8);  // floats per row step
};

// Interior, full k-tile: src points at thread gt's first chunk in global memory.
template <int XS, int BK, int G>
__device__ __forceinline__ void copy_kc_lean(float* s, const float* src, int64_t ld, int gt) {
  using Map = KcMap<XS, BK, G>;
  float* d = s + Map::dst_first(gt);
  const int64_t step = Map::kRowStep * ld;
#pragma unroll
  for (int i = 0; i < Map::kIters; ++i, src += step) cp_async_16_full(d + i * Map::kDstStep, src);
}

// General case (edge tiles, last k-tile): g points at the tile origin (x0, k0);
// rows >= x_rem and k >= k_rem are zero-filled (partial chunks read only their
// valid bytes; every chunk start is 16-byte aligned when VEC holds).
template <int XS, int BK, int G>
__device__ __forceinline__ void copy_kc_async(float* s, const float* g, const float* safe,
                                              int64_t ld, int x_rem, int k_rem, int gt) {
  using Map = KcMap<XS, BK, G>;
  const int x0 = Map::x_first(gt), k = Map::k_first(gt);
  const int nk = clamp_int(k_rem - k, 0, 4);
  float* d = s + Map::dst_first(gt);
  const float* src = g + static_cast<int64_t>(x0) * ld + k;
  const int64_t step = Map::kRowStep * ld;
#pragma unroll
  for (int i = 0; i < Map::kIters; ++i, src += step) {
    const int n = x0 + i * Map::kRowStep < x_rem ? nk : 0;
    cp_async_16(d + i * Map::kDstStep, n > 0 ? src : safe, 4 * n);
  }
}

// The 8 rows (T = 8: two groups of 4, GROUP apart) of one thread at 4-k group
// q, from an along-k tile; base = AlongK::chunk(first row).  Rows of a group
// are consecutive and x/8 is the same for all 4 (first row % 4 == 0).
template <int T, int GROUP, int XS>
__device__ __forceinline__ void kc_load_row(float (&v)[4], const float* s, int base, int q, int i) {
  static_assert(GROUP % 8 == 0, "groups of rows 8-aligned");
  const int idx = q * AlongK<XS>::kPad + base + (i / 4) * (GROUP + GROUP / 8) + (i % 4);
  *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(s + 4 * idx);
}

template <class C, class Order, bool AXC, bool BXC, bool VEC, bool KA, bool KB>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    kc_kernel(Params<float> p, int64_t tiles_m, int64_t tiles_n, int panel) {
  static_assert(!(KA && KB), "one along-k operand: two would need 96 fragment registers");
  static_assert(!KA || (!AXC && VEC && C::TM == 8), "along-k A: row-major, aligned, 8 rows");
  static_assert(!KB || (!BXC && VEC && C::TN == 8), "along-k B: column-major, aligned, 8 cols");
  constexpr int S = C::kStages, BK = C::BK, TM = C::TM, TN = C::TN;
  static_assert(S >= 2 && BK % 4 == 0, "a pipeline; whole 4-k groups");
  using L = KcSmem<C, KA, KB>;
  extern __shared__ __align__(16) float smem[];
  constexpr int G = C::kThreads;
  const int tid = threadIdx.x;
  const WarpTilePos<C> pos(tid);
  int64_t tm, tn;
  Order::tile(blockIdx.x, tiles_m, tiles_n, panel, tm, tn);
  const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
  const int m_rem = clamp_int(p.M - m0, 0, C::BM), n_rem = clamp_int(p.N - n0, 0, C::BN);
  const bool interior = m_rem == C::BM && n_rem == C::BN;  // block-uniform
  const int64_t KT = (p.K + BK - 1) / BK;
  const int64_t kt_fast = interior ? p.K / BK : 0;
  using MapA = LeanMap<AXC, VEC, C::BM, G>;
  using MapB = LeanMap<BXC, VEC, C::BN, G>;
  using KMapA = KcMap<C::BM, BK, G>;
  using KMapB = KcMap<C::BN, BK, G>;
  const int a_off = pos.a_off(), b_off = pos.b_off();
  const int a_base = AlongK<C::BM>::chunk(a_off), b_base = AlongK<C::BN>::chunk(b_off);

  TILED_BATCH_LOOP(p, b) {
    const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
    const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
    const float* a_src =
        !interior ? A.base
        : KA      ? A.at(m0 + KMapA::x_first(tid), KMapA::k_first(tid))
                  : A.at(m0 + MapA::x_first(tid), MapA::k_first(tid));
    const float* b_src =
        !interior ? B.base
        : KB      ? B.at(n0 + KMapB::x_first(tid), KMapB::k_first(tid))
                  : B.at(n0 + MapB::x_first(tid), MapB::k_first(tid));
    const int64_t a_kstep = AXC ? BK * A.ld : BK;
    const int64_t b_kstep = BXC ? BK * B.ld : BK;
    auto load = [&](int stage, int64_t kt) {
      float* As = smem + stage * L::kStageFloats;
      float* Bs = As + L::kAFloats;
      if (kt < kt_fast) {
        if constexpr (KA) copy_kc_lean<C::BM, BK, G>(As, a_src + kt * a_kstep, A.ld, tid);
        else copy_tile_lean<AXC, VEC, C::BM, BK, G, C::kLdA>(As, a_src + kt * a_kstep, A.ld, tid);
        if constexpr (KB) copy_kc_lean<C::BN, BK, G>(Bs, b_src + kt * b_kstep, B.ld, tid);
        else copy_tile_lean<BXC, VEC, C::BN, BK, G, C::kLdB>(Bs, b_src + kt * b_kstep, B.ld, tid);
      } else {
        const int64_t k0 = kt * BK;
        const int k_rem = clamp_int(p.K - k0, 0, BK);
        if constexpr (KA)
          copy_kc_async<C::BM, BK, G>(As, A.at(m0, k0), A.base, A.ld, m_rem, k_rem, tid);
        else
          copy_tile_async<AXC, VEC, C::BM, BK, G, C::kLdA>(As, A.at(m0, k0), A.base, A.ld, m_rem,
                                                           k_rem, tid);
        if constexpr (KB)
          copy_kc_async<C::BN, BK, G>(Bs, B.at(n0, k0), B.base, B.ld, n_rem, k_rem, tid);
        else
          copy_tile_async<BXC, VEC, C::BN, BK, G, C::kLdB>(Bs, B.at(n0, k0), B.base, B.ld, n_rem,
                                                           k_rem, tid);
      }
    };
    // k-major fragments (double-buffered per k) and along-k rows (one 4-k
    // group); the compiler drops the arrays of the layout not used.
    float fa[2][TM], fb[2][TN], la[TM][4], lb[TN][4];
    auto load_kmajor = [&](int buf, const float* As, const float* Bs, int k) {
#pragma unroll
      for (int g = 0; g < TM / 4; ++g)
        if constexpr (!KA)
          *reinterpret_cast<float4*>(&fa[buf][4 * g]) =
              *reinterpret_cast<const float4*>(As + k * C::kLdA + a_off + g * C::kAGroup);
#pragma unroll
      for (int g = 0; g < TN / 4; ++g)
        if constexpr (!KB)
          *reinterpret_cast<float4*>(&fb[buf][4 * g]) =
              *reinterpret_cast<const float4*>(Bs + k * C::kLdB + b_off + g * C::kBGroup);
    };
    float acc[TM][TN] = {};
    // One k: FFMAs in rows-then-columns order (columns-then-rows when B is
    // along-k), each along-k row reloaded for group `nq` of `Ns` right after
    // its last FFMA when `reload`.
    auto math = [&](int k, bool reload, const float* Ns, int nq) {
      const int j = k & 3, buf = k & 1;
      if constexpr (KB) {
#pragma unroll
        for (int n = 0; n < TN; ++n) {
#pragma unroll
          for (int i = 0; i < TM; ++i) acc[i][n] = fmaf(fa[buf][i], lb[n][j], acc[i][n]);
          if (reload) kc_load_row<TN, C::kBGroup, C::BN>(lb[n], Ns + L::kAFloats, b_base, nq, n);
        }
      } else {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
          for (int n = 0; n < TN; ++n)
            acc[i][n] = fmaf(KA ? la[i][j] : fa[buf][i], fb[buf][n], acc[i][n]);
          if constexpr (KA)
            if (reload) kc_load_row<TM, C::kAGroup, C::BM>(la[i], Ns, a_base, nq, i);
        }
      }
    };
    auto load_group = [&](const float* As, int q) {
      if constexpr (KA)
#pragma unroll
        for (int i = 0; i < TM; ++i) kc_load_row<TM, C::kAGroup, C::BM>(la[i], As, a_base, q, i);
      if constexpr (KB)
#pragma unroll
        for (int n = 0; n < TN; ++n)
          kc_load_row<TN, C::kBGroup, C::BN>(lb[n], As + L::kAFloats, b_base, q, n);
    };
    // Step 101's schedule: all S slots start filling; the barrier sits before
    // the last k of a tile, when every fragment of the tile is in registers.
#pragma unroll
    for (int s = 0; s < S; ++s) {
      if (s < KT) load(s, s);
      cp_async_commit();
    }
    cp_async_wait<S - 1>();
    __syncthreads();
    load_kmajor(0, smem, smem + L::kAFloats, 0);
    load_group(smem, 0);
    int cur = 0;
    for (int64_t kt = 0; kt < KT; ++kt) {
      const float* As = smem + cur * L::kStageFloats;
      const float* Bs = As + L::kAFloats;
      const int nxt = cur == S - 1 ? 0 : cur + 1;
#pragma unroll
      for (int k = 0; k < BK; ++k) {
        if (k < BK - 1) {
          load_kmajor((k + 1) & 1, As, Bs, k + 1);
          // The last k of a 4-k group reloads the along-k rows for the next.
          math(k, (k & 3) == 3, As, (k >> 2) + 1);
        } else {
          cp_async_wait<S - 2>();
          __syncthreads();  // tile kt+1 published; tile kt's slot retired
          if (kt + S < KT) load(cur, kt + S);
          cp_async_commit();
          // Tile kt+1's first fragments (stale but in-bounds after the last
          // tile: never used).
          const float* An = smem + nxt * L::kStageFloats;
          load_kmajor(0, An, An + L::kAFloats, 0);
          math(k, true, An, 0);
        }
      }
      cur = nxt;
    }
    __syncthreads();  // the last tile's stale reads precede the next batch's prologue
    warp_tile_store<C>(p, p.c + b * p.c_bs, acc, m0 + a_off, n0 + b_off);
  }
}

// Launches kc_kernel for an f32 problem.  C8x16: 8 x 16 thread tile (A
// along-k when row-major); C16x8: the same block and warp tiles with a 16 x 8
// thread tile, for TT (B along-k).  Along-k needs every operand 16-byte
// aligned (VEC); otherwise both operands are k-major with step 101's copies.
template <class C8x16, class C16x8, class Order>
const char* launch_kc(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream,
                      const char* f32_only_error) {
  static_assert(C8x16::BM == C16x8::BM && C8x16::BN == C16x8::BN && C8x16::TM == 8 &&
                    C16x8::TN == 8,
                "two thread tiles of one block tile");
  if (pr.dtype != DType::f32) return f32_only_error;
  TiledLaunch l;
  if (const char* e = plan_tiled_launch<Order>(pr, C8x16::BM, C8x16::BN, /*vec_all=*/true, &l)) return e;
  return by_layout(l.axc, l.bxc, l.vec, [&](auto axc_c, auto bxc_c, auto vec_c) -> const char* {
    constexpr bool kA = decltype(axc_c)::value, kB = decltype(bxc_c)::value;
    constexpr bool kV = decltype(vec_c)::value;
    constexpr bool kTT = kA && !kB;  // only B is K-contiguous
    using C = std::conditional_t<kTT, C16x8, C8x16>;
    constexpr bool kKA = kV && !kA, kKB = kV && kTT;
    constexpr int kBytes = KcSmem<C, kKA, kKB>::kBytes;
    if (static_cast<size_t>(kBytes) > dev.max_smem_per_block_optin)
      return "along-k SIMT kernel: needs more shared memory per block than this device has";
    static std::atomic<uint64_t> raised{0};  // one per instantiation of this lambda = per kernel
    return l.launch(kc_kernel<C, Order, kA, kB, kV, kKA, kKB>, C::kThreads, kBytes, raised, stream,
                    "along-k SIMT kernel: cudaFuncSetAttribute(max dynamic smem) failed");
  });
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
