// Step 4: shared-memory tiling + register tiling with cooperative fetching
// (seed 002 v3).
//
// A 16x16-thread block owns a 64x64 tile of C (L = 64); each thread a 4x4
// register block (V = 4).  Per phase the block copies a 64 x 16 slice of A and
// a 16 x 64 slice of B (S = 16) into shared memory: 256 threads fetch
// cooperatively, L*S/256 = 4 elements each per operand.  Both slices are
// stored k-major (sA[k][m], sB[k][n]) so a thread's fragment for one k is V
// consecutive words.  Global traffic: 2*M*N*K/L elements; shared-memory
// traffic: 2*M*N*K/V.
//
// What this step does NOT fix: the fetch walks the m (n) index fastest, which
// is only coalesced for a column-major A (row-major B); loads are 4 bytes wide;
// and the fragment reads of neighbouring threads are V words apart (bank
// conflicts).  Step 5 fixes the loads.
#pragma once
#include "03_thread_tiling.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

constexpr int kTwoLevelL = 64, kTwoLevelS = 16, kTwoLevelV = 4;

template <typename T>
__global__ void __launch_bounds__(256) two_level_kernel(Params<T> p, int64_t tiles_n) {
  using Acc = acc_t<T>;
  constexpr int L = kTwoLevelL, S = kTwoLevelS, V = kTwoLevelV, NT = 256;
  __shared__ Acc As[S][L];
  __shared__ Acc Bs[S][L];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  int64_t tm, tn;
  RowMajorOrder::tile(blockIdx.x, 0, tiles_n, 0, tm, tn);
  const int64_t m0 = tm * L, n0 = tn * L;
  TILED_BATCH_LOOP(p, b) {
    const T* a = p.a + b * p.a_bs;
    const T* bb = p.b + b * p.b_bs;
    Acc acc[V][V];
#pragma unroll
    for (int i = 0; i < V; ++i)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[i][j] = 0;
    for (int64_t k0 = 0; k0 < p.K; k0 += S) {
      // Cooperative fetching: thread tid copies elements tid, tid+NT, ... of
      // the S x L slice (x = m or n fastest), zero outside the matrix.
#pragma unroll
      for (int j = 0; j < L * S / NT; ++j) {
        const int idx = j * NT + tid, x = idx % L, k = idx / L;
        const int64_t m = m0 + x, n = n0 + x, kk = k0 + k;
        As[k][x] = (m < p.M && kk < p.K) ? Cvt<T>::to(a[m * p.a_rs + kk * p.a_cs]) : Acc(0);
        Bs[k][x] = (n < p.N && kk < p.K) ? Cvt<T>::to(bb[kk * p.b_rs + n * p.b_cs]) : Acc(0);
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < S; ++k) {
        Acc av[V], bv[V];
#pragma unroll
        for (int i = 0; i < V; ++i) av[i] = As[k][threadIdx.y * V + i];
#pragma unroll
        for (int j = 0; j < V; ++j) bv[j] = Bs[k][threadIdx.x * V + j];
#pragma unroll
        for (int i = 0; i < V; ++i)
#pragma unroll
          for (int j = 0; j < V; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
    T* cb = p.c + b * p.c_bs;
    const int64_t row0 = m0 + threadIdx.y * V, col0 = n0 + threadIdx.x * V;
#pragma unroll
    for (int i = 0; i < V; ++i)
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (row0 + i < p.M && col0 + j < p.N) store_c(p, cb, row0 + i, col0 + j, acc[i][j]);
  }
}

template <typename T>
const char* launch_two_level(const GemmProblem& pr, cudaStream_t stream) {
  const int64_t tiles_n = ceil_div(pr.N, kTwoLevelL);
  dim3 grid;
  if (const char* e = make_grid(ceil_div(pr.M, kTwoLevelL) * tiles_n, pr.batch, &grid)) return e;
  two_level_kernel<T><<<grid, dim3(16, 16), 0, stream>>>(make_params<T>(pr), tiles_n);
  return nullptr;
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
