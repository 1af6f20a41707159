// Host side of the sm80 family: which problems it takes, which configuration
// of sm80.h's list runs, and its name.
#include "sm80.h"

#include "../settings.h"

#include <algorithm>
#include <string>
#include <vector>

namespace tiled {
namespace cuda {

namespace {

using sm80::Launch;

constexpr int64_t kMaxInt = 2147483647 - 256;
// Split K (build): at least this many k-blocks a split, at most this many splits.
constexpr int64_t kMinSplitBlocks = 8;
constexpr int64_t kMaxSplits = 8;

// An operand cp.async can copy 16 bytes at a time: 16-byte aligned base,
// leading dimension and batch stride multiples of 16 bytes.  `rows`: its
// extent along the non-unit stride (1: the leading dimension is never used).
// Others are declined (dispatch runs the general SIMT kernel on them).
bool operand_ok(const void* ptr, int64_t ld, int64_t rows, int64_t batch_stride, int64_t batch, int per_chunk) {
  if (pointer_alignment(ptr) < 16) return false;
  if (rows > 1 && (ld <= 0 || ld % per_chunk != 0)) return false;
  if (batch > 1 && batch_stride % per_chunk != 0) return false;
  return true;
}

// CTAs of configuration `cfg` one SM holds at once (shared memory; the
// register file holds two 4-warp or one 8-warp CTA of <= 255 registers).
int ctas_per_sm(const sm80::Config& c, bool tf32, const DeviceInfo& dev) {
  const size_t smem = static_cast<size_t>(sm80::smem_bytes(c, tf32));
  if (smem > dev.max_smem_per_block_optin) return 0;
  // An SM has ~1 KB more than a block may ask for (the driver's reserve).
  const size_t per_sm = dev.max_smem_per_block_optin + 1024;
  const int by_regs = sm80::threads(c) <= 128 ? 2 : 1;
  return std::max(1, std::min(by_regs, static_cast<int>(per_sm / smem)));
}

// CTAs of configuration `c` the GPU runs at once.
int64_t cta_slots(const sm80::Config& c, bool tf32, const DeviceInfo& dev) {
  return static_cast<int64_t>(std::max(dev.num_sms, 1)) * ctas_per_sm(c, tf32, dev);
}

// The configuration: the one whose grid costs the least time.  A wave is
// as many CTAs as the SMs hold at once (ctas_per_sm each); an SM's time per
// wave is the work of its CTAs (a 128 x 256 tile counting as two 128 x 128
// ones) over the configuration's measured efficiency with that many CTAs
// per SM (sm80.h's eff / eff_one).  Ties go to the earlier (larger) tile.
int choose_config(const GemmProblem& p, bool tf32, const DeviceInfo& dev) {
  int best = -1;
  double best_cost = 0;
  for (int i = 0; i < sm80::kNumConfigs; ++i) {
    const sm80::Config& c = sm80::config(tf32, i);
    const int per_sm = ctas_per_sm(c, tf32, dev);
    if (per_sm == 0) continue;
    const int64_t tiles = ceil_div(p.M, c.bm) * ceil_div(p.N, c.bn) * p.batch;
    const int64_t slots = cta_slots(c, tf32, dev);
    const double tile_work = static_cast<double>(c.bm) * c.bn / (128.0 * 128.0);
    const double eff = per_sm > 1 ? c.eff : c.eff_one;
    const double cost = static_cast<double>(ceil_div(tiles, slots)) * per_sm * tile_work / eff;
    if (best < 0 || cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

// The launch for `p`; false when the family cannot take it.
const char* dtype_tag(DType d) { return d == DType::bf16 ? "bf16" : d == DType::f16 ? "f16" : "tf32"; }
const char* layout_tag(const GemmProblem& p) {
  static const char* const kAb[4] = {"tt", "tn", "nt", "nn"};
  return kAb[(p.a.row_major() ? 2 : 0) + (p.b.row_major() ? 1 : 0)];
}

// The configuration `name` forces on `p` (its index in sm80::config's list
// for p's dtype): "sm80_<dt>_<tag>_<ab>" as sm80_config_name spells it, or
// the tag alone ("128x256x64s3"); -1 where it names none of this family
// for p's dtype and layout.
int parse_forced(const GemmProblem& p, const std::string& name) {
  const bool tf32 = p.dtype == DType::f32;
  std::string v = name;
  if (v.rfind("sm80_", 0) == 0) {
    const std::string head = std::string("sm80_") + dtype_tag(p.dtype) + "_";
    const std::string tail = std::string("_") + layout_tag(p);
    if (v.rfind(head, 0) != 0 || v.size() <= head.size() + tail.size() ||
        v.compare(v.size() - tail.size(), tail.size(), tail) != 0)
      return -1;
    v = v.substr(head.size(), v.size() - head.size() - tail.size());
  }
  for (int i = 0; i < sm80::kNumConfigs; ++i)
    if (v == sm80::config(tf32, i).tag) return i;
  return -1;
}

// `forced`: a configuration's index, -1 for the rules' choice.
bool build(const GemmProblem& p, const DeviceInfo& dev, Launch& l, int forced = -1) {
  const bool tf32 = p.tf32();
  if (p.dtype != DType::bf16 && p.dtype != DType::f16 && !tf32) return false;
  if (dev.sm_major < 8) return false;
  if (p.M > kMaxInt || p.N > kMaxInt || p.K > kMaxInt || p.K < 1 || p.M < 1 || p.N < 1) return false;
  if (p.batch < 1 || p.batch > 65535) return false;
  const int per_chunk = 16 / dtype_size(p.dtype);
  sm80::Params& q = l.p;
  l.a_kmajor = p.a.col_stride == 1;
  l.b_kmajor = !(p.b.col_stride == 1);  // row-major B wins when both strides are 1
  if (!l.a_kmajor && p.a.row_stride != 1) return false;
  if (l.b_kmajor && p.b.row_stride != 1) return false;
  q.lda = l.a_kmajor ? p.a.row_stride : p.a.col_stride;
  q.ldb = l.b_kmajor ? p.b.col_stride : p.b.row_stride;
  if (!operand_ok(p.a.ptr, q.lda, l.a_kmajor ? p.M : p.K, p.a.batch_stride, p.batch, per_chunk)) return false;
  if (!operand_ok(p.b.ptr, q.ldb, l.b_kmajor ? p.N : p.K, p.b.batch_stride, p.batch, per_chunk)) return false;
  if (forced >= 0 && ctas_per_sm(sm80::config(tf32, forced), tf32, dev) == 0) return false;
  l.cfg = forced >= 0 ? forced : choose_config(p, tf32, dev);
  if (l.cfg < 0) return false;
  const sm80::Config& c = sm80::config(tf32, l.cfg);
  const int64_t tiles_m = ceil_div(p.M, c.bm), tiles_n = ceil_div(p.N, c.bn);
  if (tiles_m * tiles_n > kMaxInt) return false;
  q.a = p.a.ptr;
  q.b = p.b.ptr;
  q.bias = p.bias;
  q.c = p.c;
  q.M = static_cast<int>(p.M);
  q.N = static_cast<int>(p.N);
  q.K = static_cast<int>(p.K);
  q.a_batch = p.a.batch_stride;
  q.b_batch = p.b.batch_stride;
  q.c_batch = p.c_batch_stride;
  q.c_ld = p.c_row_stride;
  q.tiles_m = static_cast<int>(tiles_m);
  q.tiles_n = static_cast<int>(tiles_n);
  const int es = dtype_size(p.dtype);
  q.c_align = 16;  // the widest store every row of C allows (the staged epilogue's 16-byte chunks)
  while (q.c_align > es && (pointer_alignment(p.c) < q.c_align || (q.c_ld * es) % q.c_align != 0 ||
                            (p.batch > 1 && (q.c_batch * es) % q.c_align != 0)))
    q.c_align /= 2;
  l.batch = static_cast<int>(p.batch);
  // Split K where the grid fills at most half the SMs' CTA slots and K
  // holds at least kMinSplitBlocks k-blocks per split: as many splits as
  // fill the slots, up to kMaxSplits.
  const int64_t k_blocks = ceil_div(p.K, c.bk);
  const int64_t tiles = tiles_m * tiles_n * p.batch;
  const int64_t slots = cta_slots(c, tf32, dev);
  int64_t splits = 1;
  if (tiles * 2 <= slots)
    splits = std::min<int64_t>({slots / tiles, k_blocks / kMinSplitBlocks, kMaxSplits});
  l.splits = 1;
  q.kb_per_split = 0;
  if (splits > 1) {
    q.kb_per_split = static_cast<int>(ceil_div(k_blocks, splits));
    l.splits = static_cast<int>(ceil_div(k_blocks, q.kb_per_split));
  }
  return true;
}

size_t partial_bytes(const Launch& l) {
  return l.splits > 1 ? static_cast<size_t>(l.splits) * l.batch * l.p.M * l.p.N * sizeof(float) : 0;
}

// The problem under the first configuration of the forced list that takes
// it, else under the rules; false where neither does.
bool plan(const GemmProblem& p, const DeviceInfo& dev, Launch& l, bool* forced = nullptr) {
  const bool named = any_config_item(forced_config(), [&](const std::string& name) {
    const int i = parse_forced(p, name);
    return i >= 0 && build(p, dev, l, i);
  });
  if (forced) *forced = named;
  return named || build(p, dev, l);
}

}  // namespace

bool sm80_can_run(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  return plan(p, dev, l);
}

bool sm80_config_forced(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  bool forced = false;
  return plan(p, dev, l, &forced) && forced;
}

std::vector<std::string> sm80_config_list(const GemmProblem& p) {
  std::vector<std::string> out;
  if (p.dtype != DType::bf16 && p.dtype != DType::f16 && p.dtype != DType::f32) return out;
  for (int i = 0; i < sm80::kNumConfigs; ++i)
    out.push_back(std::string("sm80_") + dtype_tag(p.dtype) + "_" + sm80::config(p.dtype == DType::f32, i).tag + "_" +
                  layout_tag(p));
  return out;
}

size_t sm80_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  return plan(p, dev, l) ? partial_bytes(l) : 0;
}

const char* sm80_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  Launch l;
  if (!plan(p, dev, l)) return "sm80: problem not supported";
  if (workspace == nullptr) {  // no room for the partial sums: one pass over all of K
    l.splits = 1;
    l.p.kb_per_split = 0;
  }
  l.p.partial = l.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  const bool first = l.cfg == 0;
  switch (p.dtype) {
    case DType::bf16: return first ? sm80::launch_bf16_0(l, stream) : sm80::launch_bf16_1(l, stream);
    case DType::f16: return first ? sm80::launch_f16_0(l, stream) : sm80::launch_f16_1(l, stream);
    case DType::f32: return first ? sm80::launch_tf32_0(l, stream) : sm80::launch_tf32_1(l, stream);
    default: return "sm80: unsupported dtype";
  }
}

// "sm80_<dtype>_<tile>_<ab>": the configuration's tag from sm80.h's list and
// the caller's layout letters ('n' row-major), as the other families name them.
const char* sm80_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  Launch l;
  if (!plan(p, dev, l)) return nullptr;
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const char* dt : {"bf16", "f16", "tf32"})
      for (int i = 0; i < sm80::kNumConfigs; ++i)
        for (const char* ab : {"tt", "tn", "nt", "nn"})
          v.push_back(std::string("sm80_") + dt + "_" + sm80::config(std::string(dt) == "tf32", i).tag + "_" + ab);
    return v;
  }();
  const std::string dt = dtype_tag(p.dtype);
  const int d = dt == "bf16" ? 0 : dt == "f16" ? 1 : 2;
  const int ab = (p.a.row_major() ? 2 : 0) + (p.b.row_major() ? 1 : 0);
  return names[(d * sm80::kNumConfigs + l.cfg) * 4 + ab].c_str();
}

}  // namespace cuda
}  // namespace tiled
