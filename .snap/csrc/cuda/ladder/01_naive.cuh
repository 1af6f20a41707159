// Step 1: one thread per output element (seeds 002 "v1", 003).
//
// Thread (ty, tx) of a 16x16 block computes C[row, col] with a dot product of
// length K straight from global memory.  Every thread reads 2K elements, so
// the whole product moves 2*M*N*K elements through the memory system: every
// element of A is fetched N times and every element of B M times.  Only the L1
// and L2 caches stand between this kernel and DRAM.
#pragma once
#include "common.cuh"

namespace tiled {
namespace cuda {
namespace ladder {

constexpr int kNaiveBlock = 16;

template <typename T>
__global__ void __launch_bounds__(kNaiveBlock* kNaiveBlock)
    naive_kernel(Params<T> p, int64_t tiles_n) {
  using Acc = acc_t<T>;
  int64_t tm, tn;
  RowMajorOrder::tile(blockIdx.x, 0, tiles_n, 0, tm, tn);
  const int64_t row = tm * kNaiveBlock + threadIdx.y;
  const int64_t col = tn * kNaiveBlock + threadIdx.x;  // x fastest: C and B reads coalesce
  if (row >= p.M || col >= p.N) return;
  TILED_BATCH_LOOP(p, b) {
    const T* a = p.a + b * p.a_bs + row * p.a_rs;
    const T* bb = p.b + b * p.b_bs + col * p.b_cs;
    Acc acc = 0;
    for (int64_t k = 0; k < p.K; ++k)
      acc += Cvt<T>::to(a[k * p.a_cs]) * Cvt<T>::to(bb[k * p.b_rs]);
    store_c(p, p.c + b * p.c_bs, row, col, acc);
  }
}

template <typename T>
const char* launch_naive(const GemmProblem& pr, cudaStream_t stream) {
  const int64_t tiles_n = ceil_div(pr.N, kNaiveBlock);
  dim3 grid;
  if (const char* e = make_grid(ceil_div(pr.M, kNaiveBlock) * tiles_n, pr.batch, &grid)) return e;
  naive_kernel<T><<<grid, dim3(kNaiveBlock, kNaiveBlock), 0, stream>>>(make_params<T>(pr), tiles_n);
  return nullptr;
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
