// The few-row GEMM family (gemv.cuh), as dispatch sees it: host-side types
// and the per-dtype launchers.  Torch-free, no device code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tiled {
namespace cuda {
namespace gemv {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxRows = 8;  // M (or, swapped, N) of at most this many rows
// A's K slice lives in shared memory: at most this many bytes of it.
constexpr int kMaxSliceBytes = 64 * 1024;

// Rows of a K-major B (columns of C) per warp and per CTA: 8 per warp for
// one or two rows of A, 4 for more (the accumulators and the converted
// rows of A grow with MR).  An N-major B is read 64 columns per CTA.
constexpr int rows_per_warp(int mr) { return mr <= 2 ? 8 : 4; }
constexpr int tile_n(int mr, bool b_kmajor) { return b_kmajor ? kWarps * rows_per_warp(mr) : 64; }

// Everything a launch needs (strides in elements).  The kernel computes
// C[m, n] = sum_k A[m, k] B[k, n] (+ bias) for m < M <= MR, n < N:
//   A(m, k) at a[m * a_rs + k * a_cs] (any strides: it is small),
//   B(k, n) at b[n * ldb + k] (K-major) or b[k * ldb + n] (N-major),
//   C(m, n) at c[m * c_rs + n * c_cs], bias indexed by n (or by m with
//   bias_on_rows: a swapped problem, see gemv.cu); batch b adds b * *_batch.
struct Params {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* c = nullptr;
  int M = 0, N = 0, K = 0;
  int64_t a_rs = 0, a_cs = 1, ldb = 0;
  int64_t a_batch = 0, b_batch = 0, c_batch = 0, c_rs = 0, c_cs = 1;
  int k_slice = 0;  // K per CTA of a cluster (a multiple of 8)
  int splits = 1;   // CTAs per cluster: slices of K, summed in rank order
  bool bias_on_rows = false;
  bool stream_b = false;  // B read once: loads under L2's evict_first policy
  bool a_vec = false;     // A K-contiguous with 16-byte aligned rows: 16-byte copies
};

struct Launch {
  Params p;
  int mr = 1;  // 1, 2, 4 or 8: rows of A the kernel instance holds
  bool b_kmajor = true;
  int batch = 1;
};

// Shared memory of an instance: A's slice, padded, plus the reduction.
inline int smem_bytes(int mr, bool b_kmajor, int k_slice) {
  const int partial = mr * tile_n(mr, b_kmajor) * 4;
  return mr * k_slice * 2 + (b_kmajor ? 1 : 1 + kWarps) * partial;
}

const char* launch_bf16(const Launch& l, cudaStream_t stream);
const char* launch_f16(const Launch& l, cudaStream_t stream);

}  // namespace gemv
}  // namespace cuda
}  // namespace tiled
