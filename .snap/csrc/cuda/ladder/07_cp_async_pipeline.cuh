// Step 7: a multi-stage cp.async pipeline with partial-block barriers
// (seed 004: "a four stage pipeline ... quarter block and half block
// synchronization").
//
// Steps 5-6 stall every k-tile: load, barrier, compute, barrier.  Here the
// copies are asynchronous (cp.async: global -> shared without passing through
// registers) and run STAGES-1 k-tiles ahead of the math: while the warps
// multiply tile kt, tiles kt+1 .. kt+STAGES-1 are in flight.  One barrier per
// k-tile both publishes the arrived stage and retires the stage that the next
// copy overwrites.
//
// Partial-block barriers: a warp only reads the A rows of its warp row and the
// B columns of its warp column.  So the A slice of a warp row is copied by the
// warps of that row (2 of 8 with the 4 x 2 warp grid) and the B slice of a
// warp column by the warps of that column (4 of 8), and each warp waits on two
// named barriers (bar.sync id, count) of 64 and 128 threads instead of all
// 256: a slow warp holds back only the warps that share its data.
//
// cp.async cannot transpose a 16-byte vector, so a K-contiguous operand
// (row-major A, column-major B) is copied 4 bytes per instruction (8 k values
// of one row per 8 lanes: whole 32-byte sectors); an X-contiguous operand
// uses 16-byte copies when aligned.  Edges are zero-filled by cp.async's
// src-size operand, so the math never tests bounds.
// Global traffic: as step 6.  Shared memory: STAGES x 12.5 KB = 50 KB
// (dynamic, opted in above 48 KB).
#pragma once
#include <atomic>

#include "06_warp_tiling.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

// Asynchronous copy of an XS x BK operand slice into k-major shared memory s
// (row pitch LDS) by G threads (gt = index within them).  `safe` is a valid
// address used for zero-filled copies.
template <bool XC, bool VEC, int XS, int BK, int G, int LDS>
__device__ __forceinline__ void copy_tile_async(float* s, const float* g, const float* safe,
                                                int64_t ld, int x_rem, int k_rem, int gt) {
  if constexpr (VEC && XC) {  // 16 bytes along x; partial vectors read only their valid bytes
    constexpr int CPR = XS / 4, CHUNKS = XS * BK / 4;
    static_assert(CHUNKS % G == 0 && G % CPR == 0, "slice must split evenly over the threads");
    // Thread gt copies the vector at x = 4*(gt % CPR) of rows
    // k = gt/CPR + i*(G/CPR): one pointer walked down the rows.
    constexpr int kKStep = G / CPR;
    const int x = (gt % CPR) * 4, n = clamp_int(x_rem - x, 0, 4);
    const float* src = g + tile_offset<XC>(x, gt / CPR, ld);
    const int64_t step = static_cast<int64_t>(kKStep) * ld;
#pragma unroll
    for (int i = 0; i < CHUNKS / G; ++i, src += step) {
      const int k = gt / CPR + i * kKStep;
      const int nk = k < k_rem ? n : 0;
      cp_async_16(s + k * LDS + x, nk > 0 ? src : safe, 4 * nk);
    }
  } else if constexpr (XC) {  // 4 bytes, x fastest
    constexpr int ELEMS = XS * BK;
    static_assert(ELEMS % G == 0 && G % XS == 0, "slice must split evenly over the threads");
    constexpr int kKStep = G / XS;
    const int x = gt % XS;
    const bool xv = x < x_rem;
    const float* src = g + tile_offset<XC>(x, gt / XS, ld);
    const int64_t step = static_cast<int64_t>(kKStep) * ld;
#pragma unroll
    for (int i = 0; i < ELEMS / G; ++i, src += step) {
      const int k = gt / XS + i * kKStep;
      const bool v = xv && k < k_rem;
      cp_async_4(s + k * LDS + x, v ? src : safe, v);
    }
  } else {  // 4 bytes, transposing: 8 k values fastest (a 32-byte sector), then x
    constexpr int ELEMS = XS * BK;
    static_assert(ELEMS % G == 0 && G % 8 == 0 && XS % (G / 8) == 0,
                  "slice must split evenly over the threads");
    // Thread gt copies k = k_hi*8 + gt%8 of rows x = gt/8 + j*(G/8): walk a
    // pointer down the rows instead of keeping one address per element.
    constexpr int kRowStep = G / 8, kRows = XS / kRowStep, kKHi = BK / 8;
    const int x_first = gt >> 3, k_lo = gt & 7;
#pragma unroll
    for (int kh = 0; kh < kKHi; ++kh) {
      const int k = kh * 8 + k_lo;
      const float* src = g + tile_offset<XC>(x_first, k, ld);
      const int64_t step = static_cast<int64_t>(kRowStep) * ld;
#pragma unroll
      for (int j = 0; j < kRows; ++j, src += step) {
        const int x = x_first + j * kRowStep;
        const bool v = x < x_rem && k < k_rem;
        cp_async_4(s + k * LDS + x, v ? src : safe, v);
      }
    }
  }
}

