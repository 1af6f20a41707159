// simt_fast: the ladder's last step (step 9) and the production strict-fp32
// kernel; what dispatch uses for fp32 that the tensor-core kernel does not
// take (strict fp32, and TF32-allowed problems too small to stage).
//
// It is step 8 (warp tiles, cp.async multi-stage pipeline, Hilbert block
// order) re-tuned for Hopper over the rounds of docs/ladder.md, with a size
// dispatch over its configs (simt_pick below):
//  - large problems (at least one 128 x 128 tile per SM): kSimtLargeConfig,
//    step 109 (simt_fast_large.cu): the lean pipeline of simt_fast_lean.cuh
//    on a 128 x 256 x 16 block of 8 warps, 3 stages, one block per SM, each
//    k-tile's copies spread into the next k-tile's loop, FFMAs in 2x2 quads
//    compiled with ptxas -O1; with stream-K over a ragged last wave and
//    split-K for few tiles with a deep K (below);
//  - fewer tiles than SMs (1024^3: 64; 128 x 4096 x 4096: 32): sliced-K
//    blocks on 64 x 64 or, when M or N <= 32, 32 x 32 tiles (steps 96 / 97,
//    simt_fast_sliced.cu);
//  - a GPU without the large config's 75 KB of shared memory per block:
//    step 101, the same lean pipeline on a 128 x 128 x 16 block of 4 warps
//    (this file).
//
// Accepts every f32 problem: layouts are template parameters (NN, NT, TN, TT
// run the same math; only the copy instruction differs), 16-byte copies when
// the X-contiguous operands are aligned, 4-byte zero-filling copies at the
// edges and for everything else.
#include <algorithm>
#include <string>
#include <vector>

#include "simt_fast_lean.cuh"
#include "../settings.h"
#include "../stream_k.h"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {

namespace {
constexpr const char* kSimtF32Only = "simt_fast supports float32 only";
}  // namespace

// Step 101: the lean pipeline on a 128 x 128 x 16 block (4 warps of 64 x 64,
// 8 x 16 per thread, 3 stages = 50.7 KB, 2 blocks / SM), fragments
// prefetched across k-tiles, copies in one burst after each barrier, FFMAs
// row by row; the smallest shared memory of simt_fast's configs.
using Lean128x128Cfg = WarpTileCfg<128, 128, 16, 64, 64, 8, 16, /*STAGES=*/3, /*MINB=*/2,
                                   /*NAMED=*/false>;
const char* run_simt_lean_128x128(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s) {
  return launch_lean<Lean128x128Cfg, HilbertOrder>(p, dev, s, "ladder step 101 supports float32 only");
}

