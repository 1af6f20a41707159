// Step 2: shared-memory tiling (seeds 000, 001, 003).
//
// A TILE x TILE block computes a TILE x TILE output tile in phases: in each
// phase it copies one TILE x TILE tile of A and one of B into shared memory
// (one element per thread, zero-filled outside the matrix), synchronises, and
// every thread does TILE multiply-adds from shared memory.  Each element
// fetched from global memory is now used TILE times, so global traffic drops
// from 2*M*N*K to 2*M*N*K/TILE elements.
//
// What this step does NOT fix: one thread still does one FMA per two shared
// loads (shared-memory bound), and a column-major A (or row-major... B) tile
// is read with the thread index on the strided dim (uncoalesced).
#pragma once
#include "01_naive.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

template <typename T, int TILE>
__global__ void __launch_bounds__(TILE* TILE) smem_tiled_kernel(Params<T> p, int64_t tiles_n) {
  using Acc = acc_t<T>;
  __shared__ Acc As[TILE][TILE];
  __shared__ Acc Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tm, tn;
  RowMajorOrder::tile(blockIdx.x, 0, tiles_n, 0, tm, tn);
  const int64_t row = tm * TILE + ty;
  const int64_t col = tn * TILE + tx;
  TILED_BATCH_LOOP(p, b) {
    const T* a = p.a + b * p.a_bs;
    const T* bb = p.b + b * p.b_bs;
    Acc acc = 0;
    for (int64_t k0 = 0; k0 < p.K; k0 += TILE) {
      // One element per thread; zero outside the matrix so the FMA loop
      // below never needs a bound.
      As[ty][tx] = (row < p.M && k0 + tx < p.K)
                       ? Cvt<T>::to(a[row * p.a_rs + (k0 + tx) * p.a_cs]) : Acc(0);
      Bs[ty][tx] = (k0 + ty < p.K && col < p.N)
                       ? Cvt<T>::to(bb[(k0 + ty) * p.b_rs + col * p.b_cs]) : Acc(0);
      __syncthreads();  // the tiles are complete
#pragma unroll
      for (int j = 0; j < TILE; ++j) acc += As[ty][j] * Bs[j][tx];
      __syncthreads();  // everyone is done reading before the next phase overwrites
    }
    if (row < p.M && col < p.N) store_c(p, p.c + b * p.c_bs, row, col, acc);
  }
}

template <typename T, int TILE>
const char* launch_smem_tiled(const GemmProblem& pr, cudaStream_t stream) {
  const int64_t tiles_n = ceil_div(pr.N, TILE);
  dim3 grid;
  if (const char* e = make_grid(ceil_div(pr.M, TILE) * tiles_n, pr.batch, &grid)) return e;
  smem_tiled_kernel<T, TILE><<<grid, dim3(TILE, TILE), 0, stream>>>(make_params<T>(pr), tiles_n);
  return nullptr;
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
