// The one place that picks a kernel for a problem.  Order of preference:
//   0. the small-M/N tensor-core kernel (bf16, fp16, min(M, N) <= 64): a
//      stream of the big operand split over every SM;
//   1. Hopper tensor cores (sm_90a): bf16, fp16, fp32 with allow_tf32;
//   1b. Ampere-style tensor cores (mma.sync, sm_80+) for the same dtypes,
//      where the Hopper family is not available (another GPU, a build
//      without sm_90a, or TILED_DISABLE_KERNELS=hopper);
//   2. the fast fp32 SIMT kernel (the ladder's last step), for fp32 the tensor
//      cores do not take;
//   3. the general SIMT kernel, which takes anything.
#include "dispatch.h"
#include "autotune.h"
#include "build_archs.h"
#include "epilogue.cuh"
#include "hopper/hopper.h"
#include "settings.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace tiled {
namespace cuda {

void simt_general_f32(const GemmProblem& p, cudaStream_t stream);
void simt_general_f64(const GemmProblem& p, cudaStream_t stream);
void simt_general_f16(const GemmProblem& p, cudaStream_t stream);
void simt_general_bf16(const GemmProblem& p, cudaStream_t stream);

const char* simt_general_gemm(const GemmProblem& p, const DeviceInfo&, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f32: simt_general_f32(p, stream); break;
    case DType::f64: simt_general_f64(p, stream); break;
    case DType::f16: simt_general_f16(p, stream); break;
    case DType::bf16: simt_general_bf16(p, stream); break;
  }
  return nullptr;
}

