// Host side of the small-M family: which problems it takes, which block
// height and K split, and the swap that serves small N with the same kernels.
//
// Small N (M large) is the same GEMM transposed: C^T = B^T A^T.  B^T is read
// as the swapped problem's A straight from B's strides (a row-major B is an
// M-major A there), A^T as its B, and C^T is written through C's strides
// swapped, with the bias indexed by row.  Nothing is copied.
#include "skinny.h"

#include "../settings.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tiled {
namespace cuda {

namespace {

using skinny::Launch;
using skinny::Params;

constexpr int64_t kMaxInt = 2147483647 - 256;

// Measured crossover against the Hopper kernel (bf16, H200, see
// docs/skinny.md): the skinny kernel takes min(M, N) up to this.
// TILED_SKINNY_MAXM overrides it (0 turns the family off).
int64_t max_small_dim() { return setting_long("TILED_SKINNY_MAXM", 64); }

// Tallest block (TILED_SKINNY_BM=16|32|64, default 64); below M, several
// row tiles run side by side and read B from HBM once, from L2 again.  Capping
// at 32 measured worse (H200, b95e44b, bf16): M = 33-64 0.71-0.82x against
// 0.77-0.89x with 64-row tiles, and M = 65-128 (limit 128) 0.41-0.60x
// against the Hopper kernel's 0.63-0.97x.
int max_block_height() {
  const long bm = setting_long("TILED_SKINNY_BM", 64);
  return bm >= 64 ? 64 : bm >= 32 ? 32 : 16;
}

// TILED_SKINNY_SPLITK=n forces n K slices (for measurements); unset: auto.
int forced_splits() { return static_cast<int>(setting_long("TILED_SKINNY_SPLITK", 0)); }

// TILED_SKINNY_DEEP=1: the 7-stage pipeline (opt-in until measured).
bool deep_pipeline() { return setting_is("TILED_SKINNY_DEEP", "1"); }

// Split reduction through clusters (sm_90a builds on a 9.0 GPU), unless
// TILED_SKINNY_CLUSTER=0 asks for the workspace path.
bool use_clusters(const DeviceInfo& dev) {
#if defined(TILED_WITH_SM90A)
  return dev.sm_major == 9 && !setting_is("TILED_SKINNY_CLUSTER", "0");
#else
  (void)dev;
  return false;
#endif
}

// An operand the kernel can read: 16-byte aligned base, leading dimension
// and batch stride multiples of 8 elements (cp.async copies 16 bytes).
// `rows` is its extent along the non-unit stride.
bool operand_ok(const void* ptr, int64_t ld, int64_t rows, int64_t batch_stride, int64_t batch) {
  if (pointer_alignment(ptr) < 16) return false;
  if (rows > 1 && (ld % 8 != 0 || ld <= 0)) return false;
  if (batch > 1 && batch_stride % 8 != 0) return false;
  return true;
}

// K slices (measured on an H200, bf16, M <= 64, N in {4096, 14336}, see
// docs/skinny.md): about one CTA per SM is best, not two: S = the largest
// power of two <= 8 with tiles * S <= 1.2 * SMs, each slice >= 4 k-blocks.
// (N = 4096, M = 16: S = 4, 128 CTAs: 0.96-1.00x cuBLAS; S = 8 lost 20%,
// S = 1, 2 lost 15-50%.  N = 14336: S = 1, 112 CTAs.)
int auto_splits(int64_t tiles, int64_t k_blocks, const Launch& l, const DeviceInfo& dev) {
  const int64_t budget = std::max<int64_t>(1, (12 * static_cast<int64_t>(std::max(dev.num_sms, 1))) / 10);
  int splits = 1;
  while (splits < 8 && tiles * splits * 2 <= budget && k_blocks >= 4 * splits * 2) splits *= 2;
  // A K-major B (x @ W.T) read by fewer, longer slices measured slower for
  // BM = 16 (cluster reduction) on an H200 (4.8 TB/s): N = 14336, M <= 16:
  // 0.86-0.88x at S = 1 against 0.92-0.93x at S = 2 (but M = 32: 0.94x at
  // S = 1, 0.89x at S = 2).  On an H100 (3.35 TB/s) the other way round:
  // M = 1 / 4 / 8 / 16 0.94 / 0.93 / 0.93 / 0.93x at S = 2 against 0.96 /
  // 0.95 / 0.96 / 0.94x at S = 1 (A-B-B-A, explore-*-5527302-bf16-skinny-
  // nt-split.json).  So S = 2 only from 4 TB/s of DRAM bandwidth (or where
  // the bandwidth is unknown).
  const bool fast_dram = dev.dram_bytes_per_s <= 0 || dev.dram_bytes_per_s >= 4e12;
  if (use_clusters(dev) && fast_dram && l.bm == 16 && l.b_kmajor && splits == 1 && k_blocks >= 16) splits = 2;
  return splits;
}

// The problem as the kernel sees it, in the orientation with the small
// dimension as M; false when the kernel cannot take it.
bool build(const GemmProblem& p, const DeviceInfo& dev, Launch& l) {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return false;
  if (dev.sm_major < 8) return false;
  const int64_t limit = max_small_dim();
  const bool swap = p.M > limit && p.N <= limit;
  if (!swap && p.M > limit) return false;
  if (p.M > kMaxInt || p.N > kMaxInt || p.K > kMaxInt || p.K < 1) return false;

  // The (maybe swapped) operands: A' is M' x K, B' is K x N'.
  const Operand a = swap ? Operand{p.b.ptr, p.b.batch_stride, p.b.col_stride, p.b.row_stride} : p.a;
  const Operand b = swap ? Operand{p.a.ptr, p.a.batch_stride, p.a.col_stride, p.a.row_stride} : p.b;
  Params& q = l.p;
  q.M = static_cast<int>(swap ? p.N : p.M);
  q.N = static_cast<int>(swap ? p.M : p.N);
  q.K = static_cast<int>(p.K);
  l.a_kmajor = a.col_stride == 1;
  l.b_kmajor = !(b.col_stride == 1);  // row-major B wins when both strides are 1
  q.lda = l.a_kmajor ? a.row_stride : a.col_stride;
  q.ldb = l.b_kmajor ? b.col_stride : b.row_stride;
  if (!l.a_kmajor && a.row_stride != 1) return false;
  if (l.b_kmajor && b.row_stride != 1) return false;
  if (!operand_ok(a.ptr, q.lda, l.a_kmajor ? q.M : q.K, a.batch_stride, p.batch)) return false;
  if (!operand_ok(b.ptr, q.ldb, l.b_kmajor ? q.N : q.K, b.batch_stride, p.batch)) return false;
  q.a = a.ptr;
  q.b = b.ptr;
  q.a_batch = a.batch_stride;
  q.b_batch = b.batch_stride;
  q.bias = p.bias;
  q.bias_on_rows = swap;
  q.epi = p.epi;
  q.c = p.c;
  q.c_batch = p.c_batch_stride;
  q.c_rs = swap ? 1 : p.c_row_stride;
  q.c_cs = swap ? p.c_row_stride : 1;
  if (p.batch > 65535) return false;
  l.batch = static_cast<int>(p.batch);

  // Block height: the smallest that covers M (rows past M are zero-filled
  // and cost tensor-core time, not memory traffic), at most the cap.
  l.bm = std::min(max_block_height(), q.M <= 16 ? 16 : q.M <= 32 ? 32 : 64);
  const int64_t tiles = ceil_div(q.M, l.bm) * ceil_div(q.N, skinny::kBN) * p.batch;
  if (ceil_div(q.N, skinny::kBN) > 65535) return false;
  const int64_t k_blocks = ceil_div(q.K, skinny::kBK);

  const int forced = forced_splits();
  const int splits = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(forced > 0 ? forced : auto_splits(tiles, k_blocks, l, dev), k_blocks)));
  q.k_blocks_per_split = static_cast<int>(ceil_div(k_blocks, splits));
  q.splits = static_cast<int>(ceil_div(k_blocks, q.k_blocks_per_split));  // no empty slice
  // Cluster reduction (sm_90a) needs S in {2, 4, 8}.  With the automatic S
  // it serves BM <= 32 only: BM = 64 measured better through the workspace
  // (0.77-0.80x vs 0.70-0.75x at N = 4096).  A forced S uses it for any BM
  // unless TILED_SKINNY_CLUSTER=0.
  const bool cluster_size = q.splits == 2 || q.splits == 4 || q.splits == 8;
  q.cluster_reduce = use_clusters(dev) && cluster_size && (forced > 0 || l.bm <= 32);
  if (ceil_div(q.M, l.bm) * q.splits > kMaxInt) return false;
  // One row tile and disjoint K slices: each element of B is read once
  // (unless a broadcast B serves several batches).
  q.stream_b = (l2_stream_bits(false, ceil_div(q.M, l.bm) == 1 && (p.batch == 1 || q.b_batch != 0)) & 2) != 0;
  l.deep = deep_pipeline() &&
           static_cast<size_t>(skinny::smem_bytes(l.bm, true)) <= dev.max_smem_per_block_optin;
  return true;
}

}  // namespace

