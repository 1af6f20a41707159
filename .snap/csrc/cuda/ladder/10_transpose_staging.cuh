// Step 98: 16-byte copies for K-contiguous operands through a staging buffer.
//
// Steps 7-95 copy a K-contiguous operand (row-major A, column-major B) with
// 4-byte cp.async: cp.async cannot transpose, and the math wants k-major
// tiles.  That is 4x the copy instructions of the 16-byte path, and NT (both
// operands K-contiguous) measured 9% behind NN in step 95.  Here such an
// operand is copied 16 bytes at a time, as it lies in global memory, into a
// K-major STAGING slot; one k-tile ahead of the math, the threads that copied
// it read it back (LDS.128 along k), transpose 4 x 4 blocks in registers and
// store them k-major (STS.128 along x) into one of two COMPUTE slots, which
// the unchanged math (warp_tile_fma) reads.  X-contiguous operands keep the
// 16-byte cp.async straight into k-major slots.
//
// Staging layout (one 64-row x 16-k slice per named-barrier group): rows of 16
// floats = 4 chunks of 16 bytes; two rows share a 128-byte line.  Chunk c of
// row x sits in line x/2 at chunk slot ((x & 1) * 4 + c) ^ ((x / 4) & 7).
//  - the transposing reads: a quarter-warp (8 lanes, one LDS.128 phase) reads
//    chunk c of rows 4*xb + i for 8 consecutive xb: slots (const ^ xb) are 8
//    different 4-bank groups, conflict-free;
//  - the k-major stores: the same 8 lanes store 4 consecutive x each of one k
//    row: 32 consecutive words, conflict-free;
//  - the cp.async writes: 4 lanes per row, two rows per line: 8 slots.
//
// Pipeline (R = 4 ring slots per operand, one barrier per k-tile as before):
//   iteration kt: wait for tile kt+1's copies; barrier; copy tile kt+3 into
//   the slot of tile kt-1; transpose tile kt+1 (staging -> compute slot
//   (kt+1)&1); math on tile kt.
// The barrier retires everything the iteration overwrites: tile kt-1's ring
// slot (its math or its transposition is done), compute slot (kt+1)&1 (tile
// kt-1's math is done), and publishes tile kt's transposition.  Copies are
// issued 2 tiles before the transposition needs them, as step 95's 3-stage
// ring issues them 2 tiles before the math.
//
// Shared memory per block: X-contiguous operand 4 x 8.4 KB, K-contiguous
// 4 x 8 KB staging + 2 x 8.4 KB compute: NN / TT 83.5 KB, NT 99.3 KB (2 blocks
// per SM fit in Hopper's 228 KB).  Every operand must be 16-byte aligned
// (base, leading dim, batch stride): otherwise, and for TN (no K-contiguous
// operand), the launcher runs step 95's kernel.
#pragma once
#include <atomic>

#include "08_hilbert.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

template <class C, bool XC> struct StagedOperand {
  static constexpr int kRing = 4;
  static constexpr int X = C::BM;  // (BM == BN: StagedSmem)
  static constexpr int kLd = C::kLdA;
  static constexpr int kCompute = C::BK * kLd;               // one k-major slot
  static constexpr int kStage = XC ? kCompute : X * C::BK;   // one ring slot
  static constexpr int kFloats = kRing * kStage + (XC ? 0 : 2 * kCompute);
};

template <class C, bool AXC, bool BXC> struct StagedSmem {
  static_assert(C::BM == C::BN && C::kLdA == C::kLdB, "square block tile");
  using A = StagedOperand<C, AXC>;
  using B = StagedOperand<C, BXC>;
  static constexpr int kBytes = 4 * (A::kFloats + B::kFloats);
};

__device__ __forceinline__ int staged_swizzle(int x, int c) {
  return (x >> 1) * 32 + 4 * ((((x & 1) << 2) | c) ^ ((x >> 2) & 7));
}