namespace {

// TILED_DISABLE_KERNELS=hopper,sm80,simt_fast (read once) takes families out of
// the choice (settings.h).
bool disabled(const char* family) { return kernel_disabled(family); }

enum class Family { skinny, hopper, sm80, simt_fast, simt_general };

// Whether the Hopper family can take problems on this device at all (this
// build has sm_90a kernels, the GPU is a 9.0, the family is not switched
// off).  Where it can, the sm80 family stays out of the choice: the problems
// the Hopper family declines there have measured choices of their own
// (staging copies, simt_fast).
bool hopper_family_on(const DeviceInfo& dev) {
#if defined(TILED_WITH_SM90A)
  return !disabled("hopper") && dev.sm_major == 9 && dev.sm_minor == 0;
#else
  (void)dev;
  return false;
#endif
}

// 33..64 rows against a long N: the Hopper kernel's 128-row tiles (half
// their rows idle) stream B faster than the skinny kernel's 64-row ones.
// Measured on an H100 (bf16, A-B-B-A, explore-*-{5527302,372ca2e}-bf16-m64-*
// and -61c6ebe+n6144-*-m64-threshold.txt), skinny / Hopper: 64x14336x4096
// NN 0.92-0.93 / 0.92-0.97, NT 0.90 / 0.97; 64x11008 NN 0.80 / 0.87;
// 64x8192 NN 0.84 / 0.91, NT 0.80 / 0.91; 48x8192 0.85 / 0.90; 64x6144 NN
// 0.81 / 0.81, NT 0.78 / 0.80; at N = 4096 even or the other way
// (64x4096x4096 NN 0.81-0.82 / 0.81, NT 0.79-0.81 / 0.81-0.83, 48x4096x4096
// 0.81-0.82 / 0.78).  So from N = 6144, one batch.  And rows
// up to 64 go to the Hopper kernel's one-slab tiles (64 x 8..64, hopper.cu's
// slab_width) wherever those apply (N / 64 tile rows filling 1/4
// to 1 wave, or past it; up to 32 rows only from tile rows for 2/5 of the
// SMs; up to 16 rows, or up to 32 past a wave, only with a K-major B):
// 64x4096x4096 NN 0.82 / 0.94-0.96, NT 0.80 / 0.95-0.97, 32x4096x4096 0.87
// / 0.98, 17x4096x4096 NN 0.87-0.88 / 0.96, 16x8192x4096 NT 0.93 / 0.99,
// 32x28672x4096 NT 0.94 / 1.01 (H100; on an H200 16x14336x4096 NT 0.91 /
// 0.98, 64x4096x4096 NN 0.76 / 0.96).  Batches take the one-slab tiles too
// (their tile rows count every batch), from K = 256: 8 x 64x1024x1024 NN
// 0.67 / 0.97, 2 x 64x4096x4096 NN 0.84 / 0.98, 4 x 64x4096x4096 NT 0.93 /
// 1.01, 4 x 16x4096x4096 NT 0.95 / 1.01, 8 x 32x4096x4096 NT 0.98 / 1.04, but
// 32 x 1x4096x128 NT 0.95 / 0.92 (two k-blocks a tile; explore
// c8bd9da-batched-smallm) -- that limit for 32 rows or fewer only: 33..64
// (attention-style PV products, head dim 64) ran 4x faster on the one-slab
// tiles at K = 128 too (384 x 128x64x128 NN 0.22 / 1.03, H200).
bool hopper_over_skinny(const GemmProblem& p, const DeviceInfo& dev) {
  if ((p.M > 64 && p.N > 64) || disabled("hopper")) return false;
  // tf32 (no one-slab tiles): the skinny kernel, which reads every layout in
  // place, where the Hopper family cannot; where both can, the Hopper family,
  // but for NN with N <= 32 on at most half a wave of its 128-row tiles (the
  // skinny kernel runs it swapped, with many K slices).  H200, corpus LoRA
  // products, torch / ours, 3 interleaved rounds: where the Hopper family
  // needs a copy (TN and a few NN), simt_fast or staged copies 0.16-0.83,
  // skinny 0.80-1.15 (14 GEMMs); in place, Hopper / skinny (the rules'
  // split): NN 8192x16x14336 0.75 / 1.19, NN 4096x8x4096 0.71 / 1.13, but NN
  // 12608x16x768 (99 tiles) 1.04 / 0.95, NT 4096x32x3584 0.89 / 0.62 (its
  // K-major split rule, made for 16-bit), NT 8192x16x4096 1.18 on 128x64,
  // NT 2048x64x4096 0.94 / 0.83 (docs/skinny.md).
  if (p.dtype == DType::f32) {
    if (!hopper_can_run(p, dev)) return false;
    const bool nn_small_n = p.a.row_major() && p.b.row_major() && p.N <= 32 && p.M > 64;
    return !nn_small_n || 2 * ceil_div(p.M, int64_t{128}) * p.batch > dev.num_sms;
  }
  if (p.batch != 1) return (p.K >= 256 || std::min(p.M, p.N) > 32) && hopper_one_slab(p, dev);
  // A small N (the skinny kernel would run it swapped): the one-slab tiles
  // as called where they apply (NN, NT, TN: hopper.cu's
  // slab_width_as_called).
  if (p.M > 64) return hopper_one_slab(p, dev);
  return hopper_one_slab(p, dev) || (p.M > 32 && p.N >= 6144 && hopper_can_run(p, dev));
}

// Whether the rules give `p` to the skinny kernel.
bool skinny_takes(const GemmProblem& p, const DeviceInfo& dev) {
  return !disabled("skinny") && skinny_can_run(p, dev) && !hopper_over_skinny(p, dev);
}

// A configuration forced by name (TILED_CONFIG, or the table's or the
// autotuner's choice) whose family can take `p` as named: that family, in
// dispatch order where the list names several.
bool forced_family(const GemmProblem& p, const DeviceInfo& dev, Family* f) {
  const char* list = forced_config();
  if (list == nullptr) return false;
  if (!disabled("hopper") && hopper_config_forced(p, dev)) *f = Family::hopper;
  else if (!disabled("skinny") && skinny_config_forced(p, dev)) *f = Family::skinny;
  else if (!disabled("sm80") && sm80_config_forced(p, dev)) *f = Family::sm80;
  else if (p.dtype == DType::f32 && !disabled("simt_fast") && simt_fast_config_forced(p, dev)) *f = Family::simt_fast;
  else if (any_config_item(list, [](const std::string& n) { return n == "simt_general"; })) *f = Family::simt_general;
  else return false;
  return true;
}

Family choose(const GemmProblem& p, const DeviceInfo& dev) {
  Family forced;
  if (forced_family(p, dev, &forced)) return forced;
  if (skinny_takes(p, dev)) return Family::skinny;
  if (!disabled("hopper") && hopper_can_run(p, dev)) return Family::hopper;
  // Not yet measured against the alternatives below; on GPUs without the
  // Hopper family it replaces the SIMT kernels for 16-bit and tf32 (on an
  // H100 with the Hopper family off, bf16 4096^3 ran 17 TFLOP/s on
  // simt_general).
  if (!hopper_family_on(dev) && !disabled("sm80") && sm80_can_run(p, dev)) return Family::sm80;
  // fp32 the tensor cores did not take: strict fp32, or TF32 allowed but the
  // problem too small to stage / the GPU not a Hopper.  Allowing TF32 permits
  // strict fp32 math too, and simt_fast is the fastest fp32 SIMT kernel (the
  // general one measured 0.06x cuBLAS on 16x4096x4096 with TF32 allowed).
  if (p.dtype == DType::f32 && !disabled("simt_fast") && simt_fast_can_run(p, dev)) return Family::simt_fast;
  return Family::simt_general;
}

}  // namespace

