// The small-M tensor-core GEMM family (skinny.cuh), as dispatch sees it:
// host-side types and the per-dtype launchers.  Torch-free, no device code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../../gemm_problem.h"
#include "../dispatch.h"

namespace tiled {
namespace cuda {
namespace skinny {

constexpr int kBN = 128;  // columns of C per CTA
// K per pipeline stage: 128 bytes of every row (64 bf16 / fp16 elements, 32 fp32 ones).
constexpr int kBKBytes = 128;
constexpr int bk_for(int elem_bytes) { return kBKBytes / elem_bytes; }
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// Pipeline depth per block height: two CTAs fit on an SM in every case
// (5 x 18 KB, 5 x 20 KB, 4 x 24 KB).  The "deep" variants (by name only,
// opt-in until measured) has 7 stages (126-168 KB, one CTA per SM), for grids
// of about one CTA per SM: 6 stages of B in flight instead of 3-4.
constexpr int kDeepStages = 7;
constexpr int stages_for(int bm, bool deep = false) { return deep ? kDeepStages : bm <= 32 ? 5 : 4; }
constexpr int smem_bytes(int bm, bool deep = false) { return stages_for(bm, deep) * (bm + kBN) * kBKBytes; }

// Everything a launch needs.  Strides in elements.  The kernel computes
// rows [0, M) x cols [0, N) of C; C element (r, c) of batch b lives at
// c + b*c_batch + r*c_rs + c*c_cs, and bias is indexed by the column (or,
// with bias_on_rows, by the row: a swapped problem, see skinny.cu).
struct Params {
  const void* a = nullptr;  // [batch] M x K
  const void* b = nullptr;  // [batch] K x N
  const void* bias = nullptr;
  void* c = nullptr;
  float* ws = nullptr;  // [batch][splits][M][N] fp32 partials (splits > 1)
  int M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0;          // the non-unit stride of each operand
  int64_t a_batch = 0, b_batch = 0;  // 0: broadcast
  int64_t c_batch = 0, c_rs = 0, c_cs = 1;
  int k_blocks_per_split = 1;
  int splits = 1;
  bool bias_on_rows = false;
  // splits > 1 on sm_90a: the S slices of a tile are one cluster and reduce
  // through distributed shared memory (no workspace, no second kernel).
  bool cluster_reduce = false;
  // B is read once (one row tile; the K slices are disjoint): its copies
  // take L2's evict_first policy (cp_async.cuh; settings.h's l2_stream_bits).
  bool stream_b = false;
  // The fused epilogue (gemm_problem.h), in the caller's coordinates: a
  // swapped problem (bias_on_rows) indexes it transposed, as it does C.
  Epilogue epi;
};

// A launch: the block height, the operands' layouts and the grid.
struct Launch {
  Params p;
  int bm = 16;
  bool a_kmajor = true;  // A(m, k) at a[m * lda + k]
  bool b_kmajor = true;  // B(k, n) at b[n * ldb + k]
  bool deep = false;     // kDeepStages-stage pipeline
  int splits = 1;        // K slices as configured (p.splits: after dropping empty ones)
  int batch = 1;
};

// Per-dtype launchers (skinny_bf16.cu, skinny_f16.cu, skinny_tf32.cu: fp32
// operands with TF32 allowed): the main kernel, then the split reduction when
// p.splits > 1.
const char* launch_bf16(const Launch& l, cudaStream_t stream);
const char* launch_f16(const Launch& l, cudaStream_t stream);
const char* launch_tf32(const Launch& l, cudaStream_t stream);

}  // namespace skinny
}  // namespace cuda
}  // namespace tiled