// simt_fast's size dispatch.  Large problems (at least one 128 x 128 tile per
// SM) take the large config; with fewer tiles most SMs would idle, so
// sliced-K blocks on 32 x 32 (M or N <= 32) or 64 x 64 tiles take over
// (simt_fast_sliced.cuh).  kSimtLargeConfig is the ONE place that names the
// large-problem kernel (a candidate that measures better replaces it).  The
// rounds that chose it (the candidates' code is in git history; each
// round's measurements in docs/ladder.md):
// Step 95 (k-tile 16, 3 stages: half the barriers per FMA) measured 0.839 /
// 0.760 / 0.824 / 0.858x cuBLAS at 4096^3 NN/NT/TN/TT on an H200, against
// 0.805 / 0.748 / 0.780 / 0.851x for the first 128 x 128 config (step 90).
// Step 101 (step 95's tile, lean loop + fragments prefetched across k-tiles)
// then measured 0.911 / 0.831 / 0.906 / 0.903x against step 95's 0.840 /
// 0.761 / 0.825 / 0.861x in the same run (H200, e51d8da), and replaced it.
// Step 104 (step 101's loop on a 128 x 256 block of 8 warps) measured better
// again at every shape tried (H200, 42c1a79, NN/NT): 4096^3 0.940/0.868 vs
// 0.914/0.827, 2048^3 0.939/0.860 vs 0.904/0.838, 8192^3 0.952 vs 0.929,
// 4096x14336x4096 0.944/0.872 vs 0.920/0.828, 4096x4096x14336 0.955/0.829
// vs 0.915/0.799; TN/TT at 4096^3 0.927/0.923 vs 0.906/0.904.
// Step 106 (104 with each k-tile's copies spread into the next k-tile's
// loop, on a branch-free fast-path k-tile) measured +2.4-3.1% over 104 at
// every shape and layout (H100, paired with cuBLAS, d31ff5f): 4096^3 NN /
// NT / TN / TT 0.910 / 0.908 / 0.914 / 0.942 -> 0.938 / 0.933 / 0.938 /
// 0.966, 2048^3 0.909 -> 0.934, 8192^3 0.924 -> 0.952, 4096x14336x4096
// 0.916 -> 0.944, 4096x4096x14336 0.917 -> 0.941; step 107 (106 with BK 8)
// lost 4-5% to 104.  Step 108 (106 with each k's FFMAs column by column,
// so fewer of them read three registers) measured +0.7-4% over 106 at every
// shape and layout (H100, paired with cuBLAS, 78ea4fa): 4096^3 NN / NT / TN /
// TT 0.937 / 0.934 / 0.937 / 0.965 -> 0.950 / 0.945 / 0.974 / 1.002, 8192^3
// 0.949 -> 0.972, 2048^3 0.933 -> 0.940, 4096x14336x4096 0.944 -> 0.966,
// 4096x4096x14336 0.941 -> 0.961.  Step 109 (106 with each k's FFMAs in 2x2
// quads, its translation unit compiled with ptxas -O1 so the order survives:
// 2.0% of the fast k-tile's FFMAs read three registers against 108's 7.6%)
// measured +2-7% over 108 (H100, paired with cuBLAS's SGEMM in one process,
// 1771da0): 4096^3 NN / TN / NT in place 0.948 / 0.974 / 0.892 -> 0.992 /
// 1.010 / 0.955, 8192^3 0.972 -> 1.008, 4096x14336x4096 0.966 -> 0.999,
// 4096x4096x14336 0.961 -> 1.001, 2048^3 0.940 -> 0.982.  Step 109 then
// moved into the stream-K-capable build of its kernel for whole tiles too
// (same code and bits; ptxas gave that build's k-loop FFMAs same-bank
// register pairs in 1.4-2.8% of cases against 3.7-7.4% before), measured
// (H100, paired with cuBLAS, 748215c against 9513205's numbers): 4096^3 NN /
// TN / NT / TT 0.992 / 1.009 / 0.987 / 1.037 -> 1.012 / 1.017 / 1.006 /
// 1.045, 8192^3 1.008 -> 1.030, 2048^3 0.982 -> 0.993 (docs/ladder.md
// round 8).
constexpr const char* (*kSimtLargeConfig)(const GemmProblem&, const DeviceInfo&,
                                          cudaStream_t) = &run_simt_large;