// Below this the copy is not paid back: with M or N this small the GEMM is
// memory-bound anyway and the SIMT kernel reads each operand once.
constexpr int64_t kMinStagedDim = 64;

Operand staged_operand(const StagedOperand& s, int64_t rows, int64_t cols, bool batched, const void* ptr) {
  Operand o;
  o.ptr = ptr;
  o.row_stride = s.row_major ? s.ld : 1;
  o.col_stride = s.row_major ? 1 : s.ld;
  o.batch_stride = batched ? (s.row_major ? rows : cols) * s.ld : 0;
  return o;
}

namespace {

StagedOperand stage_as(bool row_major, int64_t rows, int64_t cols, int64_t align) {
  StagedOperand s;
  s.on = true;
  s.row_major = row_major;
  const int64_t inner = row_major ? cols : rows;
  s.ld = (inner + align - 1) / align * align;
  return s;
}

}  // namespace

namespace {

// The tensor-core kernel (the Hopper family, else the sm80 family where
// dispatch takes that one): the cheapest set of aligned copies (16-bit
// operands keep their layout, tf32 ones are made K-major, which both
// families read fastest) that lets it run.
StagingPlan tensor_core_plan(const GemmProblem& p, const DeviceInfo& dev) {
  StagingPlan none;
  const bool tf32 = p.tf32();
  const bool tensor_core_dtype = p.dtype == DType::bf16 || p.dtype == DType::f16 || tf32;
  if (!tensor_core_dtype) return none;
  const bool sm80 = !hopper_family_on(dev) && !disabled("sm80");
  if (!sm80 && disabled("hopper")) return none;
  auto runs = [&](const GemmProblem& q) { return sm80 ? sm80_can_run(q, dev) : hopper_can_run(q, dev); };
  if (std::min(p.M, p.N) < kMinStagedDim || runs(p)) return none;
  // A tf32 problem with a side of 64 that the skinny kernel reads in place
  // (choose() takes it there: hopper_over_skinny).
  if (tf32 && skinny_takes(p, dev)) return none;
  const int64_t align = 16 / dtype_size(p.dtype);
  const StagedOperand sa = stage_as(tf32 ? true : p.a.row_major(), p.M, p.K, align);
  const StagedOperand sb = stage_as(tf32 ? false : p.b.row_major(), p.K, p.N, align);
  // Any 256-byte aligned address stands in for the caching allocator's blocks.
  const void* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  // Cheapest first: the smaller operand alone, the other alone, then both.
  const bool a_first = p.M <= p.N;
  const int order[3] = {a_first ? 1 : 2, a_first ? 2 : 1, 3};
  for (int mask : order) {
    StagingPlan s;
    GemmProblem q = p;
    if (mask & 1) {
      s.a = sa;
      q.a = staged_operand(sa, p.M, p.K, p.a.batch_stride != 0, aligned);
    }
    if (mask & 2) {
      s.b = sb;
      q.b = staged_operand(sb, p.K, p.N, p.b.batch_stride != 0, aligned);
    }
    if (runs(q)) return s;
  }
  return none;
}

// fp32 on the SIMT kernel: its large config reads a column-major
// (K-contiguous) B with 4-byte transposing copies into shared memory and
// runs NT ~6% behind NN (H100, 4096^3: 0.88x against 0.93x of cuBLAS).  A
// row-major copy of B moves 8 K N bytes against the GEMM's 2 M N K flops,
// ~77 / M of its time at 48 TFLOP/s and 2.5 TB/s: < 4% from M = 2048.
// The same copy, with a leading dimension padded to 4 floats, gives a
// row-major B that is not 16-byte aligned (e.g. 4095^3) the 16-byte copies
// it would lose; and from N = 2048 a column-major (M-contiguous) A that is
// not aligned gets an aligned column-major copy when B ends up aligned (the
// kernel copies 16 bytes at a time only when every M- or N-contiguous
// operand allows it).  Measured (H100, paired with cuBLAS, A-B-B-A against
// TILED_SIMT_STAGE_B=0, explore-*-6196e77-fp32-unaligned): 4095^3 NN / NT /
// TN / TT 0.91 / 0.88 / 0.87 / 0.92 -> 0.93 / 0.90 / 0.88 / 0.93, 4097^3
// 0.90 -> 0.95.  An aligned copy of an unaligned row-major (K-contiguous) A
// too, so that its k-tile rows are whole 32-byte sectors, lost what it cost
// (a58ee68: 4095^3 NN 0.93 -> 0.91, NT 0.90 -> 0.88, 4097^3 0.95 -> 0.93).
// (TILED_DISABLE_KERNELS=staging reads both in place.)
constexpr int64_t kMinSimtStagedM = 2048;
StagingPlan simt_plan(const GemmProblem& p, const DeviceInfo& dev) {
  StagingPlan s;
  if (choose(p, dev) != Family::simt_fast || std::min(p.M, p.N) < kMinStagedDim || !simt_fast_runs_large(p, dev))
    return s;
  const bool b_aligned_row = p.b.row_major() && operand_vec4_ok(p.b, p.batch);
  if (p.M >= kMinSimtStagedM && !b_aligned_row) s.b = stage_as(true, p.K, p.N, 4);
  if (p.N >= kMinSimtStagedM && !p.a.row_major() && !operand_vec4_ok(p.a, p.batch) && (s.b.on || b_aligned_row))
    s.a = stage_as(false, p.M, p.K, 4);
  return s;
}

}  // namespace

