// Step 6: warp tiling (seed 004): 256 x 128 block tile, 64 x 64 warp tiles,
// 8 x 16 register tiles whose rows and columns are interleaved across the warp.
//
// The block's 8 warps each own a 64 x 64 sub-tile (4 warps down, 2 across).
// Inside a warp the 32 threads form 8 rows x 4 columns; a thread's 8 rows are
// two groups of 4 rows, 32 apart, and its 16 columns four groups of 4, 16
// apart.  For one k the warp's A fragment reads are then 8 distinct float4
// that are consecutive in shared memory (128 bytes: one wavefront, the rest
// broadcast) and its B reads 4 consecutive float4, instead of step 5's reads
// 32 bytes apart (two wavefronts).  The bigger register tile (8 x 16) also
// raises the FMA : shared-load ratio from 64 : 4 to 128 : 6.
// Global traffic per block: (256 + 128) * K for 256 * 128 outputs, i.e.
// 2*M*N*K * (1/256 + 1/128) / 2 = 0.75x step 5's.
//
// What this step does NOT fix: loads and math still alternate with two full
// barriers per k-tile (step 7).
#pragma once
#include "05_vectorized.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

// Tile configuration shared by steps 6-8 and simt_fast.
//   BM x BN block tile, BK k-slice, WM x WN warp tile, TM x TN thread tile,
//   STAGES shared-memory stages (step 7+), MINB blocks/SM for
//   __launch_bounds__, NAMED: partial-block barriers (step 7+).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int STAGES_ = 1,
          int MINB_ = 1, bool NAMED_ = false>
struct WarpTileCfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int kStages = STAGES_, kMinBlocks = MINB_;
  static constexpr bool kNamedBarriers = NAMED_;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kThrRows = WM / TM, kThrCols = WN / TN;  // thread grid inside a warp
  static constexpr int kAGroup = 4 * kThrRows, kBGroup = 4 * kThrCols;  // stride of 4-row groups
  static constexpr int kLdA = BM + 4, kLdB = BN + 4;
  static constexpr int kStageFloats = BK * (kLdA + kLdB);
  static constexpr int kSmemBytes = kStages * kStageFloats * 4;
  static_assert(kThrRows * kThrCols == 32, "a warp is 32 threads");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BM % 32 == 0 && BN % 32 == 0, "float4 fragments");
  static_assert(BK % 8 == 0, "k-slices are whole 32-byte sectors");
};

// A thread's position: warp (wm, wn), and inside the warp (tr, tc).
template <class C> struct WarpTilePos {
  int warp, wm, wn, tr, tc;
  __device__ __forceinline__ explicit WarpTilePos(int tid) {
    const int lane = tid & 31;
    warp = tid >> 5;
    wm = warp / C::kWarpsN;
    wn = warp % C::kWarpsN;
    tr = lane / C::kThrCols;
    tc = lane % C::kThrCols;
  }
  __device__ __forceinline__ int a_off() const { return wm * C::WM + tr * 4; }
  __device__ __forceinline__ int b_off() const { return wn * C::WN + tc * 4; }
};

// The order of one k's FFMAs over the thread tile (warp_outer).  Every
// order gives each accumulator the same FFMAs in the same k order: the same
// bits.
//  rows:  row by row.
//  cols:  column by column, the rows of each column in the opposite order of
//         the previous one's, so one column's last FFMA and the next one's
//         first share a[i].
//  quads: pairs of columns walked down the rows (turning at each pair), each
//         row's two FFMAs in alternating order, so every FFMA shares a[i] or
//         bv[j] with the one before and each 2 x 2 quad's four operands sit
//         in the `.reuse` caches (one register per slot and bank).
// An FFMA whose three source registers all come from the register file
// issues in two cycles (benchmarks/research/micro/ffma_operands.cu: one such FFMA in
// T costs 1/T more); the `.reuse` operand caches spare the reads of a
// register the previous FFMAs of the same slot named.  Row by row, every
// row (and, in ptxas's schedule, every piece of a row it splits off) starts
// with a new a[i] and a new b[j]: 13.8% of step 106's FFMAs read three
// registers (NN, static count over its k-loop), 17-19% of the sliced-K 64x64
// kernel's; column by column with the turns 8.8% and 6-9% (docs/ladder.md,
// round 6).  At ptxas's default -O3 its schedule reorders them (step 108's
// fast k-tile: 7.6% three-read whatever the source order); compiled with
// -Xptxas -O1 the source order survives: quads 2.0% (step 109, round 7).
enum class FmaOrder { rows, cols, quads };