// Split-K over the large config (step 109) for problems with few 128 x 256
// tiles (at most half the SMs) and a deep K: the K range is cut into S
// slices of ks (a multiple of 16) run as S batch entries of one launch (the
// last, shorter slice as a second launch), each writing its fp32 partial C
// into a workspace; simt_splitk_sum then adds the slices in order 0..S-1 and
// the bias: the same bits on every run.  S fills the SMs (at most 8; slices
// of at least kMinSliceK, 32 k-tiles, so the pipeline's fill stays small),
// and only where the split CTAs cover at least half the SMs (1024^3: 32
// tiles, K = 1024 would give 2 slices, 64 CTAs; the sliced 64x64 kernel
// runs 256).  Batched problems and M or N <= 32 (the 32 x 32 sliced config,
// memory-bound) keep the sliced-K kernels; so does any caller without a
// workspace (the ladder's step 9).  Forced by name (simt_fast_splitk), the
// split is taken wherever S >= 2 slices of kMinSliceK fit, however many
// tiles there are.
constexpr int64_t kMinSliceK = 512;
int64_t sm_count(const DeviceInfo& dev) { return dev.num_sms > 0 ? dev.num_sms : 132; }
struct SimtSplit {
  int64_t slices = 0, ks = 0;
};
SimtSplit simt_split(const GemmProblem& p, const DeviceInfo& dev, bool forced = false) {
  if (p.batch != 1 || p.M <= 32 || p.N <= 32) return {};
  const int64_t sms = sm_count(dev);
  const int64_t tiles = ceil_div(p.M, 128) * ceil_div(p.N, 256);
  if (tiles * 2 > sms && !forced) return {};
  int64_t s = std::min<int64_t>(std::max<int64_t>(sms / tiles, 2), 8);
  while (s > 1 && p.K < s * kMinSliceK) --s;
  if (s < 2 || (tiles * s * 2 < sms && !forced)) return {};
  const int64_t ks = ceil_div(ceil_div(p.K, s), 16) * 16;
  const int64_t slices = ceil_div(p.K, ks);
  if (slices < 2) return {};
  return {slices, ks};
}

__global__ void simt_splitk_sum(const float* __restrict__ ws, int64_t slices, int64_t M, int64_t N,
                                const float* __restrict__ bias, float* __restrict__ c, int64_t ldc) {
  const int64_t mn = M * N;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < mn;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = ws[i];
    for (int64_t s = 1; s < slices; ++s) v += ws[s * mn + i];
    const int64_t m = i / N, n = i - m * N;
    if (bias != nullptr) v += bias[n];
    c[m * ldc + n] = v;
  }
}

const char* run_simt_split(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, float* ws,
                           const SimtSplit& sp) {
  // A is [M, K] (k is its column index), B is [K, N] (k is its row index).
  const int64_t a_k = p.a.col_stride, b_k = p.b.row_stride, mn = p.M * p.N;
  GemmProblem q = p;
  q.bias = nullptr;
  q.c = ws;
  q.c_row_stride = p.N;
  q.c_batch_stride = mn;
  q.K = sp.ks;
  q.a.batch_stride = sp.ks * a_k;
  q.b.batch_stride = sp.ks * b_k;
  const int64_t full = p.K / sp.ks, rest = p.K - full * sp.ks;
  q.batch = full;
  if (const char* e = kSimtLargeConfig(q, dev, stream)) return e;
  if (rest > 0) {
    q.batch = 1;
    q.K = rest;
    q.a.ptr = static_cast<const float*>(p.a.ptr) + full * sp.ks * a_k;
    q.b.ptr = static_cast<const float*>(p.b.ptr) + full * sp.ks * b_k;
    q.c = ws + full * mn;
    if (const char* e = kSimtLargeConfig(q, dev, stream)) return e;
  }
  const int64_t blocks = std::min(ceil_div(mn, 256), sm_count(dev) * 8);
  simt_splitk_sum<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      ws, sp.slices, p.M, p.N, static_cast<const float*>(p.bias), static_cast<float*>(p.c), p.c_row_stride);
  return cudaGetLastError() == cudaSuccess ? nullptr : "simt_fast split-K: reduction launch failed";
}