StagingPlan staging_plan(const GemmProblem& p, const DeviceInfo& dev) {
  if (disabled("staging")) return StagingPlan{};
  const StagingPlan tc = tensor_core_plan(p, dev);
  return tc.any() ? tc : simt_plan(p, dev);
}

namespace {

// What a family that does not fuse the epilogue (sm90, sm80, simt_fast) runs
// before the elementwise pass: the plain GEMM, storing acc + bias into
// epi.pre where the caller keeps the pre-activation (the pass reads it from
// there, so the GEMM's output is written once, not copied to pre), else
// into C.
GemmProblem unfused_gemm(const GemmProblem& p) {
  GemmProblem q = p;
  q.epi = Epilogue{};
  if (p.epi.pre) {
    q.c = p.epi.pre;
    q.c_batch_stride = p.epi.pre_batch_stride;
    q.c_row_stride = p.epi.pre_row_stride;
  }
  return q;
}

// The problem family f launches for p: p itself where the family applies
// the epilogue in its kernel (or there is none), else the plain GEMM before
// the pass (epilogue_pass).
GemmProblem launched_problem(Family f, const GemmProblem& p, const DeviceInfo& dev) {
  const bool fused = f == Family::skinny || f == Family::simt_general ||
                     (f == Family::hopper && hopper_fuses_epilogue(p, dev));
  return !p.epi.any() || fused ? p : unfused_gemm(p);
}

// The choice under whatever configuration is forced (settings.h), else the rules'.
size_t workspace_untuned(const GemmProblem& p, const DeviceInfo& dev) {
  const Family f = choose(p, dev);
  const GemmProblem q = launched_problem(f, p, dev);
  switch (f) {
    case Family::skinny: return skinny_workspace_bytes(q, dev);
    case Family::hopper: return hopper_workspace_bytes(q, dev);
    case Family::sm80: return sm80_workspace_bytes(q, dev);
    case Family::simt_fast: return simt_fast_workspace_bytes(q, dev);
    default: return 0;
  }
}

const char* gemm_untuned(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  const Family f = choose(p, dev);
  switch (f) {
    case Family::skinny: return skinny_gemm(p, dev, stream, workspace);
    case Family::hopper:
    case Family::sm80:
    case Family::simt_fast: {
      // The sm90 ping-pong kernels apply the epilogue to each C box in
      // shared memory before TMA stores it (hopper_fuses_epilogue).
      // Otherwise (other sm90 kernels, sm80, simt_fast) the GEMM stores acc + bias (into
      // pre where it is kept, unfused_gemm), then a second, elementwise pass
      // applies the rest.  Both act on acc + bias rounded to C's type, as
      // an unfused torch Linear + activation does; simt_fast's C is fp32, the
      // accumulator itself, so its result is the fused one bit for bit.
      auto run = [&](const GemmProblem& q) {
        return f == Family::hopper ? hopper_gemm(q, dev, stream, workspace)
               : f == Family::sm80 ? sm80_gemm(q, dev, stream, workspace)
                                   : simt_fast_gemm(q, dev, stream, workspace);
      };
      const GemmProblem q = launched_problem(f, p, dev);
      if (const char* err = run(q)) return err;
      if (!p.epi.any() || q.epi.any()) return nullptr;  // no epilogue, or applied in the kernel
      GemmProblem rest = p;
      rest.epi.pre = nullptr;  // already holds what the pass reads, when kept
      return epilogue_pass(rest, q.c, q.c_batch_stride, q.c_row_stride, stream);
    }
    case Family::simt_general: break;
  }
  return simt_general_gemm(p, dev, stream);
}

const char* name_untuned(const GemmProblem& p, const DeviceInfo& dev) {
  switch (choose(p, dev)) {
    case Family::skinny: return skinny_config_name(p, dev);
    case Family::hopper: return hopper_config_name(p, dev);
    case Family::sm80: return sm80_config_name(p, dev);
    case Family::simt_fast: return simt_fast_config_name(p, dev);
    case Family::simt_general: break;
  }
  return "simt_general";
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;  // unknown: do not time anything
  }
  return status != cudaStreamCaptureStatusNone;
}

