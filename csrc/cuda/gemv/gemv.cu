// Host side of the few-row family: which problems it takes, the K split,
// and the swap that serves a small N with the same kernels.
//
// A small N (M large) is the same GEMM transposed: C^T = B^T A^T.  B^T is
// read as the swapped problem's A straight from B's strides, A^T as its B
// (a row-major A is a K-major B there), and C^T is written through C's
// strides swapped, with the bias indexed by row.  Nothing is copied.
#include "gemv.h"

#include <algorithm>
#include <array>
#include <string>

#include "../../gemm_problem.h"
#include "../dispatch.h"
#include "../settings.h"

namespace tiled {
namespace cuda {

namespace {

using gemv::Launch;
using gemv::Params;

constexpr int64_t kMaxInt = 2147483647 - 256;

// Rows of A (or columns of B, swapped) up to which the family takes a
// problem: TILED_GEMV_MAXM (0 turns it off, at most 8).
int64_t max_rows() { return std::min<int64_t>(setting_long("TILED_GEMV_MAXM", gemv::kMaxRows), gemv::kMaxRows); }

// The big operand must be a stream worth the kernel: at least this many
// elements (4 MB of bf16), else the tensor-core families keep it.
// TILED_GEMV_MIN_ELEMS moves the limit (tests run small ragged shapes).
int64_t min_stream_elems() { return setting_long("TILED_GEMV_MIN_ELEMS", int64_t{1} << 21); }

// TILED_GEMV_SPLITS=n forces n K slices (1..8; for measurements); unset: auto.
int forced_splits() { return static_cast<int>(setting_long("TILED_GEMV_SPLITS", 0)); }

// B' is read with 16-byte loads: aligned base, leading dimension and batch
// stride multiples of 8 elements.  `strided_extent` is its extent along the
// non-unit stride.
bool b_ok(const void* ptr, int64_t ld, int64_t strided_extent, int64_t batch_stride, int64_t batch) {
  if (pointer_alignment(ptr) < 16) return false;
  if (strided_extent > 1 && (ld % 8 != 0 || ld <= 0)) return false;
  if (batch > 1 && batch_stride % 8 != 0) return false;
  return true;
}

// K slices: the fewest (a power of two up to 8) that give every SM a CTA,
// each slice at least 512 deep; more where A's slice would not fit shared
// memory.  Returns false when nothing fits.
bool choose_split(Launch& l, int64_t tiles, const DeviceInfo& dev) {
  Params& q = l.p;
  const int64_t max_slice = gemv::kMaxSliceBytes / (2 * l.mr);
  int splits = 1;
  const int forced = forced_splits();
  if (forced > 0) {
    splits = std::min(forced, 8);
  } else {
    while (splits < 8 && tiles * splits < dev.num_sms && q.K >= 2 * 512 * splits) splits *= 2;
  }
  for (;; splits *= 2) {
    if (splits > 8) return false;
    const int64_t slice = (ceil_div(q.K, splits) + 7) / 8 * 8;
    if (slice <= max_slice) {
      q.k_slice = static_cast<int>(slice);
      q.splits = static_cast<int>(ceil_div(q.K, slice));  // no empty slice
      return true;
    }
  }
}

// The problem as the kernel sees it, in the orientation with the few rows
// as M; false when the kernel cannot take it.
bool build(const GemmProblem& p, const DeviceInfo& dev, Launch& l) {
#if !defined(TILED_WITH_SM90A)
  (void)p;
  (void)dev;
  (void)l;
  return false;
#else
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return false;
  if (dev.sm_major != 9) return false;
  const int64_t limit = max_rows();
  if (limit <= 0) return false;
  const bool swap = p.M > limit && p.N <= limit;
  if (!swap && p.M > limit) return false;
  if (p.M > kMaxInt || p.N > kMaxInt || p.K > kMaxInt || p.K < 1 || p.batch > 65535) return false;
  const int64_t rows = swap ? p.N : p.M, cols = swap ? p.M : p.N;
  if (cols * p.K < min_stream_elems()) return false;

  // The (maybe swapped) operands: A' is rows x K, B' is K x cols.
  const Operand a = swap ? Operand{p.b.ptr, p.b.batch_stride, p.b.col_stride, p.b.row_stride} : p.a;
  const Operand b = swap ? Operand{p.a.ptr, p.a.batch_stride, p.a.col_stride, p.a.row_stride} : p.b;
  l.b_kmajor = !b.row_major();  // a row-major B wins when both strides are 1
  if (l.b_kmajor && b.row_stride != 1) return false;
  Params& q = l.p;
  q.ldb = l.b_kmajor ? b.col_stride : b.row_stride;
  if (!b_ok(b.ptr, q.ldb, l.b_kmajor ? cols : p.K, b.batch_stride, p.batch)) return false;
  q.M = static_cast<int>(rows);
  q.N = static_cast<int>(cols);
  q.K = static_cast<int>(p.K);
  q.a = a.ptr;
  q.b = b.ptr;
  q.a_rs = a.row_stride;
  q.a_cs = a.col_stride;
  q.a_batch = a.batch_stride;
  q.b_batch = b.batch_stride;
  q.a_vec = a.col_stride == 1 && pointer_alignment(a.ptr) >= 16 && (rows == 1 || a.row_stride % 8 == 0) &&
            (p.batch == 1 || a.batch_stride % 8 == 0);
  q.bias = p.bias;
  q.bias_on_rows = swap;
  q.c = p.c;
  q.c_batch = p.c_batch_stride;
  q.c_rs = swap ? 1 : p.c_row_stride;
  q.c_cs = swap ? p.c_row_stride : 1;
  l.batch = static_cast<int>(p.batch);
  l.mr = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 8;
  const int64_t tiles_n = ceil_div(cols, gemv::tile_n(l.mr, l.b_kmajor));
  if (!choose_split(l, tiles_n * p.batch, dev)) return false;
  if (tiles_n * q.splits > kMaxInt) return false;
  if (static_cast<size_t>(gemv::smem_bytes(l.mr, l.b_kmajor, q.k_slice)) > dev.max_smem_per_block_optin) return false;
  // Every element of B' is read by one CTA (unless a broadcast B' serves
  // several batches): evict_first.
  q.stream_b = (l2_stream_bits(false, p.batch == 1 || q.b_batch != 0) & 2) != 0;
  return true;
#endif
}

}  // namespace

bool gemv_can_run(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  return build(p, dev, l);
}

const char* gemv_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream) {
  Launch l;
  if (!build(p, dev, l)) return "gemv: problem not supported";
  return p.dtype == DType::bf16 ? gemv::launch_bf16(l, stream) : gemv::launch_f16(l, stream);
}

const char* gemv_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!build(p, dev, l)) return nullptr;
  // "gemv_<dt>_m<MR>_<ab>[_swap]", <ab> the caller's layout letters as the
  // other families name them, whichever orientation runs.
  static const std::array<std::string, 64> names = [] {
    std::array<std::string, 64> n;
    const char* const dts[2] = {"bf16", "f16"};
    const char* const mrs[4] = {"1", "2", "4", "8"};
    const char* const abs[4] = {"tt", "tn", "nt", "nn"};
    for (int i = 0; i < 64; ++i)
      n[i] = std::string("gemv_") + dts[i / 32] + "_m" + mrs[(i / 8) % 4] + "_" + abs[(i / 2) % 4] +
             (i % 2 ? "_swap" : "");
    return n;
  }();
  const int dt = p.dtype == DType::bf16 ? 0 : 1;
  const int mr = l.mr == 1 ? 0 : l.mr == 2 ? 1 : l.mr == 4 ? 2 : 3;
  const int ab = (p.a.row_major() ? 2 : 0) + (p.b.row_major() ? 1 : 0);
  return names[((dt * 4 + mr) * 4 + ab) * 2 + (l.p.bias_on_rows ? 1 : 0)].c_str();
}

}  // namespace cuda
}  // namespace tiled
