// Step 5: coalesced 128-bit loads into transposed, padded shared tiles
// (seeds 001 on coalescing, 004 on 128-bit copies and the transposed tile).
//
// Block tile 128 x 128, BK = 8, 256 threads, each an 8 x 8 register block
// (as step 4, but twice the register tile: 64 FMAs per 16 shared words).
// What is new is how tiles travel:
//   * global -> registers: each thread reads float4 vectors along the
//     operand's contiguous dim, so a warp reads whole 32-byte sectors whatever
//     the layout (step 4 read a row-major A with a stride of K);
//   * registers -> shared: both tiles are stored k-major (one row per k).  A
//     K-contiguous operand (row-major A, column-major B) is transposed on the
//     way (4 scalar stores per vector); the row pitch is BX + 4 words, which
//     keeps rows 16-byte aligned and spreads those transposing stores over
//     all 32 banks;
//   * shared -> registers: a thread's 8 values for one k are two LDS.128.
// Global traffic is unchanged from step 4's formula (2*M*N*K/128 with the
// bigger tile); the gain is fewer, wider instructions and full sectors.
//
// Vectors need 16-byte alignment of the base pointers and leading dims.  The
// launcher checks it and otherwise runs the scalar-load variant of this same
// kernel (VEC = false), never an error.
//
// What this step does NOT fix: each thread's 8 columns are contiguous, so the
// B fragment reads of a warp's 16 column-threads are 32 bytes apart and take
// two shared-memory wavefronts instead of one (step 6); loads and math do not
// overlap (step 7).
#pragma once
#include "common.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

// Synchronous copy of one operand's BX x BK tile into k-major shared memory
// s (row pitch LDS), by NT threads; elements outside (x_rem, k_rem) are zero.
template <bool XC, bool VEC, int BX, int BK, int NT, int LDS>
__device__ __forceinline__ void copy_tile_sync(float* s, const float* g, int64_t ld, int x_rem,
                                               int k_rem, int tid) {
  if constexpr (VEC && XC) {  // float4 along x, one 16-byte shared store
    constexpr int CPR = BX / 4, CHUNKS = BX * BK / 4;
    static_assert(CHUNKS % NT == 0, "tile must split evenly over the threads");
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; ++i) {
      const int idx = tid + i * NT, x = (idx % CPR) * 4, k = idx / CPR;
      const float* src = g + tile_offset<XC>(x, k, ld);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (k < k_rem && x + 3 < x_rem) {
        v = *reinterpret_cast<const float4*>(src);
      } else if (k < k_rem) {
        if (x < x_rem) v.x = src[0];
        if (x + 1 < x_rem) v.y = src[1];
        if (x + 2 < x_rem) v.z = src[2];
      }
      *reinterpret_cast<float4*>(s + k * LDS + x) = v;
    }
  } else if constexpr (VEC) {  // float4 along k, transposed into 4 rows
    constexpr int CPR = BK / 4, CHUNKS = BX * BK / 4;
    static_assert(CHUNKS % NT == 0, "tile must split evenly over the threads");
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; ++i) {
      const int idx = tid + i * NT, k = (idx % CPR) * 4, x = idx / CPR;
      const float* src = g + tile_offset<XC>(x, k, ld);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (x < x_rem && k + 3 < k_rem) {
        v = *reinterpret_cast<const float4*>(src);
      } else if (x < x_rem) {
        if (k < k_rem) v.x = src[0];
        if (k + 1 < k_rem) v.y = src[1];
        if (k + 2 < k_rem) v.z = src[2];
      }
      s[(k + 0) * LDS + x] = v.x;
      s[(k + 1) * LDS + x] = v.y;
      s[(k + 2) * LDS + x] = v.z;
      s[(k + 3) * LDS + x] = v.w;
    }
  } else if constexpr (XC) {  // scalar, x fastest: coalesced, conflict-free
    constexpr int ELEMS = BX * BK;
    static_assert(ELEMS % NT == 0, "tile must split evenly over the threads");
#pragma unroll
    for (int i = 0; i < ELEMS / NT; ++i) {
      const int idx = tid + i * NT, x = idx % BX, k = idx / BX;
      s[k * LDS + x] = (x < x_rem && k < k_rem) ? g[tile_offset<XC>(x, k, ld)] : 0.0f;
    }
  } else {  // scalar, 8 k values fastest (one 32-byte sector), then x
    constexpr int ELEMS = BX * BK;
    static_assert(ELEMS % NT == 0 && BK % 8 == 0, "tile must split evenly over the threads");
#pragma unroll
    for (int i = 0; i < ELEMS / NT; ++i) {
      const int idx = tid + i * NT, r = idx >> 3;
      const int x = r % BX, k = (r / BX) * 8 + (idx & 7);
      s[k * LDS + x] = (x < x_rem && k < k_rem) ? g[tile_offset<XC>(x, k, ld)] : 0.0f;
    }
  }
}

struct VectorizedCfg {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  static constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
  static constexpr int kLdA = BM + 4, kLdB = BN + 4;
};

template <class C, bool AXC, bool BXC, bool VEC>
__global__ void __launch_bounds__(C::kThreads) vectorized_kernel(Params<float> p, int64_t tiles_n) {
  __shared__ __align__(16) float As[C::BK][C::kLdA];
  __shared__ __align__(16) float Bs[C::BK][C::kLdB];
  const int tid = threadIdx.x, ty = tid / (C::BN / C::TN), tx = tid % (C::BN / C::TN);
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
      copy_tile_sync<AXC, VEC, C::BM, C::BK, C::kThreads, C::kLdA>(&As[0][0], A.at(m0, k0), A.ld,
                                                                   m_rem, k_rem, tid);
      copy_tile_sync<BXC, VEC, C::BN, C::BK, C::kThreads, C::kLdB>(&Bs[0][0], B.at(n0, k0), B.ld,
                                                                   n_rem, k_rem, tid);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < C::BK; ++k) {
        float a[C::TM], bv[C::TN];
#pragma unroll
        for (int i = 0; i < C::TM; i += 4)
          *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(&As[k][ty * C::TM + i]);
#pragma unroll
        for (int j = 0; j < C::TN; j += 4)
          *reinterpret_cast<float4*>(&bv[j]) = *reinterpret_cast<const float4*>(&Bs[k][tx * C::TN + j]);
#pragma unroll
        for (int i = 0; i < C::TM; ++i)
#pragma unroll
          for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
      }
      __syncthreads();
    }
    float* cb = p.c + b * p.c_bs;
#pragma unroll
    for (int i = 0; i < C::TM; ++i) {
      const int64_t row = m0 + ty * C::TM + i;
      if (row >= p.M) continue;
#pragma unroll
      for (int j = 0; j < C::TN; j += 4)
        store_c4(p, cb, row, n0 + tx * C::TN + j, acc[i][j], acc[i][j + 1], acc[i][j + 2],
                 acc[i][j + 3]);
    }
  }
}

// A template (on the config) so that only translation units that call it
// instantiate its kernels.
template <class C = VectorizedCfg>
const char* launch_vectorized(const GemmProblem& pr, cudaStream_t stream) {
  constexpr const char* kF32Only = "ladder step 5 (vectorized) supports float32 only";
  return launch_by_layout_f32<C>(pr, stream, kF32Only, [](auto axc, auto bxc, auto v) {
    return vectorized_kernel<C, decltype(axc)::value, decltype(bxc)::value, decltype(v)::value>;
  });
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