// Times every candidate on `stream` (1 warm-up + 3 timed runs each), returns
// the fastest's index and its time per run; -1 when nothing ran.
int time_candidates(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace,
                    const std::vector<Settings>& cands, double* best_us) {
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    (void)cudaGetLastError();
    if (start) cudaEventDestroy(start);
    return -1;
  }
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    SettingsScope scope(&cands[i]);
    if (workspace_untuned(p, dev) > 0 && workspace == nullptr) continue;
    if (gemm_untuned(p, dev, stream, workspace) != nullptr || cudaGetLastError() != cudaSuccess) continue;
    cudaEventRecord(start, stream);
    bool ok = true;
    for (int r = 0; r < 3 && ok; ++r) ok = gemm_untuned(p, dev, stream, workspace) == nullptr;
    cudaEventRecord(stop, stream);
    float ms = 0.f;
    if (!ok || cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    const double us = 1000.0 * ms / 3;
    if (best < 0 || us < *best_us) {
      best = static_cast<int>(i);
      *best_us = us;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// A configuration forced by hand (TILED_CONFIG): it comes before the
// autotuning cache and the table, which then step aside.
bool forced_by_hand() {
  const char* v = setting("TILED_CONFIG");
  return v != nullptr && *v != '\0';
}

// The autotuning cache, unless a configuration is forced by hand.
const char* tuning_cache() { return forced_by_hand() ? nullptr : autotune::cache_path(); }

// The stored configuration of p's class; false when autotuning is off or
// the class has none yet.
bool stored_setting(const GemmProblem& p, const DeviceInfo& dev, Settings* out) {
  const char* path = tuning_cache();
  return path && autotune::lookup(path, autotune::class_key(p, dev), out);
}

// The shipped dispatch table's configuration of p's class (autotune.h);
// false where it has none, where TILED_DISABLE_KERNELS names "table" (the
// rules alone), and where a configuration is forced by hand: that is obeyed.
// Also false where the entry names the rules' choices it was measured
// against and p's is none of them: a class (sides rounded up to powers of
// two) holds problems whose grids fill the waves differently, and an entry
// won against the kernels the rules ran on its tuned GEMMs, not against
// another.  (H200, bf16, the corpus's held-out part, 2 paired runs: of the
// 23 GEMMs the table changed, the 13 whose rules' choice the entry was
// measured against gained 1.10x in geomean, worst 0.97x; the other 10 lost
// 0.94x, down to 0.68x, e.g. 2304 x 768 x 1584 TN moved from 128x128 to
// 128x256sw tiles, 54 tiles on 132 SMs.  docs/dispatch.md.)  And false
// where the rules take 2-CTA clusters for operand rows 16 bytes off a
// 32-byte boundary (hopper.cu's off32_cluster): the table's timings were
// taken on aligned rows, and the entries lose there (3000^3 NT: 128x144sw
// 0.55x torch, the rule's 128x256c2 0.72x).
bool table_setting(const GemmProblem& p, const DeviceInfo& dev, Settings* out) {
  if (disabled("table") || forced_by_hand()) return false;
  autotune::Entry e;
  if (!autotune::table_lookup(p, dev, &e) || hopper_off32_cluster(p, dev)) return false;
  if (!e.over.empty() && std::find(e.over.begin(), e.over.end(), name_untuned(p, dev)) == e.over.end()) return false;
  *out = e.settings;
  return true;
}

// The configuration p runs, if not the rules' own choice: with autotuning
// on, the cache's (a class not in it yet is timed on its first call); else
// the shipped table's.
bool chosen_setting(const GemmProblem& p, const DeviceInfo& dev, Settings* out) {
  return tuning_cache() ? stored_setting(p, dev, out) : table_setting(p, dev, out);
}

}  // namespace

// With TILED_AUTOTUNE_CACHE set (autotune.h), the problem's class runs its
// stored configuration; an untuned class gets the largest workspace any
// candidate needs and is timed on its first eager call.
size_t gemm_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  Settings chosen;
  if (chosen_setting(p, dev, &chosen)) {
    SettingsScope scope(&chosen);
    return workspace_untuned(p, dev);
  }
  if (!tuning_cache()) return workspace_untuned(p, dev);  // the rules' choice
  size_t most = 0;
  for (const Settings& c : autotune::candidates(p, dev)) {
    SettingsScope scope(&c);
    most = std::max(most, workspace_untuned(p, dev));
  }
  return most;
}