template <class C, class Order, bool AXC, bool BXC, bool VEC>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    pipelined_kernel(Params<float> p, int64_t tiles_m, int64_t tiles_n, int panel) {
  static_assert(C::kStages >= 2, "a pipeline needs two stages");
  extern __shared__ __align__(16) float smem[];
  constexpr bool kNamed = C::kNamedBarriers;
  static_assert(!kNamed || 1 + C::kWarpsM + C::kWarpsN <= 16, "16 hardware barriers");
  const int tid = threadIdx.x, lane = tid & 31;
  const WarpTilePos<C> pos(tid);
  int64_t tm, tn;
  Order::tile(blockIdx.x, tiles_m, tiles_n, panel, tm, tn);
  const int64_t m0 = tm * C::BM, n0 = tn * C::BN;

  // Which slice this thread helps copy, and with how many others.
  constexpr int kAX = kNamed ? C::WM : C::BM, kAG = kNamed ? C::kWarpsN * 32 : C::kThreads;
  constexpr int kBX = kNamed ? C::WN : C::BN, kBG = kNamed ? C::kWarpsM * 32 : C::kThreads;
  const int a_x = kNamed ? pos.wm * C::WM : 0, a_gt = kNamed ? pos.wn * 32 + lane : tid;
  const int b_x = kNamed ? pos.wn * C::WN : 0, b_gt = kNamed ? pos.wm * 32 + lane : tid;
  const int a_rem = clamp_int(p.M - m0 - a_x, 0, kAX);
  const int b_rem = clamp_int(p.N - n0 - b_x, 0, kBX);
  // Publishes arrived stages and retires consumed ones, among the threads
  // that share them (named) or the whole block.
  auto sync = [&]() {
    if constexpr (kNamed) {
      named_barrier_sync<1 + C::kWarpsM + C::kWarpsN>(1 + pos.wm, kAG);
      named_barrier_sync<1 + C::kWarpsM + C::kWarpsN>(1 + C::kWarpsM + pos.wn, kBG);
    } else {
      __syncthreads();
    }
  };
  const int64_t KT = (p.K + C::BK - 1) / C::BK;

  TILED_BATCH_LOOP(p, b) {
    const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
    const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
    auto load = [&](int stage, int64_t kt) {
      float* As = smem + stage * C::kStageFloats;
      float* Bs = As + C::BK * C::kLdA;
      const int64_t k0 = kt * C::BK;
      const int k_rem = clamp_int(p.K - k0, 0, C::BK);
      copy_tile_async<AXC, VEC, kAX, C::BK, kAG, C::kLdA>(As + a_x, A.at(m0 + a_x, k0), A.base,
                                                          A.ld, a_rem, k_rem, a_gt);
      copy_tile_async<BXC, VEC, kBX, C::BK, kBG, C::kLdB>(Bs + b_x, B.at(n0 + b_x, k0), B.base,
                                                          B.ld, b_rem, k_rem, b_gt);
    };
    float acc[C::TM][C::TN] = {};
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      if (s < KT) load(s, s);
      cp_async_commit();  // always commit, so group counting stays uniform
    }
    int read_stage = 0, write_stage = C::kStages - 1;
    for (int64_t kt = 0; kt < KT; ++kt) {
      cp_async_wait<C::kStages - 2>();  // my copies of tile kt have landed
      sync();                           // everyone's have; stage kt-1 is free
      if (kt + C::kStages - 1 < KT) load(write_stage, kt + C::kStages - 1);
      cp_async_commit();
      const float* As = smem + read_stage * C::kStageFloats;
      warp_tile_fma<C>(As, As + C::BK * C::kLdA, acc, pos.a_off(), pos.b_off());
      read_stage = read_stage == C::kStages - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == C::kStages - 1 ? 0 : write_stage + 1;
    }
    warp_tile_store<C>(p, p.c + b * p.c_bs, acc, m0 + pos.a_off(), n0 + pos.b_off());
    sync();  // the next batch's prologue overwrites stages still being read
  }
}

// Launches pipelined_kernel<C, Order, layout...> for an f32 problem.
// VEC (16-byte copies) is decided per problem: every X-contiguous operand
// must be aligned; K-contiguous operands are copied 4 bytes at a time anyway.
template <class C, class Order>
const char* launch_pipelined(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream,
                             const char* f32_only_error) {
  return launch_tiled_f32<C, Order>(
      pr, dev, stream,
      {f32_only_error, "pipelined SIMT kernel: needs more shared memory per block than this device has",
       "pipelined SIMT kernel: cudaFuncSetAttribute(max dynamic smem) failed"},
      [](auto a, auto b, auto v) {
        return pipelined_kernel<C, Order, decltype(a)::value, decltype(b)::value, decltype(v)::value>;
      });
}

// Step 7's configuration: step 6's tiles, 4 stages, named barriers.
using CpAsyncCfg = WarpTileCfg<256, 128, 8, 64, 64, 8, 16, /*STAGES=*/4, /*MINB=*/1,
                               /*NAMED=*/true>;

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