// Stream-K over the large config's last partial wave (batch 1): with T
// tiles of 128 x 256 on S SMs (one block each), whole tiles leave S - T % S SMs idle for the last wave;
// stream_k_tiles(T, S, k-tiles) tiles are dealt to S CTAs as equal runs of
// k-tiles instead (stream_k.h, simt_fast_lean.cuh), the rest run whole.
// For T >= S (so every run is at least a tile and a tile has at most two
// pieces, which the kernel relies on), where the idle slots of the last wave
// are at least 15% of all W = ceil(T / S) waves' (S * W - T >= 0.15 * S * W:
// two or three waves with a last one at most 70% / 55% full, four at most
// 40%, none from seven), and at least kMinStreamKTiles k-tiles (K >= 512);
// forced by name (simt_fast_streamk), whatever the idle share.  The bits depend on the SM count (where the runs
// are cut), not on the run.  Measured on an H100 (paired with cuBLAS,
// explore-*-fp32-streamk4/5/6; whole tiles / stream-K; W, idle share):
// 1536x4096x4096 (2, 27%) 0.81 / 1.06, 1600x4096x4096 NT (2, 21%) 0.77 /
// 0.87, 2560x4096x4096 (3, 19%) 0.90 / 1.07, TN 0.86 / 1.01; where less is
// idle it lost or broke even: 5000x3000x2048 (4, 9%) 0.93 / 0.85,
// 3000x5000x4096 TT (4, 9%) 0.99 / 0.94, 3072x4096x4096 (3, 3%) 1.002 /
// 1.004, 4096^3 NN (4, 3%) 1.008 / 1.009, 8192^3 (16, 3%) 1.031 / 1.027,
// 4096x14336x4096 (14, 3%) 1.016 / 1.010.  A stream-K CTA runs its k-tiles
// 6-12% slower than a whole tile where it wins, ~40% where it lost (not
// understood; the pieces of a tile run at different k at the same time, so
// a wave no longer shares A / B k-slices in L2).
constexpr int64_t kMinStreamKTiles = 32;
int64_t simt_streamk_tiles(const GemmProblem& p, const DeviceInfo& dev, bool forced = false) {
  if (p.batch != 1) return 0;
  const int64_t sms = sm_count(dev), k_tiles = ceil_div(p.K, 16);
  const int64_t tiles = ceil_div(p.M, 128) * ceil_div(p.N, 256);
  if (k_tiles < kMinStreamKTiles || k_tiles > (int64_t{1} << 24) || sms > 4096) return 0;
  const int64_t waves = ceil_div(tiles, sms), idle = waves * sms - tiles;
  if (tiles < sms || (idle * 20 < waves * sms * 3 && !forced)) return 0;
  return stream_k_tiles(tiles, sms, k_tiles);
}

enum class SimtPick { large, mid, small };
SimtPick simt_pick(const GemmProblem& p, const DeviceInfo& dev) {
  const int64_t sms = sm_count(dev);
  const int64_t tiles128 = ceil_div(p.M, 128) * ceil_div(p.N, 128) * p.batch;
  if (tiles128 >= sms || simt_sliced_smem_bytes() > dev.max_smem_per_block_optin)
    return SimtPick::large;
  return (p.M <= 32 || p.N <= 32) ? SimtPick::small : SimtPick::mid;
}

}  // namespace ladder

bool simt_fast_can_run(const GemmProblem& p, const DeviceInfo& dev) {
  return p.dtype == DType::f32 &&
         static_cast<size_t>(ladder::Lean128x128Cfg::kSmemBytes) <= dev.max_smem_per_block_optin;
}

bool simt_fast_runs_large(const GemmProblem& p, const DeviceInfo& dev) {
  return ladder::simt_pick(p, dev) == ladder::SimtPick::large;
}