const char* gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  const char* path = tuning_cache();
  Settings chosen;
  if (!path) {
    if (!table_setting(p, dev, &chosen)) return gemm_untuned(p, dev, stream, workspace);
  } else if (!autotune::lookup(path, autotune::class_key(p, dev), &chosen)) {
    const std::string key = autotune::class_key(p, dev);
    const std::vector<Settings> cands = autotune::candidates(p, dev);
    if (cands.size() < 2 || capturing(stream)) return gemm_untuned(p, dev, stream, workspace);
    double us = 0;
    const int best = time_candidates(p, dev, stream, workspace, cands, &us);
    if (best < 0) return gemm_untuned(p, dev, stream, workspace);
    chosen = autotune::store(path, key, cands[best], us);
  }
  // The output comes from one run of the chosen configuration (the timed
  // runs of the other candidates wrote it too, with other rounding).
  SettingsScope scope(&chosen);
  if (workspace == nullptr && workspace_untuned(p, dev) > 0)
    return "autotune: the stored configuration needs a workspace that was not allocated (cache file changed?)";
  return gemm_untuned(p, dev, stream, workspace);
}

std::string build_mismatch(const DeviceInfo& dev) {
  return build_mismatch_message(compiled_archs(), dev.name, dev.sm_major, dev.sm_minor);
}