// 16-byte cp.async of a 64 x 16 K-contiguous slice (element (x, k) at
// g[x*ld + k]) into the swizzled staging layout, by 64 threads.
template <int XS, int BK, int G>
__device__ __forceinline__ void copy_kc_staged(float* s, const float* g, const float* safe,
                                               int64_t ld, int x_rem, int k_rem, int gt) {
  static_assert(XS == 64 && BK == 16 && G == 64, "step 98's slice: 64 rows x 16 k, 64 threads");
  constexpr int kChunks = XS * BK / 4, kIters = kChunks / G, kRowStep = G / 4;
  const int c = gt & 3, x_first = gt >> 2;
  const int nk = clamp_int(k_rem - 4 * c, 0, 4);
  const float* src = g + static_cast<int64_t>(x_first) * ld + 4 * c;
  const int64_t step = static_cast<int64_t>(kRowStep) * ld;
#pragma unroll
  for (int i = 0; i < kIters; ++i, src += step) {
    const int x = x_first + i * kRowStep;
    const int n = x < x_rem ? nk : 0;
    cp_async_16(s + staged_swizzle(x, c), n > 0 ? src : safe, 4 * n);
  }
}

// Staging slice (64 x 16, swizzled) -> k-major compute slice (row pitch LD),
// one 4 x 4 block per thread.
template <int LD>
__device__ __forceinline__ void transpose_staged(float* dst, const float* stg, int gt) {
  const int xb = (gt & 7) + 8 * (gt >> 5), c = (gt >> 3) & 3;
  float4 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    v[i] = *reinterpret_cast<const float4*>(stg + staged_swizzle(4 * xb + i, c));
  float* d = dst + (4 * c) * LD + 4 * xb;
  *reinterpret_cast<float4*>(d) = make_float4(v[0].x, v[1].x, v[2].x, v[3].x);
  *reinterpret_cast<float4*>(d + LD) = make_float4(v[0].y, v[1].y, v[2].y, v[3].y);
  *reinterpret_cast<float4*>(d + 2 * LD) = make_float4(v[0].z, v[1].z, v[2].z, v[3].z);
  *reinterpret_cast<float4*>(d + 3 * LD) = make_float4(v[0].w, v[1].w, v[2].w, v[3].w);
}

