// The Ampere-style tensor-core family (sm80.cuh), as dispatch sees it: the
// configurations (data), the launch parameters and the per-dtype launchers.
// Torch-free, no device code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../../gemm_problem.h"
#include "../dispatch.h"

namespace tiled {
namespace cuda {
namespace sm80 {

// One configuration: a BM x BN tile of C per CTA, k-blocks of BK elements
// (always 128 bytes of K: 64 bf16/fp16, 32 tf32), WARPS_M x WARPS_N warps
// each owning a (BM / WARPS_M) x (BN / WARPS_N) warp tile, STAGES k-blocks
// in the cp.async ring, and the main loop's kind (`ring`: every slot in
// flight, the barrier inside the k-block; else a barrier at the top of each
// k-block and one slot free: sm80.cuh).  `eff` is the fraction of the
// mma.sync peak the configuration reached on large grids on an H100 with
// as many CTAs per SM as fit there, `eff_one` with one CTA per SM (a GPU
// with less shared memory); sm80.cu's choice weighs tiles with them.
struct Config {
  const char* tag;  // the name's tile part, e.g. "128x256x64s3"
  int bm, bn, bk, warps_m, warps_n, stages;
  bool ring;
  float eff, eff_one;
};

constexpr int kRowBytes = 128;  // one k-block of K, in bytes (8 16-byte chunks)

// The configurations, per dtype class.  Each warp tile is 64 x 64: 128 fp32
// accumulators a thread, 4 m16 x 8 n8 mma tiles per k-step.
//   0: 128 x 256, 8 warps, 3 stages (144 KB: one CTA per SM; A100, H100);
//   1: 128 x 128, 4 warps, 3 stages (96 KB: two CTAs per SM on an H100,
//      one on an A100; the only one that fits sm_86 / sm_89 / sm_120's
//      99 KB).
// eff: H100, benchmarks/research/micro/sm80_variants.cu, NN at 4096^3,
// 8192 x 4096 x 4096 and 4096 x 14336 x 4096 (docs/sm80.md); eff_one of
// 128 x 128 is its 4-stage form's (128 KB: one CTA per SM on an H100).
// The tf32 kernels keep the top-barrier loop: with the ring's second live
// fragment buffer ptxas spills 300+ bytes, and they ran 0.43 / 0.30 of the
// peak against 0.52 / 0.41 (128 x 256 / 128 x 128, 4096^3).
constexpr Config kConfigs16[] = {
    {"128x256x64s3", 128, 256, 64, 2, 4, 3, true, 0.60f, 0.60f},
    {"128x128x64s3", 128, 128, 64, 2, 2, 3, true, 0.65f, 0.54f},
};
constexpr Config kConfigsTf32[] = {
    {"128x256x32s3", 128, 256, 32, 2, 4, 3, false, 0.52f, 0.52f},
    {"128x128x32s3", 128, 128, 32, 2, 2, 3, false, 0.41f, 0.25f},
};
constexpr int kNumConfigs = 2;
static_assert(sizeof(kConfigs16) / sizeof(Config) == kNumConfigs, "one list length for every dtype class");
static_assert(sizeof(kConfigsTf32) / sizeof(Config) == kNumConfigs, "one list length for every dtype class");

constexpr const Config& config(bool tf32, int i) { return tf32 ? kConfigsTf32[i] : kConfigs16[i]; }
constexpr int threads(const Config& c) { return 32 * c.warps_m * c.warps_n; }
constexpr int elem_bytes(bool tf32) { return tf32 ? 4 : 2; }
constexpr int stage_bytes(const Config& c, bool tf32) { return (c.bm + c.bn) * c.bk * elem_bytes(tf32); }
constexpr int smem_bytes(const Config& c, bool tf32) { return c.stages * stage_bytes(c, tf32); }

constexpr bool config_ok(const Config& c, bool tf32) {
  return c.bk * elem_bytes(tf32) == kRowBytes && c.bm % (16 * c.warps_m) == 0 && c.bn % (16 * c.warps_n) == 0 &&
         c.bm * elem_bytes(tf32) % (8 * 16) == 0 && c.bn * elem_bytes(tf32) % (8 * 16) == 0 && c.stages >= 2;
}
static_assert(config_ok(kConfigs16[0], false) && config_ok(kConfigs16[1], false), "16-bit configurations");
static_assert(config_ok(kConfigsTf32[0], true) && config_ok(kConfigsTf32[1], true), "tf32 configurations");

// Everything a launch needs.  Strides in elements.  C is row-major (c_ld).
struct Params {
  const void* a = nullptr;  // [batch] M x K
  const void* b = nullptr;  // [batch] K x N
  const void* bias = nullptr;  // [N] or null, the output dtype
  void* c = nullptr;
  int M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0;          // the non-unit stride of each operand
  int64_t a_batch = 0, b_batch = 0;  // 0: broadcast
  int64_t c_batch = 0, c_ld = 0;
  int tiles_m = 0, tiles_n = 0;
  int c_align = 1;  // bytes (16, 8, 4, 2) that C's base, rows and batches are all aligned to
  // Split K (grid z = splits): each split sums kb_per_split k-blocks into
  // `partial` (fp32, [split][batch][M][N]); a second kernel adds them up
  // with the bias into C.  kb_per_split 0 / partial null: no split.
  int kb_per_split = 0;
  float* partial = nullptr;
};

// A launch: configuration index, layouts, grid.
struct Launch {
  Params p;
  int cfg = 0;
  bool a_kmajor = true;  // A(m, k) at a[m * lda + k] (row-major A), else a[k * lda + m]
  bool b_kmajor = true;  // B(k, n) at b[n * ldb + k] (column-major B), else b[k * ldb + n]
  int batch = 1;
  int splits = 1;  // K splits (workspace: splits * batch * M * N floats when > 1)
};

// Per-dtype, per-configuration launchers (sm80_<dtype>_<cfg>.cu: one file
// each so they compile in parallel).
const char* launch_bf16_0(const Launch& l, cudaStream_t stream);
const char* launch_bf16_1(const Launch& l, cudaStream_t stream);
const char* launch_f16_0(const Launch& l, cudaStream_t stream);
const char* launch_f16_1(const Launch& l, cudaStream_t stream);
const char* launch_tf32_0(const Launch& l, cudaStream_t stream);
const char* launch_tf32_1(const Launch& l, cudaStream_t stream);

}  // namespace sm80
}  // namespace cuda
}  // namespace tiled