std::vector<std::string> config_list(const GemmProblem& p) {
  std::vector<std::string> out = hopper_config_list(p);
  for (auto* list : {&skinny_config_list, &sm80_config_list, &simt_fast_config_list})
    for (std::string& n : (*list)(p)) out.push_back(std::move(n));
  out.push_back("simt_general");
  return out;
}

namespace autotune {

std::vector<Settings> candidates(const GemmProblem& p, const DeviceInfo& dev) {
  std::vector<Settings> out{Settings{}};
  std::vector<std::string> seen{name_untuned(p, dev)};
  for (const Settings& c : candidates(p)) {
    if (c.empty()) continue;
    // The sm80 family is the tensor-core path of GPUs without the sm90 one;
    // where that runs, the sm80 kernels (forcible by name) are not timed.
    if (hopper_family_on(dev) && c.config.rfind("sm80_", 0) == 0) continue;
    SettingsScope scope(&c);
    const std::string name = name_untuned(p, dev);
    // Only where it runs as named, and once per kernel.
    if (name != c.config || std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    out.push_back(c);
  }
  // The swapped-only widths (128x144sw ... 128x232sw): the two of the
  // fewest weighted waves (hopper.cu's swap_width cost; the narrower of
  // equals).  On the H200's tuning data (bf16, 385 GEMMs), where any width
  // came within 2% of the GEMM's best time (62 GEMMs), one of those two did
  // in 59; the other five widths were 15% of the pass's timings.
  auto width_of = [](const std::string& n) {
    const size_t at = n.find("_128x");
    return at != std::string::npos && n.find("sw_", at) != std::string::npos ? std::atoi(n.c_str() + at + 5) : 0;
  };
  std::vector<std::pair<int64_t, int>> widths;  // (cost, width) of the listed swapped-only widths
  for (const Settings& c : out) {
    const int w = width_of(c.config);
    const int64_t cost = hopper_swap_width_cost(p, dev, w);
    if (cost >= 0) widths.emplace_back(cost, w);
  }
  std::sort(widths.begin(), widths.end());
  for (size_t i = 2; i < widths.size(); ++i) {
    const int w = widths[i].second;
    out.erase(std::remove_if(out.begin(), out.end(), [&](const Settings& c) { return width_of(c.config) == w; }),
              out.end());
  }
  return out;
}

}  // namespace autotune

const char* gemm_kernel_name(const GemmProblem& p, const DeviceInfo& dev) {
  Settings chosen;
  if (!chosen_setting(p, dev, &chosen)) return name_untuned(p, dev);
  SettingsScope scope(&chosen);
  return name_untuned(p, dev);
}

}  // namespace cuda
}  // namespace tiled