template <class C, FmaOrder O = FmaOrder::rows>
__device__ __forceinline__ void warp_outer(float (&acc)[C::TM][C::TN], const float (&a)[C::TM],
                                           const float (&bv)[C::TN]) {
  if constexpr (O == FmaOrder::quads) {
    static_assert(C::TN % 2 == 0, "pairs of columns");
#pragma unroll
    for (int jp = 0; jp < C::TN / 2; ++jp)
#pragma unroll
      for (int r = 0; r < C::TM; ++r) {
        const int i = (jp & 1) ? C::TM - 1 - r : r;
        const int j = 2 * jp + (r & 1);  // this row's first column; then j ^ 1
        acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
        acc[i][j ^ 1] = fmaf(a[i], bv[j ^ 1], acc[i][j ^ 1]);
      }
  } else if constexpr (O == FmaOrder::cols) {
#pragma unroll
    for (int j = 0; j < C::TN; ++j)
#pragma unroll
      for (int r = 0; r < C::TM; ++r) {
        const int i = (j & 1) ? C::TM - 1 - r : r;
        acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
      }
  } else {
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
  }
}

// One BK slice of the warp tile: acc += A_slice^T-fragments x B_slice-fragments.
template <class C, FmaOrder O = FmaOrder::rows>
__device__ __forceinline__ void warp_tile_fma(const float* As, const float* Bs,
                                              float (&acc)[C::TM][C::TN], int a_off, int b_off) {
#pragma unroll
  for (int k = 0; k < C::BK; ++k) {
    float a[C::TM], bv[C::TN];
#pragma unroll
    for (int g = 0; g < C::TM / 4; ++g)
      *reinterpret_cast<float4*>(&a[4 * g]) =
          *reinterpret_cast<const float4*>(As + k * C::kLdA + a_off + g * C::kAGroup);
#pragma unroll
    for (int g = 0; g < C::TN / 4; ++g)
      *reinterpret_cast<float4*>(&bv[4 * g]) =
          *reinterpret_cast<const float4*>(Bs + k * C::kLdB + b_off + g * C::kBGroup);
    warp_outer<C, O>(acc, a, bv);
  }
}

// Writes the thread's TM x TN block; (row0, col0) = tile origin + a_off/b_off.
template <class C>
__device__ __forceinline__ void warp_tile_store(const Params<float>& p, float* cb,
                                                const float (&acc)[C::TM][C::TN], int64_t row0,
                                                int64_t col0) {
#pragma unroll
  for (int i = 0; i < C::TM; ++i) {
    const int64_t row = row0 + (i / 4) * C::kAGroup + (i % 4);
    if (row >= p.M) continue;
#pragma unroll
    for (int g = 0; g < C::TN / 4; ++g)
      store_c4(p, cb, row, col0 + g * C::kBGroup, acc[i][4 * g], acc[i][4 * g + 1],
               acc[i][4 * g + 2], acc[i][4 * g + 3]);
  }
}

using WarpTiledCfg = WarpTileCfg<256, 128, 8, 64, 64, 8, 16>;

template <class C, bool AXC, bool BXC, bool VEC>
__global__ void __launch_bounds__(C::kThreads) warp_tiled_kernel(Params<float> p, int64_t tiles_n) {
  __shared__ __align__(16) float As[C::BK * C::kLdA];
  __shared__ __align__(16) float Bs[C::BK * C::kLdB];
  const int tid = threadIdx.x;
  const WarpTilePos<C> pos(tid);
  int64_t tm, tn;
  RowMajorOrder::tile(blockIdx.x, 0, tiles_n, 0, tm, tn);
  const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
  const int m_rem = clamp_int(p.M - m0, 0, C::BM), n_rem = clamp_int(p.N - n0, 0, C::BN);
  TILED_BATCH_LOOP(p, b) {
    const OperandView<AXC> A{p.a + b * p.a_bs, AXC ? p.a_cs : p.a_rs};
    const OperandView<BXC> B{p.b + b * p.b_bs, BXC ? p.b_rs : p.b_cs};
    float acc[C::TM][C::TN] = {};
    for (int64_t k0 = 0; k0 < p.K; k0 += C::BK) {
      const int k_rem = clamp_int(p.K - k0, 0, C::BK);
      copy_tile_sync<AXC, VEC, C::BM, C::BK, C::kThreads, C::kLdA>(As, A.at(m0, k0), A.ld, m_rem,
                                                                   k_rem, tid);
      copy_tile_sync<BXC, VEC, C::BN, C::BK, C::kThreads, C::kLdB>(Bs, B.at(n0, k0), B.ld, n_rem,
                                                                   k_rem, tid);
      __syncthreads();
      warp_tile_fma<C>(As, Bs, acc, pos.a_off(), pos.b_off());
      __syncthreads();
    }
    warp_tile_store<C>(p, p.c + b * p.c_bs, acc, m0 + pos.a_off(), n0 + pos.b_off());
  }
}

// A template (on the config) so that only translation units that call it
// instantiate its kernels.
template <class C = WarpTiledCfg>
const char* launch_warp_tiled(const GemmProblem& pr, cudaStream_t stream) {
  constexpr const char* kF32Only = "ladder step 6 (warp tiling) supports float32 only";
  return launch_by_layout_f32<C>(pr, stream, kF32Only, [](auto axc, auto bxc, auto v) {
    return warp_tiled_kernel<C, decltype(axc)::value, decltype(bxc)::value, decltype(v)::value>;
  });
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
