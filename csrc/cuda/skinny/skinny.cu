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
#include <string>
#include <vector>

namespace tiled {
namespace cuda {

namespace {

using skinny::Launch;
using skinny::Params;

constexpr int64_t kMaxInt = 2147483647 - 256;

// Measured crossover against the Hopper kernel (bf16, H200, see
// docs/skinny.md): the rules take min(M, N) up to this; a configuration
// forced by name, up to kMaxForcedSmallDim.
constexpr int64_t kMaxSmallDim = 64;
constexpr int64_t kMaxForcedSmallDim = 128;

// The configurations, by name: "<BM>x128sk<S>[c][deep]" -- a block height
// (16, 32, 64 rows; below M several row tiles run side by side and read B
// from HBM once, from L2 again), K cut into S slices (1 to 32; the slice
// count is lowered to the k-blocks, never raised), their partials reduced
// through a 2-8 CTA cluster ("c", sm_90a builds on a 9.0 GPU) or else a
// workspace, and
// the 7-stage pipeline ("deep", one CTA per SM; never picked by the rules:
// opt-in until measured).  The reported name adds the dtype, the caller's
// layout and "_swap" for a small N run as C^T (skinny_config_name).
// Capping the block height at 32 measured worse (H200, b95e44b, bf16): M =
// 33-64 0.71-0.82x against 0.77-0.89x with 64-row tiles, and M = 65-128
// 0.41-0.60x against the Hopper kernel's 0.63-0.97x.
struct Variant {
  int bm = 0;  // 0: not forced (the rules)
  int splits = 0;
  bool cluster = false;
  bool deep = false;
};
constexpr int kBlockHeights[3] = {16, 32, 64};
constexpr int kSplits[6] = {1, 2, 4, 8, 16, 32};
constexpr int kMaxClusterSplits = 8;  // a portable cluster

std::string variant_name(const Variant& v) {
  return std::to_string(v.bm) + "x128sk" + std::to_string(v.splits) + (v.cluster ? "c" : "") + (v.deep ? "deep" : "");
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> list = [] {
    std::vector<Variant> out;
    for (int bm : kBlockHeights)
      for (int s : kSplits)
        for (int c = 0; c < (s > 1 && s <= kMaxClusterSplits ? 2 : 1); ++c)
          for (int deep = 0; deep < 2; ++deep) out.push_back(Variant{bm, s, c == 1, deep == 1});
    return out;
  }();
  return list;
}

// The dtypes the family takes: bf16, fp16, and fp32 with TF32 allowed (tf32).
bool dtype_ok(const GemmProblem& p) {
  return p.dtype == DType::bf16 || p.dtype == DType::f16 || p.tf32();
}
const char* dtype_tag(DType d) { return d == DType::bf16 ? "bf16" : d == DType::f16 ? "f16" : "tf32"; }
// tf32 has no `deep` instances (skinny_tf32.cu).
bool has_variant(DType d, const Variant& v) { return !(v.deep && d == DType::f32); }
const char* layout_tag(const GemmProblem& p) {
  static const char* const kAb[2][2] = {{"tt", "tn"}, {"nt", "nn"}};
  return kAb[p.a.row_major() ? 1 : 0][p.b.row_major() ? 1 : 0];
}

// The variant `name` forces on `p` ("skinny_<dt>_<variant>_<ab>[_swap]", or
// the variant alone); bm == 0 where it names none of this family for p's
// dtype and layout.  `swap`: -1 either orientation, else whether the name
// asks for the swapped one.
Variant parse_forced(const GemmProblem& p, std::string v, int* swap) {
  *swap = -1;
  if (v.rfind("skinny_", 0) == 0) {
    const std::string head = std::string("skinny_") + dtype_tag(p.dtype) + "_";
    if (v.rfind(head, 0) != 0) return Variant{};
    v = v.substr(head.size());
    const std::string tail = std::string("_") + layout_tag(p);
    for (int sw = 0; sw < 2; ++sw) {
      const std::string t = tail + (sw ? "_swap" : "");
      if (v.size() > t.size() && v.compare(v.size() - t.size(), t.size(), t) == 0) {
        *swap = sw;
        v.resize(v.size() - t.size());
        break;
      }
    }
    if (*swap < 0) return Variant{};
  }
  for (const Variant& c : variants())
    if (variant_name(c) == v) return c;
  return Variant{};
}

// Split reduction through clusters (sm_90a builds on a 9.0 GPU).
bool use_clusters(const DeviceInfo& dev) {
#if defined(TILED_WITH_SM90A)
  return dev.sm_major == 9;
#else
  (void)dev;
  return false;
#endif
}

// An operand the kernel can read: 16-byte aligned base, leading dimension
// and batch stride multiples of 16 bytes (cp.async copies 16 bytes: 8
// 16-bit elements, 4 fp32).  `rows` is its extent along the non-unit stride.
bool operand_ok(const void* ptr, int64_t ld, int64_t rows, int64_t batch_stride, int64_t batch, int64_t per_chunk) {
  if (pointer_alignment(ptr) < 16) return false;
  if (rows > 1 && (ld % per_chunk != 0 || ld <= 0)) return false;
  if (batch > 1 && batch_stride % per_chunk != 0) return false;
  return true;
}

// K slices (measured on an H200, bf16, M <= 64, N in {4096, 14336}, see
// docs/skinny.md): about one CTA per SM is best, not two: S = the largest
// power of two <= 8 with tiles * S <= 1.2 * SMs, each slice >= 4 k-blocks.
// (N = 4096, M = 16: S = 4, 128 CTAs: 0.96-1.00x cuBLAS; S = 8 lost 20%,
// S = 1, 2 lost 15-50%.  N = 14336: S = 1, 112 CTAs.)
//
// An A read along M (a_kmajor false: the LoRA weight gradients dW = dY^T X,
// TN, and the swapped NN / TN products with a small N) wants more slices:
// its k-block of BM x 64 is BM-element (32-byte) rows, fetched in short
// pieces, and a CTA keeps too few bytes in flight.  Measured (H200, bf16,
// tuning pass of 522e76c, every S forced): S doubled halved the time up to
// two CTAs per SM -- 8 x 4096 x 16384 TN 66 / 45 us at S = 4 / 8 (cuBLAS
// 46), 16 x 768 x 12608 TN 51 / 30 at S = 4 / 8 (cuBLAS 15), 14336 x 16 x
// 8192 TN 110 / 75 at S = 1 / 2 (cuBLAS 68) -- and the workspace reduction
// beat the cluster one there (45 against 80 us at S = 8).  So for such an A:
// S up to 32 while tiles * S <= 2.4 x SMs, through the workspace (build).
int auto_splits(int64_t tiles, int64_t k_blocks, const Launch& l, const DeviceInfo& dev) {
  const int64_t sms = std::max(dev.num_sms, 1);
  const int64_t budget = std::max<int64_t>(1, ((l.a_kmajor ? 12 : 24) * sms) / 10);
  const int cap = l.a_kmajor ? 8 : 32;
  int splits = 1;
  while (splits < cap && tiles * splits * 2 <= budget && k_blocks >= 4 * splits * 2) splits *= 2;
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
// dimension as M, under the rules (`v.bm` == 0) or variant `v` (`swap`:
// -1 either orientation, else the one asked for); false when the kernel
// cannot take it, or cannot take it as `v` says.
bool build(const GemmProblem& p, const DeviceInfo& dev, Launch& l, const Variant& v = Variant{}, int want_swap = -1) {
  if (!dtype_ok(p)) return false;
  if (dev.sm_major < 8) return false;
  if (!has_variant(p.dtype, v)) return false;
  const int64_t per_chunk = 16 / dtype_size(p.dtype);
  const int64_t limit = v.bm > 0 ? kMaxForcedSmallDim : kMaxSmallDim;
  const bool swap = p.M > limit && p.N <= limit;
  if (!swap && p.M > limit) return false;
  if (want_swap >= 0 && swap != (want_swap == 1)) return false;
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
  if (!operand_ok(a.ptr, q.lda, l.a_kmajor ? q.M : q.K, a.batch_stride, p.batch, per_chunk)) return false;
  if (!operand_ok(b.ptr, q.ldb, l.b_kmajor ? q.N : q.K, b.batch_stride, p.batch, per_chunk)) return false;
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
  // and cost tensor-core time, not memory traffic), at most 64.
  l.bm = v.bm > 0 ? v.bm : q.M <= 16 ? 16 : q.M <= 32 ? 32 : 64;
  const int64_t tiles = ceil_div(q.M, l.bm) * ceil_div(q.N, skinny::kBN) * p.batch;
  if (ceil_div(q.N, skinny::kBN) > 65535) return false;
  const int64_t k_blocks = ceil_div(q.K, skinny::bk_for(static_cast<int>(dtype_size(p.dtype))));

  if (v.bm > 0 && v.splits > k_blocks) return false;  // a forced S is never lowered
  const int splits = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(v.bm > 0 ? v.splits : auto_splits(tiles, k_blocks, l, dev), k_blocks)));
  l.splits = splits;
  q.k_blocks_per_split = static_cast<int>(ceil_div(k_blocks, splits));
  q.splits = static_cast<int>(ceil_div(k_blocks, q.k_blocks_per_split));  // no empty slice
  // Cluster reduction (sm_90a) needs S in {2, 4, 8}.  The rules use it for
  // BM <= 32 and a K-major A only: BM = 64 measured better through the
  // workspace (0.77-0.80x vs 0.70-0.75x at N = 4096), and so did an A read
  // along M (auto_splits).
  const bool cluster_size = q.splits == 2 || q.splits == 4 || q.splits == 8;
  q.cluster_reduce = use_clusters(dev) && cluster_size && (v.bm > 0 ? v.cluster : l.bm <= 32 && l.a_kmajor);
  if (v.bm > 0 && v.cluster != q.cluster_reduce) return false;
  if (ceil_div(q.M, l.bm) * q.splits > kMaxInt) return false;
  // One row tile and disjoint K slices: each element of B is read once
  // (unless a broadcast B serves several batches).
  q.stream_b = (l2_stream_bits(false, ceil_div(q.M, l.bm) == 1 && (p.batch == 1 || q.b_batch != 0)) & 2) != 0;
  l.deep = v.deep;
  if (l.deep && static_cast<size_t>(skinny::smem_bytes(l.bm, true)) > dev.max_smem_per_block_optin) return false;
  return true;
}

// The problem under the first configuration of the forced list that takes
// it, else under the rules; false where neither does.
bool plan(const GemmProblem& p, const DeviceInfo& dev, Launch& l, bool* forced = nullptr) {
  const bool named = any_config_item(forced_config(), [&](const std::string& name) {
    int swap = -1;
    const Variant v = parse_forced(p, name, &swap);
    return v.bm > 0 && build(p, dev, l, v, swap);
  });
  if (forced) *forced = named;
  return named || build(p, dev, l);
}

}  // namespace

bool skinny_can_run(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  return plan(p, dev, l);
}

bool skinny_config_forced(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  bool forced = false;
  return plan(p, dev, l, &forced) && forced;
}

std::vector<std::string> skinny_config_list(const GemmProblem& p) {
  std::vector<std::string> out;
  if (!dtype_ok(p)) return out;
  const std::string head = std::string("skinny_") + dtype_tag(p.dtype) + "_";
  for (const Variant& v : variants())
    if (has_variant(p.dtype, v))
      for (const char* sw : {"", "_swap"}) out.push_back(head + variant_name(v) + "_" + layout_tag(p) + sw);
  return out;
}

size_t skinny_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!plan(p, dev, l) || l.p.splits == 1 || l.p.cluster_reduce) return 0;
  return static_cast<size_t>(l.batch) * l.p.splits * static_cast<size_t>(l.p.M) * l.p.N * sizeof(float);
}

