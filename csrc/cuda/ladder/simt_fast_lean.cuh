// simt_fast's lean pipeline (ladder step 101, and step 109: simt_fast's large
// config): step 8's warp tiles on a k-tile of 16 with a lean main loop (fewer
// non-FFMA issue slots per k-tile) and fragments prefetched across the
// k-tile boundary.
//
// A 128 x 128 x 16 block (3 stages, 2 blocks / SM) with the schedule of
// step 8 spends 2449 instructions per warp per 16-deep k-tile on 2048 FFMA +
// 96 LDS.128: ~300 others (84% FFMA; sm_90a, NN aligned).  Most of them are
// copy bookkeeping repeated every k-tile: per 4-byte cp.async a bounds
// predicate, a select between the source and a safe address (two SELs,
// 64-bit) and a src-size select; the named-barrier id dispatch (a switch per
// barrier: BRX, BSSY/BSYNC, WARPSYNC) adds ~30 more.  Here:
//  - Interior tiles (the whole BM x BN block inside M x N) with a full
//    k-tile take a fast path: every source address is valid, so a copy is
//    one cp.async with a constant size, at an address that is one 64-bit add
//    from the previous one (pointers walked down rows, advanced once per
//    k-tile).  Edge tiles and the last, partial k-tile take the general
//    zero-filling copies of step 7 (copy_tile_async), which write the same
//    k-major layout.
//  - One __syncthreads per k-tile: the block is 4 warps, and two 64-thread
//    named barriers per warp (row and column pair) couple all 4 warps within
//    two k-tiles anyway, for ~15x the instructions.
//  - The fragments of k + 1 are loaded while the FFMAs of k issue, also
//    across the k-tile boundary.  The barrier moves from the top of the
//    k-tile to just before its last k: by then every fragment of the tile has
//    been read, so the barrier both publishes tile kt + 1 and retires tile
//    kt's slot, which the copy of tile kt + STAGES then reuses (the prologue
//    fills all STAGES slots).  The first LDS of tile kt + 1 is then covered by
//    the last k's 128 FFMA instead of stalling the warp, and a copy still has
//    two k-tiles to land (three stages).
// Every accumulator gets the same FFMAs in the same k order whatever the
// block tile, copy schedule or order across accumulators, so steps 101 and
// 109 give the same bits (tested).  The measurements behind each choice:
// docs/ladder.md.
#pragma once
#include <atomic>
#include <type_traits>

#include "08_hilbert.cuh"
#include "../stream_k.h"