namespace {
// What simt_fast runs for `p` given a workspace: split-K (its slices),
// stream-K over the large config (its stream-K tiles) or neither; decided
// once per call.
enum class SimtMode { plain, split_k, stream_k };
struct SimtPlan {
  SimtMode mode = SimtMode::plain;
  ladder::SimtSplit split;
  int64_t sk_tiles = 0;
};
// The configurations, by name (what simt_fast_config_name reports).
constexpr const char* kSimtNames[3] = {"simt_fast", "simt_fast_splitk", "simt_fast_streamk"};

// The plan under the rules, or under configuration `forced` (a SimtMode);
// false where that configuration cannot take `p`.
bool simt_fast_plan_as(const GemmProblem& p, const DeviceInfo& dev, int forced, SimtPlan* out) {
  SimtPlan plan;
  if (p.dtype != DType::f32) return forced < 0;
  const bool large = ladder::simt_pick(p, dev) == ladder::SimtPick::large;
  if (forced < 0 || forced == static_cast<int>(SimtMode::split_k)) {
    plan.split = ladder::simt_split(p, dev, forced >= 0);
    if (plan.split.slices > 1) plan.mode = SimtMode::split_k;
  }
  if (plan.mode == SimtMode::plain && large && (forced < 0 || forced == static_cast<int>(SimtMode::stream_k))) {
    plan.sk_tiles = ladder::simt_streamk_tiles(p, dev, forced >= 0);
    if (plan.sk_tiles > 0) plan.mode = SimtMode::stream_k;
  }
  if (forced >= 0 && static_cast<int>(plan.mode) != forced) return false;
  *out = plan;
  return true;
}

// The first configuration of the forced list that takes `p` (`forced`
// set), else the rules'.
SimtPlan simt_fast_plan(const GemmProblem& p, const DeviceInfo& dev, bool* forced = nullptr) {
  SimtPlan plan;
  const bool named = any_config_item(forced_config(), [&](const std::string& name) {
    for (int i = 0; i < 3; ++i)
      if (name == kSimtNames[i]) return simt_fast_plan_as(p, dev, i, &plan);
    return false;
  });
  if (forced) *forced = named;
  if (!named) simt_fast_plan_as(p, dev, -1, &plan);
  return plan;
}
}  // namespace

bool simt_fast_config_forced(const GemmProblem& p, const DeviceInfo& dev) {
  bool forced = false;
  simt_fast_plan(p, dev, &forced);
  return forced && simt_fast_can_run(p, dev);
}

std::vector<std::string> simt_fast_config_list(const GemmProblem& p) {
  if (p.dtype != DType::f32) return {};
  return {kSimtNames[0], kSimtNames[1], kSimtNames[2]};
}

const char* simt_fast_config_name(const GemmProblem& p, const DeviceInfo& dev) {
  return kSimtNames[static_cast<int>(simt_fast_plan(p, dev).mode)];
}

size_t simt_fast_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev) {
  const SimtPlan plan = simt_fast_plan(p, dev);
  switch (plan.mode) {
    case SimtMode::split_k: return static_cast<size_t>(plan.split.slices * p.M * p.N) * sizeof(float);
    case SimtMode::stream_k: return stream_k_workspace_bytes(ladder::sm_count(dev), 256);
    case SimtMode::plain: break;
  }
  return 0;
}

const char* simt_fast_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace) {
  if (p.dtype != DType::f32) return ladder::kSimtF32Only;
  const SimtPlan plan = workspace != nullptr ? simt_fast_plan(p, dev) : SimtPlan{};
  // A device without the large config's shared memory takes the sliced
  // kernels or step 101 below.
  if (plan.mode == SimtMode::split_k &&
      ladder::run_simt_split(p, dev, stream, static_cast<float*>(workspace), plan.split) == nullptr)
    return nullptr;
  if (plan.mode == SimtMode::stream_k &&
      ladder::run_simt_large_streamk(p, dev, stream, workspace, plan.sk_tiles,
                                     static_cast<int>(ladder::sm_count(dev))) == nullptr)
    return nullptr;
  switch (ladder::simt_pick(p, dev)) {
    case ladder::SimtPick::small: return ladder::run_simt_sliced_small(p, dev, stream);
    case ladder::SimtPick::mid: return ladder::run_simt_sliced_mid(p, dev, stream);
    case ladder::SimtPick::large: break;
  }
  // The 128 x 256 block needs 75 KB of shared memory: a GPU that cannot
  // give it (the launcher says so before launching) takes step 101's.
  if (ladder::kSimtLargeConfig(p, dev, stream) == nullptr) return nullptr;
  return ladder::run_simt_lean_128x128(p, dev, stream);
}

}  // namespace cuda
}  // namespace tiled