bool skinny_can_run(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  return build(p, dev, l);
}

size_t skinny_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!build(p, dev, l) || l.p.splits == 1 || l.p.cluster_reduce) return 0;
  return static_cast<size_t>(l.batch) * l.p.splits * static_cast<size_t>(l.p.M) * l.p.N * sizeof(float);
}

const char* skinny_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  Launch l;
  if (!build(p, dev, l)) return "skinny: problem not supported";
  if (l.p.splits > 1 && !l.p.cluster_reduce && workspace == nullptr) return "skinny: split-K needs a workspace";
  l.p.ws = static_cast<float*>(workspace);
  return p.dtype == DType::bf16 ? skinny::launch_bf16(l, stream) : skinny::launch_f16(l, stream);
}

const char* skinny_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!build(p, dev, l)) return nullptr;
  // "skinny_<dt>_<BM>x128_sk<S>_<ab>[_swap]": a fixed set of strings.
  static const char* const kNames[2][3][2][2][2] = {
#define TILED_SKINNY_NAMES(dt, bm)                                                                  \
  {{{"skinny_" dt "_" bm "x128_tt", "skinny_" dt "_" bm "x128_tt_swap"},                           \
    {"skinny_" dt "_" bm "x128_tn", "skinny_" dt "_" bm "x128_tn_swap"}},                          \
   {{"skinny_" dt "_" bm "x128_nt", "skinny_" dt "_" bm "x128_nt_swap"},                           \
    {"skinny_" dt "_" bm "x128_nn", "skinny_" dt "_" bm "x128_nn_swap"}}}
      {TILED_SKINNY_NAMES("bf16", "16"), TILED_SKINNY_NAMES("bf16", "32"), TILED_SKINNY_NAMES("bf16", "64")},
      {TILED_SKINNY_NAMES("f16", "16"), TILED_SKINNY_NAMES("f16", "32"), TILED_SKINNY_NAMES("f16", "64")},
#undef TILED_SKINNY_NAMES
  };
  const int dt = p.dtype == DType::bf16 ? 0 : 1;
  const int bm = l.bm == 16 ? 0 : l.bm == 32 ? 1 : 2;
  // Layout letters of the caller's operands ('n' row-major), as the other
  // families name them, whichever orientation runs.
  return kNames[dt][bm][p.a.row_major() ? 1 : 0][p.b.row_major() ? 1 : 0][l.p.bias_on_rows ? 1 : 0];
}

}  // namespace cuda
}  // namespace tiled