namespace tiled {
namespace cuda {
namespace ladder {

// cp.async without a src-size operand (no zero fill): for sources known valid.
__device__ __forceinline__ void cp_async_4_full(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src));
#else
  *dst = *src;
#endif
}
__device__ __forceinline__ void cp_async_16_full(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#else
  *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
#endif
}

// Fast-path copy of a full XS x BK operand tile (interior, full k-tile) by G
// threads into k-major smem s (row pitch LD).  Thread gt's first element is
// (x, k) = lean_first<>(gt); `src` points at it in global memory.  The three
// thread mappings are those of copy_tile_async (whole 32-byte sectors per 8
// lanes, conflict-free smem writes).
template <bool XC, bool VEC, int XS, int G>
struct LeanMap {
  static constexpr bool kVec = VEC && XC;
  // K-contiguous: 8 lanes take the 8 k of one 32-byte sector, rows G/8 apart.
  // X-contiguous 16 B: a row of XS floats is XS/4 vectors, rows G/(XS/4) apart.
  // X-contiguous 4 B: a row is XS lanes, rows G/XS apart.
  __device__ __forceinline__ static int x_first(int gt) {
    return XC ? (kVec ? 4 * (gt % (XS / 4)) : gt % XS) : gt >> 3;
  }
  __device__ __forceinline__ static int k_first(int gt) {
    return XC ? (kVec ? gt / (XS / 4) : gt / XS) : gt & 7;
  }
};

template <bool XC, bool VEC, int XS, int BK, int G, int LD>
__device__ __forceinline__ void copy_tile_lean(float* s, const float* src, int64_t ld, int gt) {
  using Map = LeanMap<XC, VEC, XS, G>;
  float* d = s + Map::k_first(gt) * LD + Map::x_first(gt);
  if constexpr (Map::kVec) {
    constexpr int kKStep = G / (XS / 4), kIters = XS * BK / 4 / G;
    static_assert(XS * BK / 4 % G == 0 && G % (XS / 4) == 0, "even split");
    const int64_t step = kKStep * ld;
#pragma unroll
    for (int i = 0; i < kIters; ++i, src += step) cp_async_16_full(d + i * kKStep * LD, src);
  } else if constexpr (XC) {
    constexpr int kKStep = G / XS, kIters = XS * BK / G;
    static_assert(XS * BK % G == 0 && G % XS == 0, "even split");
    const int64_t step = kKStep * ld;
#pragma unroll
    for (int i = 0; i < kIters; ++i, src += step) cp_async_4_full(d + i * kKStep * LD, src);
  } else {
    constexpr int kRowStep = G / 8, kRows = XS / kRowStep, kKHi = BK / 8;
    static_assert(G % 8 == 0 && XS % kRowStep == 0 && BK % 8 == 0, "even split");
    const int64_t step = kRowStep * ld;
#pragma unroll
    for (int j = 0; j < kRows; ++j, src += step)
#pragma unroll
      for (int kh = 0; kh < kKHi; ++kh) cp_async_4_full(d + kh * 8 * LD + j * kRowStep, src + kh * 8);
  }
}

// Step 109 (simt_fast's large config): 128 x 256 x 16, 2 x 4 warps of
// 64 x 64 (step 101's warp and thread tiles), 3 stages = 75 KB, one block /
// SM (8 warps): per block 3/4 of the operand traffic per output, per thread 12 (NN) or 24
// (NT) copies per k-tile instead of 20 / 32.
using Lean128x256Cfg = WarpTileCfg<128, 256, 16, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/1,
                                   /*NAMED=*/false>;

// One k of the warp tile from fragments in registers.
template <class C>
__device__ __forceinline__ void lean_load_frag(float (&a)[C::TM], float (&bv)[C::TN],
                                               const float* As, const float* Bs, int k,
                                               int a_off, int b_off) {
#pragma unroll
  for (int g = 0; g < C::TM / 4; ++g)
    *reinterpret_cast<float4*>(&a[4 * g]) =
        *reinterpret_cast<const float4*>(As + k * C::kLdA + a_off + g * C::kAGroup);
#pragma unroll
  for (int g = 0; g < C::TN / 4; ++g)
    *reinterpret_cast<float4*>(&bv[4 * g]) =
        *reinterpret_cast<const float4*>(Bs + k * C::kLdB + b_off + g * C::kBGroup);
}
// Stream-K (SK instances, step 109 as simt_fast's large config): the first
// sk_tiles >= sk_grid tiles in the block order are dealt to CTAs 0 ..
// sk_grid - 1 as runs of k-tiles, each at least a tile long (../stream_k.h:
// pieces last tile first; a piece that does not end its tile parks its fp32
// partial and raises its CTA's flag; the piece ending a tile waits for the
// flag of the CTA before, the tile's only other piece, and adds its partial:
// the same bits on every run).  Blocks sk_grid, sk_grid + 1, ... take whole
// tiles sk_tiles, sk_tiles + 1, ...  A zero sk_grid: one whole tile per block
// (step 109 without stream-K; the other instances ignore the arguments).
struct LeanStreamK {
  int64_t sk_tiles = 0;
  int sk_grid = 0;
  int* flags = nullptr;       // [sk_grid][2], zero at launch; CTA i raises flags[2 * i]
  float* partials = nullptr;  // [sk_grid][threads * TM * TN], thread-interleaved float4
};

// SPREAD (step 109): the copies of tile kt + S no longer
// follow tile kt's barrier in one burst; they go into tile kt + 1's k-loop,
// A's at k = 1 and B's at k = 5 (committed there), between the FFMAs.  In
// the SASS of the burst version (ncu, 4096^3 NN on an H100) an FFMA a dozen instructions
// after the burst waits for the last copies to read their address registers,
// which ptxas hands to the accumulators next (a write-after-read hazard on
// the long scoreboard): 3.6% of all warp samples on that one instruction.
// The copy still has ~1.9 k-tiles to land before its barrier.
template <class C, class Order, bool AXC, bool BXC, bool VEC, bool SPREAD = false, FmaOrder O = FmaOrder::rows,
          bool SK = false>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    lean_kernel(Params<float> p, int64_t tiles_m, int64_t tiles_n, int panel, LeanStreamK sk) {
  constexpr int S = C::kStages;
  static_assert(S >= 2 && C::BK % 2 == 0, "a pipeline needs two stages; even BK for the buffers");
  extern __shared__ __align__(16) float smem[];
  constexpr int G = C::kThreads;
  const int tid = threadIdx.x;
  const WarpTilePos<C> pos(tid);
  const int64_t KT = (p.K + C::BK - 1) / C::BK;
  using MapA = LeanMap<AXC, VEC, C::BM, G>;
  using MapB = LeanMap<BXC, VEC, C::BN, G>;

  TILED_BATCH_LOOP(p, b) {
    // One piece of work: k-tiles [kt0, kt1) of tile `unit` (block order).
    auto piece = [&](int64_t unit, int64_t kt0, int64_t kt1) {
      int64_t tm, tn;
      Order::tile(unit, tiles_m, tiles_n, panel, tm, tn);
      const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
      const int m_rem = clamp_int(p.M - m0, 0, C::BM), n_rem = clamp_int(p.N - n0, 0, C::BN);
      const bool interior = m_rem == C::BM && n_rem == C::BN;  // block-uniform
      // k-tiles below kt_fast take the fast path: interior tiles without a k edge.
      const int64_t kt_fast = interior ? p.K / C::BK : 0;
      const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
      const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
      // Fast-path sources: this thread's first element of k-tile 0, and how far
      // it moves per k-tile.  Only dereferenced for interior tiles.
      const float* a_src = interior ? A.at(m0 + MapA::x_first(tid), MapA::k_first(tid)) : A.base;
      const float* b_src = interior ? B.at(n0 + MapB::x_first(tid), MapB::k_first(tid)) : B.base;
      const int64_t a_kstep = AXC ? C::BK * A.ld : C::BK;
      const int64_t b_kstep = BXC ? C::BK * B.ld : C::BK;
      // Tile kt's A / B into slot `stage`: lean_a / lean_b are the fast path
      // (interior, kt < kt_fast), load_a / load_b pick it or the zero-filling
      // copies.
      auto lean_a = [&](int stage, int64_t kt) {
        copy_tile_lean<AXC, VEC, C::BM, C::BK, G, C::kLdA>(smem + stage * C::kStageFloats, a_src + kt * a_kstep,
                                                           A.ld, tid);
      };
      auto lean_b = [&](int stage, int64_t kt) {
        copy_tile_lean<BXC, VEC, C::BN, C::BK, G, C::kLdB>(smem + stage * C::kStageFloats + C::BK * C::kLdA,
                                                           b_src + kt * b_kstep, B.ld, tid);
      };
      auto load_a = [&](int stage, int64_t kt) {
        float* As = smem + stage * C::kStageFloats;
        if (kt < kt_fast) {
          lean_a(stage, kt);
        } else {
          const int64_t k0 = kt * C::BK;
          copy_tile_async<AXC, VEC, C::BM, C::BK, G, C::kLdA>(As, A.at(m0, k0), A.base, A.ld, m_rem,
                                                              clamp_int(p.K - k0, 0, C::BK), tid);
        }
      };
      auto load_b = [&](int stage, int64_t kt) {
        float* Bs = smem + stage * C::kStageFloats + C::BK * C::kLdA;
        if (kt < kt_fast) {
          lean_b(stage, kt);
        } else {
          const int64_t k0 = kt * C::BK;
          copy_tile_async<BXC, VEC, C::BN, C::BK, G, C::kLdB>(Bs, B.at(n0, k0), B.base, B.ld, n_rem,
                                                              clamp_int(p.K - k0, 0, C::BK), tid);
        }
      };
      auto load = [&](int stage, int64_t kt) {
        load_a(stage, kt);
        load_b(stage, kt);
      };
      float acc[C::TM][C::TN] = {};
      // All S slots start filling; the barrier sits before the last k.
#pragma unroll
      for (int s = 0; s < S; ++s) {
        if (kt0 + s < kt1) load(s, kt0 + s);
        cp_async_commit();
      }
      cp_async_wait<S - 1>();  // tile kt0 (mine)
      __syncthreads();         // tile kt0 (everyone's)
      float a[2][C::TM], bv[2][C::TN];
      lean_load_frag<C>(a[0], bv[0], smem, smem + C::BK * C::kLdA, 0, pos.a_off(), pos.b_off());
      int cur = 0;  // slot of tile kt
      int prev = S - 1;  // slot of tile kt - 1
      static_assert(!SPREAD || C::BK >= 8, "SPREAD copies at k = 1 and 5 of a k-tile");
      // One k-tile.  FAST (SPREAD only): the copies it issues are fast-path
      // ones, unconditionally, so the unrolled FFMA stream has no branch;
      // the loop picks the version once per k-tile.
      auto ktile = [&](int64_t kt, auto fast) {
        [[maybe_unused]] constexpr bool FAST = decltype(fast)::value;
        const float* As = smem + cur * C::kStageFloats;
        const float* Bs = As + C::BK * C::kLdA;
        const int nxt = cur == S - 1 ? 0 : cur + 1;
#pragma unroll
        for (int k = 0; k < C::BK; ++k) {
          if (k < C::BK - 1) {
            lean_load_frag<C>(a[(k + 1) & 1], bv[(k + 1) & 1], As, Bs, k + 1, pos.a_off(),
                              pos.b_off());
            if constexpr (SPREAD) {
              // Tile kt - 1 + S into tile kt - 1's slot (retired at the last barrier).
              if constexpr (FAST) {
                if (k == 1) lean_a(prev, kt - 1 + S);
                if (k == 5) lean_b(prev, kt - 1 + S);
              } else {
                if (kt > kt0 && k == 1 && kt - 1 + S < kt1) load_a(prev, kt - 1 + S);
                if (kt > kt0 && k == 5 && kt - 1 + S < kt1) load_b(prev, kt - 1 + S);
              }
              if (k == 5 && (FAST || kt > kt0)) cp_async_commit();
            }
          } else {
            // Every fragment of tile kt is in registers.  Groups committed:
            // S + kt; tile kt+1 is group kt+1, so S-2 may still be pending.
            // (SPREAD: the group of tile kt - 1 + S was committed in this
            // k-tile instead of after the previous barrier: the same count.)
            cp_async_wait<S - 2>();
            __syncthreads();  // tile kt+1 published; tile kt's slot retired
            if constexpr (!SPREAD) {
              if (kt + S < kt1) load(cur, kt + S);
              cp_async_commit();
            }
            // Tile kt+1's first fragments (stale but in-bounds smem after the
            // last tile: never used).
            const float* An = smem + nxt * C::kStageFloats;
            lean_load_frag<C>(a[0], bv[0], An, An + C::BK * C::kLdA, 0, pos.a_off(), pos.b_off());
          }
          warp_outer<C, O>(acc, a[k & 1], bv[k & 1]);
        }
        prev = cur;
        cur = nxt;
      };
      // The fast k-tiles' copies (tile kt - 1 + S) are all below kt1 and kt_fast.
      const int64_t fast_end = kt_fast < kt1 ? kt_fast : kt1;
      for (int64_t kt = kt0; kt < kt1; ++kt) {
        if (SPREAD && kt > kt0 && kt - 1 + S < fast_end)
          ktile(kt, std::true_type{});
        else
          ktile(kt, std::false_type{});
      }
      // The last iteration read tile kt1's (stale, unused) first fragments
      // after its barrier: one more before the next piece's / batch's prologue
      // overwrites that slot (only empty copy groups are pending).
      __syncthreads();
      if constexpr (SK) {
        // Partial tiles: thread tid's accumulators as float4 q = i * TN / 4 + g
        // (row i, columns 4g..4g+3) at q * threads + tid of its CTA's slot.
        constexpr int kQuads = C::TM * C::TN / 4;
        auto slot = [&](int64_t cta) { return reinterpret_cast<float4*>(sk.partials) + cta * (kQuads * G); };
        if (kt1 < KT) {
          // Not the tile's end: its CTA's first piece (stream_k.h); park it.
          // One float at a time (16-byte stores pin each accumulator quad
          // to four aligned registers).
          float* dst = reinterpret_cast<float*>(slot(blockIdx.x) + tid);
#pragma unroll
          for (int i = 0; i < C::TM; ++i)
#pragma unroll
            for (int j = 0; j < C::TN; ++j) __stcg(dst + (i * (C::TN / 4) + j / 4) * 4 * G + j % 4, acc[i][j]);
          __syncthreads();
          if (tid == 0) {
            __threadfence();
            st_release_gpu(sk.flags + 2 * blockIdx.x, 1);
          }
          return;
        }
        if (kt0 > 0) {
          // The owner.  Its runs being at least a tile long (the host deals
          // stream-K only then), a tile has two pieces at most: the other is
          // the last piece of the CTA before (stream_k.h, tested on the host).
          // Straight-line code: with a loop over several such CTAs here,
          // ptxas gave the accumulators an allocation whose k-loop FFMAs read
          // two registers of one bank (two issue cycles) in half the cases.
          const int prev = static_cast<int>(blockIdx.x) - 1;
          while (ld_acquire_gpu(sk.flags + 2 * prev) == 0) {
          }
          // One float at a time, kAhead loads in flight (the source order is
          // the schedule at -Xptxas -O1; the fragment registers are free by
          // now).
          constexpr int kAhead = 16, kN = C::TM * C::TN;
          const float* src = reinterpret_cast<const float*>(slot(prev) + tid);
          auto at = [&](int e) {  // element e = i * TN + col: float4 e / 4, lane e % 4
            return src + (e / 4) * 4 * G + e % 4;
          };
          float v[kAhead];
#pragma unroll
          for (int e = 0; e < kAhead; ++e) v[e] = __ldcg(at(e));
#pragma unroll
          for (int e = 0; e < kN; ++e) {
            const float x = v[e % kAhead];
            if (e + kAhead < kN) v[e % kAhead] = __ldcg(at(e + kAhead));
            acc[e / C::TN][e % C::TN] += x;
          }
        }
      }
      // (Through a copy: reached through the lambda's reference to the
      // kernel parameter, nvcc splits store_c4's 16-byte stores into 4-byte
      // ones, which cost step 109 4% at 2048^3.)
      const Params<float> pc = p;
      warp_tile_store<C>(pc, pc.c + b * pc.c_bs, acc, m0 + pos.a_off(), n0 + pos.b_off());
    };
    if constexpr (SK) {
      // A stream-K CTA takes its run's pieces, last tile first (stream_k.h);
      // a block past them one whole tile.  One call of `piece`, so the
      // k-loop is compiled once and whole tiles run the code the pieces do.
      const int cta = static_cast<int>(blockIdx.x);
      int64_t whole = cta >= sk.sk_grid ? sk.sk_tiles + (cta - sk.sk_grid) : -1;
      SkRun run{0, 0};
      if (whole < 0)
        run = {sk_run_begin(sk.sk_tiles, static_cast<int>(KT), cta, sk.sk_grid),
               sk_run_begin(sk.sk_tiles, static_cast<int>(KT), cta + 1, sk.sk_grid)};
      int unit = 0, kt0 = 0, kt1 = static_cast<int>(KT);
      while (whole >= 0 || sk_prev(run, static_cast<int>(KT), unit, kt0, kt1)) {
        if (whole >= 0) {
          unit = static_cast<int>(whole);
          whole = -1;
        }
        piece(unit, kt0, kt1);
      }
    } else {
      piece(blockIdx.x, 0, KT);
    }
  }
}

// Launches lean_kernel for an f32 problem (every layout; 16-byte copies for
// X-contiguous operands when aligned, as step 8).
// SK: the stream-K instances, launched on sk.sk_grid + tiles - sk.sk_tiles
// blocks (batch 1, the flags zeroed by the caller), or with sk.sk_grid == 0
// on one block per tile like the others.
template <class C, class Order, bool SPREAD = false, FmaOrder O = FmaOrder::rows, bool SK = false>
const char* launch_lean(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream,
                        const char* f32_only_error, const LeanStreamK& sk = {}) {
  int64_t blocks = 0;  // sk.sk_grid == 0: one block per tile (and batch entry)
  if constexpr (SK)
    if (sk.sk_grid > 0) blocks = sk.sk_grid + ceil_div(pr.M, C::BM) * ceil_div(pr.N, C::BN) - sk.sk_tiles;
  return launch_tiled_f32<C, Order>(
      pr, dev, stream,
      {f32_only_error, "lean SIMT kernel: needs more shared memory per block than this device has",
       "lean SIMT kernel: cudaFuncSetAttribute(max dynamic smem) failed"},
      [](auto a, auto b, auto v) {
        return lean_kernel<C, Order, decltype(a)::value, decltype(b)::value, decltype(v)::value, SPREAD, O,
                           SK>;
      },
      blocks, sk);
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