const char* skinny_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  Launch l;
  if (!plan(p, dev, l)) return "skinny: problem not supported";
  if (l.p.splits > 1 && !l.p.cluster_reduce && workspace == nullptr) return "skinny: split-K needs a workspace";
  l.p.ws = static_cast<float*>(workspace);
  return p.dtype == DType::bf16  ? skinny::launch_bf16(l, stream)
         : p.dtype == DType::f16 ? skinny::launch_f16(l, stream)
                                 : skinny::launch_tf32(l, stream);
}

const char* skinny_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!plan(p, dev, l)) return nullptr;
  // "skinny_<dt>_<variant>_<ab>[_swap]", with layout letters of the caller's
  // operands ('n' row-major), as the other families name them, whichever
  // orientation runs.  Built once.
  static const std::vector<std::string>* const names = [] {
    auto* n = new std::vector<std::string>;
    for (DType d : {DType::bf16, DType::f16, DType::f32})
      for (const Variant& v : variants())
        for (int ab = 0; ab < 4; ++ab)
          for (const char* sw : {"", "_swap"}) {
            static const char* const kAb[4] = {"tt", "tn", "nt", "nn"};
            n->push_back(std::string("skinny_") + dtype_tag(d) + "_" + variant_name(v) + "_" + kAb[ab] + sw);
          }
    return n;
  }();
  const Variant v{l.bm, l.splits, l.p.cluster_reduce, l.deep};
  int index = 0;
  while (variant_name(variants()[index]) != variant_name(v)) ++index;
  const int dt = p.dtype == DType::bf16 ? 0 : p.dtype == DType::f16 ? 1 : 2;
  const int ab = (p.a.row_major() ? 2 : 0) + (p.b.row_major() ? 1 : 0);
  return (*names)[((dt * variants().size() + index) * 4 + ab) * 2 + (l.p.bias_on_rows ? 1 : 0)].c_str();
}

}  // namespace cuda
}  // namespace tiled
