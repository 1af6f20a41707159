// Step 3: register (thread) tiling, no shared memory (seed 002 v1.5 / v2).
//
// Each thread computes a V x V block of C.  For every k it loads a column
// slice a[V] of A and a row slice b[V] of B into registers and does the V*V
// outer-product update, so each loaded element feeds V FMAs: global traffic
// is 2*M*N*K/V elements (seed 002: N^2/V^2 threads x 2NV reads = 2N^3/V) and
// the FMA : load ratio rises from 1:2 to V:2.
//
// What this step does NOT fix: neighbouring threads read addresses V apart
// (partly coalesced), and nothing is shared between threads except through
// the L1 cache.  Step 2's shared memory and this step's registers are
// combined in step 4.
#pragma once
#include "02_smem_tiling.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

constexpr int kThreadTileV = 4;     // V x V outputs per thread
constexpr int kThreadTileBlock = 16;  // 16 x 16 threads -> 64 x 64 outputs per block

template <typename T>
__global__ void __launch_bounds__(kThreadTileBlock* kThreadTileBlock)
    thread_tiled_kernel(Params<T> p, int64_t tiles_n) {
  using Acc = acc_t<T>;
  constexpr int V = kThreadTileV, BT = kThreadTileBlock * kThreadTileV;
  int64_t tm, tn;
  RowMajorOrder::tile(blockIdx.x, 0, tiles_n, 0, tm, tn);
  const int64_t row0 = tm * BT + threadIdx.y * V;
  const int64_t col0 = tn * BT + threadIdx.x * V;
  // Rows/cols past the edge are clamped to a valid index (their values are
  // computed and discarded) so the k loop carries no bounds test.
  int64_t rows[V], cols[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    rows[i] = row0 + i < p.M ? row0 + i : p.M - 1;
    cols[i] = col0 + i < p.N ? col0 + i : p.N - 1;
  }
  TILED_BATCH_LOOP(p, b) {
    const T* a = p.a + b * p.a_bs;
    const T* bb = p.b + b * p.b_bs;
    Acc acc[V][V];
#pragma unroll
    for (int i = 0; i < V; ++i)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[i][j] = 0;
    for (int64_t k = 0; k < p.K; ++k) {
      Acc av[V], bv[V];
#pragma unroll
      for (int i = 0; i < V; ++i) av[i] = Cvt<T>::to(a[rows[i] * p.a_rs + k * p.a_cs]);
#pragma unroll
      for (int j = 0; j < V; ++j) bv[j] = Cvt<T>::to(bb[k * p.b_rs + cols[j] * p.b_cs]);
#pragma unroll
      for (int i = 0; i < V; ++i)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[i][j] += av[i] * bv[j];
    }
    T* cb = p.c + b * p.c_bs;
#pragma unroll
    for (int i = 0; i < V; ++i)
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (row0 + i < p.M && col0 + j < p.N) store_c(p, cb, row0 + i, col0 + j, acc[i][j]);
  }
}

template <typename T>
const char* launch_thread_tiled(const GemmProblem& pr, cudaStream_t stream) {
  constexpr int BT = kThreadTileBlock * kThreadTileV;
  const int64_t tiles_n = ceil_div(pr.N, BT);
  dim3 grid;
  if (const char* e = make_grid(ceil_div(pr.M, BT) * tiles_n, pr.batch, &grid)) return e;
  thread_tiled_kernel<T><<<grid, dim3(kThreadTileBlock, kThreadTileBlock), 0, stream>>>(
      make_params<T>(pr), tiles_n);
  return nullptr;
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
