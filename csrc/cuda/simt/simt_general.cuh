// The general SIMT kernel: any dtype, any layout, any shape, any alignment.
//
// 128x128 output tile per 256-thread block, K walked in slices of 8; each
// thread owns an 8x8 register tile.  Both operands are staged in shared memory
// k-major (As[k][m], Bs[k][n]) so the inner product reads two short vectors
// per k and does 64 FMAs with them.  Global loads are mapped per layout so a
// warp always walks the operand's contiguous dimension (coalesced for row-
// and column-major alike); the next slice is fetched into registers while the
// current one is multiplied.  Every global access is bounds-checked and
// out-of-range elements are zero, so edges need no special case.  Offsets are
// 64-bit.  Scalar loads keep it alignment-agnostic: the fast kernels behind
// dispatch are the ones that assume 16-byte alignment.
#pragma once
#include <cstdint>

#include "../../gemm_problem.h"
#include "../epilogue.cuh"
#include "numeric.cuh"

namespace tiled {
namespace cuda {
namespace simt_general {

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;
constexpr int PAD = 4;  // keeps the k-major stores of a row-major operand off one bank
constexpr int PER_THREAD_A = BM * BK / THREADS;  // 4
constexpr int PER_THREAD_B = BN * BK / THREADS;  // 4

// Which (row-of-tile, k) this thread loads for its i-th element.  When the
// operand's contiguous dim is k, consecutive threads take consecutive k.
template <bool K_CONTIGUOUS, int EXTENT>
__device__ __forceinline__ void load_coord(int tid, int i, int& r, int& k) {
  const int idx = tid + i * THREADS;
  if (K_CONTIGUOUS) { k = idx % BK; r = idx / BK; }
  else              { r = idx % EXTENT; k = idx / EXTENT; }
}

template <typename T, typename Acc, bool A_ROW, bool B_ROW>
__global__ void __launch_bounds__(THREADS)
gemm_kernel(GemmProblem p, int64_t m_tiles, int64_t n_tiles) {
  __shared__ Acc As[BK][BM + PAD];
  __shared__ Acc Bs[BK][BN + PAD];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const T* bias = static_cast<const T*>(p.bias);

  for (int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = static_cast<const T*>(p.a.ptr) + bz * p.a.batch_stride;
    const T* B = static_cast<const T*>(p.b.ptr) + bz * p.b.batch_stride;
    T* C = static_cast<T*>(p.c) + bz * p.c_batch_stride;
    for (int64_t by = blockIdx.y; by < m_tiles; by += gridDim.y) {
      const int64_t m0 = by * BM, n0 = int64_t(blockIdx.x) * BN;
      Acc acc[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = Acc(0);

      Acc ra[PER_THREAD_A], rb[PER_THREAD_B];
      auto fetch = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < PER_THREAD_A; ++i) {
          int r, k;
          load_coord<A_ROW, BM>(tid, i, r, k);
          const int64_t gm = m0 + r, gk = k0 + k;
          ra[i] = (gm < p.M && gk < p.K) ? to_acc<Acc>(A[gm * p.a.row_stride + gk * p.a.col_stride]) : Acc(0);
        }
#pragma unroll
        for (int i = 0; i < PER_THREAD_B; ++i) {
          int c, k;
          load_coord<!B_ROW, BN>(tid, i, c, k);
          const int64_t gn = n0 + c, gk = k0 + k;
          rb[i] = (gn < p.N && gk < p.K) ? to_acc<Acc>(B[gk * p.b.row_stride + gn * p.b.col_stride]) : Acc(0);
        }
      };
      auto stash = [&]() {
#pragma unroll
        for (int i = 0; i < PER_THREAD_A; ++i) {
          int r, k;
          load_coord<A_ROW, BM>(tid, i, r, k);
          As[k][r] = ra[i];
        }
#pragma unroll
        for (int i = 0; i < PER_THREAD_B; ++i) {
          int c, k;
          load_coord<!B_ROW, BN>(tid, i, c, k);
          Bs[k][c] = rb[i];
        }
      };

      fetch(0);
      for (int64_t k0 = 0; k0 < p.K; k0 += BK) {
        __syncthreads();  // previous slice fully consumed
        stash();
        __syncthreads();  // slice visible to all
        if (k0 + BK < p.K) fetch(k0 + BK);  // overlaps the FMAs below
#pragma unroll
        for (int k = 0; k < BK; ++k) {
          Acc a[TM], b[TN];
          // Rows ty*4 + {0..3} and 64 + ty*4 + {0..3}: a warp reads two
          // 4-wide runs, keeping shared-memory reads broadcast-friendly.
#pragma unroll
          for (int i = 0; i < TM / 2; ++i) {
            a[i] = As[k][ty * (TM / 2) + i];
            a[i + TM / 2] = As[k][BM / 2 + ty * (TM / 2) + i];
          }
#pragma unroll
          for (int j = 0; j < TN / 2; ++j) {
            b[j] = Bs[k][tx * (TN / 2) + j];
            b[j + TN / 2] = Bs[k][BN / 2 + tx * (TN / 2) + j];
          }
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
      }

#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int64_t gm = m0 + (i < TM / 2 ? ty * (TM / 2) + i : BM / 2 + ty * (TM / 2) + i - TM / 2);
        if (gm >= p.M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const int64_t gn = n0 + (j < TN / 2 ? tx * (TN / 2) + j : BN / 2 + tx * (TN / 2) + j - TN / 2);
          if (gn >= p.N) continue;
          Acc v = acc[i][j];
          if (bias) v += to_acc<Acc>(bias[gn]);
          if (p.epi.any()) v = epilogue_element_rt<T, Acc>(p.epi, v, bz, gm, gn);  // uniform branch
          C[gm * p.c_row_stride + gn] = from_acc<T, Acc>(v);
        }
      }
    }
  }
}

template <typename T>
void launch(const GemmProblem& p, cudaStream_t stream) {
  using Acc = typename AccumFor<T>::type;
  const int64_t m_tiles = (p.M + BM - 1) / BM, n_tiles = (p.N + BN - 1) / BN;
  dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles < 65535 ? m_tiles : 65535),
            static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  const bool a_row = p.a.row_major(), b_row = p.b.row_major();
  if (a_row && b_row) gemm_kernel<T, Acc, true, true><<<grid, THREADS, 0, stream>>>(p, m_tiles, n_tiles);
  else if (a_row) gemm_kernel<T, Acc, true, false><<<grid, THREADS, 0, stream>>>(p, m_tiles, n_tiles);
  else if (b_row) gemm_kernel<T, Acc, false, true><<<grid, THREADS, 0, stream>>>(p, m_tiles, n_tiles);
  else gemm_kernel<T, Acc, false, false><<<grid, THREADS, 0, stream>>>(p, m_tiles, n_tiles);
}

}  // namespace simt_general
}  // namespace cuda
}  // namespace tiled