template <class C, class Order, bool AXC, bool BXC>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    staged_kernel(Params<float> p, int64_t tiles_m, int64_t tiles_n, int panel) {
  static_assert(C::kNamedBarriers && C::BK == 16 && C::WM == 64 && C::WN == 64 &&
                    C::kWarpsM == 2 && C::kWarpsN == 2,
                "step 98 is written for step 95's tile: 128x128x16, 2x2 warps of 64x64");
  using SA = StagedOperand<C, AXC>;
  using SB = StagedOperand<C, BXC>;
  constexpr int R = SA::kRing;
  extern __shared__ __align__(16) float smem[];
  float* const a_ring = smem;
  float* const a_comp = a_ring + R * SA::kStage;  // K-contiguous A only
  float* const b_ring = smem + SA::kFloats;
  float* const b_comp = b_ring + R * SB::kStage;  // K-contiguous B only

  const int tid = threadIdx.x, lane = tid & 31;
  const WarpTilePos<C> pos(tid);
  int64_t tm, tn;
  Order::tile(blockIdx.x, tiles_m, tiles_n, panel, tm, tn);
  const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
  // Warp row wm's A slice is copied, transposed and read by the 2 warps of
  // that row; warp column wn's B slice by the 2 warps of that column.
  constexpr int kX = C::WM, kG = 64;
  const int a_x = pos.wm * C::WM, a_gt = pos.wn * 32 + lane;
  const int b_x = pos.wn * C::WN, b_gt = pos.wm * 32 + lane;
  const int a_rem = clamp_int(p.M - m0 - a_x, 0, kX);
  const int b_rem = clamp_int(p.N - n0 - b_x, 0, kX);
  auto sync = [&]() {
    named_barrier_sync<5>(1 + pos.wm, kG);
    named_barrier_sync<5>(3 + pos.wn, kG);
  };
  const int64_t KT = (p.K + C::BK - 1) / C::BK;

  TILED_BATCH_LOOP(p, b) {
    const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
    const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
    auto load = [&](int slot, int64_t kt) {
      const int64_t k0 = kt * C::BK;
      const int k_rem = clamp_int(p.K - k0, 0, C::BK);
      if constexpr (AXC)
        copy_tile_async<true, true, kX, C::BK, kG, C::kLdA>(
            a_ring + slot * SA::kStage + a_x, A.at(m0 + a_x, k0), A.base, A.ld, a_rem, k_rem, a_gt);
      else
        copy_kc_staged<kX, C::BK, kG>(a_ring + slot * SA::kStage + a_x * C::BK,
                                      A.at(m0 + a_x, k0), A.base, A.ld, a_rem, k_rem, a_gt);
      if constexpr (BXC)
        copy_tile_async<true, true, kX, C::BK, kG, C::kLdB>(
            b_ring + slot * SB::kStage + b_x, B.at(n0 + b_x, k0), B.base, B.ld, b_rem, k_rem, b_gt);
      else
        copy_kc_staged<kX, C::BK, kG>(b_ring + slot * SB::kStage + b_x * C::BK,
                                      B.at(n0 + b_x, k0), B.base, B.ld, b_rem, k_rem, b_gt);
    };
    // Tile t's ring slot is `slot`; its compute slot is `half` (0 / 1).
    auto transpose = [&](int slot, int half) {
      if constexpr (!AXC)
        transpose_staged<C::kLdA>(a_comp + half * SA::kCompute + a_x,
                                  a_ring + slot * SA::kStage + a_x * C::BK, a_gt);
      if constexpr (!BXC)
        transpose_staged<C::kLdB>(b_comp + half * SB::kCompute + b_x,
                                  b_ring + slot * SB::kStage + b_x * C::BK, b_gt);
    };
    float acc[C::TM][C::TN] = {};
#pragma unroll
    for (int s = 0; s < R - 1; ++s) {
      if (s < KT) load(s, s);
      cp_async_commit();
    }
    cp_async_wait<R - 2>();  // tile 0 (mine)
    sync();                  // tile 0 (everyone's)
    transpose(0, 0);
    int cur = 0;  // ring slot of tile kt
    for (int64_t kt = 0; kt < KT; ++kt) {
      const int next = cur == R - 1 ? 0 : cur + 1;   // tile kt+1
      const int prev = cur == 0 ? R - 1 : cur - 1;   // tile kt-1 -> kt+R-1
      cp_async_wait<R - 3>();  // my copies of tile kt+1 have landed
      sync();  // everyone's have; tile kt's transposition is visible; kt-1 retired
      if (kt + R - 1 < KT) load(prev, kt + R - 1);
      cp_async_commit();
      if (kt + 1 < KT) transpose(next, static_cast<int>((kt + 1) & 1));
      const int half = static_cast<int>(kt & 1);
      const float* As = AXC ? a_ring + cur * SA::kStage : a_comp + half * SA::kCompute;
      const float* Bs = BXC ? b_ring + cur * SB::kStage : b_comp + half * SB::kCompute;
      warp_tile_fma<C>(As, Bs, acc, pos.a_off(), pos.b_off());
      cur = next;
    }
    warp_tile_store<C>(p, p.c + b * p.c_bs, acc, m0 + pos.a_off(), n0 + pos.b_off());
    cp_async_wait<0>();  // only empty groups are left
    sync();  // the next batch's prologue overwrites slots still being read
  }
}

// Launches step 98 for an f32 problem: staged_kernel when some operand is
// K-contiguous and every operand is 16-byte aligned, else step 95's kernel
// (pipelined_kernel with the same config).
template <class C, class Order>
const char* launch_staged(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream,
                          const char* f32_only_error) {
  if (pr.dtype != DType::f32) return f32_only_error;
  TiledLaunch l;
  if (const char* e = plan_tiled_launch<Order>(pr, C::BM, C::BN, /*vec_all=*/true, &l)) return e;
  const bool axc = l.axc, bxc = l.bxc;
  if ((axc && bxc) || !l.vec) return launch_pipelined<C, Order>(pr, dev, stream, f32_only_error);
  auto go = [&](auto axc_c, auto bxc_c) -> const char* {
    constexpr bool kA = decltype(axc_c)::value, kB = decltype(bxc_c)::value;
    constexpr int kBytes = StagedSmem<C, kA, kB>::kBytes;
    if (static_cast<size_t>(kBytes) > dev.max_smem_per_block_optin)
      return "ladder step 98: needs more shared memory per block than this device has";
    // One flag set per instantiation of this lambda (= per kernel): the
    // opt-in is per kernel and per device.
    static std::atomic<uint64_t> raised{0};
    return l.launch(staged_kernel<C, Order, kA, kB>, C::kThreads, kBytes, raised, stream,
                    "ladder step 98: cudaFuncSetAttribute(max dynamic smem) failed");
  };
  using T_ = std::true_type;
  using F_ = std::false_type;
  if (axc) return go(T_{}, F_{});
  return bxc ? go(F_{}, T_{}) : go(F_{}, F_{});
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
