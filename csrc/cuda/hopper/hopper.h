// The Hopper (sm_90a) tensor-core GEMM family, as dispatch sees it.
//
// dispatch.h declares the two entry points every family has:
//   bool        hopper_can_run(const GemmProblem&, const DeviceInfo&);
//   const char* hopper_gemm(const GemmProblem&, const DeviceInfo&, cudaStream_t, void* workspace);
// This header adds the config name (for gemm_kernel_name) and, in namespace
// sm90, the host-side config choice shared by hopper.cu and the per-dtype
// instantiation files.  Torch-free, and includes no CUDA device code.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "../../gemm_problem.h"
#include "../dispatch.h"
#include "../stream_k.h"

namespace tiled {
namespace cuda {

// The name of the config hopper_gemm would launch for `p` ("sm90_<dtype>_
// <BMxBN>_<a><b>", a/b = 'n' row-major or 't' column-major), or nullptr when
// hopper_can_run(p, dev) is false.
const char* hopper_config_name(const GemmProblem& p, const DeviceInfo& dev);
// Whether the forced configuration list (TILED_CONFIG, or the table's or
// the autotuner's choice: settings.h) names an sm90 configuration that runs
// `p` (dispatch then takes the Hopper family, skinny problems included).
// The name is the one hopper_config_name gives ("sm90_bf16_128x128pp_nt"),
// or its variant alone ("128x128pp", any dtype and layout).
bool hopper_config_forced(const GemmProblem& p, const DeviceInfo& dev);
// The family's configurations for p's dtype and layout, by full name.
std::vector<std::string> hopper_config_list(const GemmProblem& p);
// Whether hopper_gemm would run `p` on one-slab tiles (64-row tiles for a
// small M or N; dispatch prefers them to the skinny kernel where they apply).
bool hopper_one_slab(const GemmProblem& p, const DeviceInfo& dev);
// The swapped-only width `width` (144 ... 232) on `p` (the caller's problem:
// tiles of 128 rows of N by `width` columns of M) in hopper.cu's swap_width
// terms: weighted waves x 100, or -1 for another width.  The tuner's
// candidates keep the two cheapest widths (dispatch.cu).
int64_t hopper_swap_width_cost(const GemmProblem& p, const DeviceInfo& dev, int width);
// Whether hopper_gemm applies p's epilogue (p.epi) itself, in the kernel's
// TMA stores of C (the configuration it picks stores every box that way and
// the epilogue's tensors take 16-byte vectors); else dispatch runs the plain
// GEMM and the elementwise pass (epilogue.cuh).
bool hopper_fuses_epilogue(const GemmProblem& p, const DeviceInfo& dev);
// Whether the rules run `p` on 2-CTA clusters because a 16-bit operand's
// rows start 16 bytes past a 32-byte boundary, which TMA reads at about half
// the speed (hopper.cu's off32_cluster; the table steps aside for them).
bool hopper_off32_cluster(const GemmProblem& p, const DeviceInfo& dev);
// Scratch hopper_gemm needs for `p` (stream-K partial tiles), 0 when none.
size_t hopper_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev);

namespace sm90 {

// Each value is the tile's width (BN).  k128x144 ... k128x232 (widths not a
// multiple of 64): 16-bit problems run swapped only (C^T's tiles stored
// transposed; B = the caller's A^T, K-major for a row-major A, N-major for a
// TN problem's column-major A), where their width packs the caller's M into
// whole waves (hopper.cu, swap_width).
enum class Tile : int {
  k128x64 = 64, k128x128 = 128, k128x144 = 144, k128x160 = 160, k128x176 = 176, k128x192 = 192,
  k128x200 = 200, k128x208 = 208, k128x224 = 224, k128x232 = 232, k128x256 = 256
};

struct Choice {
  Tile tile = Tile::k128x256;
  bool a_mn = false;  // A column-major: M-major in shared memory
  bool b_mn = false;  // B row-major: N-major in shared memory
  int cluster = 1;    // 2: CTA pairs along M share B through TMA multicast (16-bit only)
  // Ping-pong schedule (128x128 only): each consumer warpgroup owns whole
  // 128x128 tiles, alternating, so one's epilogue runs under the other's
  // mainloop.  false: both warpgroups split every tile (cooperative).
  bool pingpong = false;
  int group_m = 8;    // grouped raster: tile rows per group (1 for one-slab tiles)
  // Split-K factor (128x128 cooperative only): 0 off, else 2, 4 or 8 CTAs
  // per output tile, one cluster, reduced deterministically through
  // distributed shared memory.
  int split_k = 0;
  // Stream-K (cooperative, no cluster or split): the number of tiles dealt
  // to every SM as equal runs of k-blocks (stream_k_tiles below), 0 off;
  // partial tiles go through a workspace (hopper_workspace_bytes) and are
  // summed in a fixed order.
  int64_t sk_tiles = 0;
  // The launched problem is the caller's transposed (C^T = B^T A^T; tf32
  // with a row-major B, see hopper.cu): the kernel stores C^T's (m, n) at
  // the caller's C[n][m].
  bool c_trans = false;
  // > 0: a one-slab tile of 64 rows by this many columns (kSlabWidths),
  // swapped (c_trans) or, for a small N, as called; cooperative whole tiles
  // without cluster; `tile` unused.
  int slab = 0;
};

// TMA's rules for a non-contiguous dimension: positive, a multiple of 16 bytes, < 2^40 bytes.
inline bool tma_stride_ok(int64_t stride_elems, int es) {
  if (stride_elems <= 0) return false;
  const int64_t bytes = stride_elems * es;
  return bytes % 16 == 0 && bytes < (int64_t{1} << 40);
}

// Whether TMA can store `p`'s C (elements of es bytes): a 16-byte aligned
// base, row and (batched) batch strides.
inline bool c_tma_ok(const GemmProblem& p, int es) {
  return pointer_alignment(p.c) >= 16 && tma_stride_ok(p.c_row_stride, es) &&
         (p.batch <= 1 || tma_stride_ok(p.c_batch_stride, es));
}

constexpr int tile_bn(Tile t) { return static_cast<int>(t); }
// The swapped-only widths (not a multiple of 64: an N-major B would arrive in
// 64-column chunks, and the row-major epilogues store 64 or 32 columns at a time).
constexpr bool tile_swapped_only(Tile t) { return tile_bn(t) % 64 != 0; }
// Epilogue scratch, after the ring and a 1 KB block of mbarriers (so it is
// 1 KB aligned, as the 128-byte swizzle of a TMA box needs):
// * a C that TMA can store (16-byte aligned rows): per consumer warpgroup two
//   8 KB buffers, each one 64-row x 128-byte box of C in the 128B-swizzled
//   layout, stored by cp.async.bulk.tensor while the next box is written;
// * a C whose rows are not 4-column aligned: each of the 8 consumer warps
//   passes 16 rows x 32 columns through it (rows padded to 40 elements
//   against bank conflicts, sized for fp32 output).
// 128x192 tiles (5-stage ring) leave room only for the second use.
constexpr int kEpiPitch = 40;
constexpr int kEpiRowsBytes = 8 * 16 * kEpiPitch * 4;  // 20 KB
constexpr int kCBoxBytes = 64 * 128;                   // one TMA box of C
constexpr int kEpiTmaBytes = 2 * 2 * kCBoxBytes;       // 32 KB
constexpr bool tile_tma_epilogue(Tile t) { return t != Tile::k128x192; }
constexpr int epilogue_scratch_bytes(Tile t) { return tile_tma_epilogue(t) ? kEpiTmaBytes : kEpiRowsBytes; }
// The deepest ring (at most 8 stages) that fits next to 2 KB of alignment
// slack and barriers and the epilogue scratch in the 227 KB a block may opt
// into on sm_90: 4 x 48 KB (128x256), 5 x 40 KB (128x192, whose 20 KB
// scratch leaves no room for the TMA store buffers), 6 x 32 KB (128x128), 8 x
// 24 KB (128x64); the swapped-only widths 5 x 34-38 KB (144-176), 4 x 41-45
// KB (200-232).
constexpr int kSmemPerBlockOptin = 227 * 1024;
// Every k-block is 128 bytes of K for both operands, whatever the dtype, so
// a stage is (BM + BN) rows of 128 bytes; a ring of them, 1 KB alignment
// slack, the 1 KB mbarrier block (two 8-byte barriers per stage) and the
// epilogue scratch.  gemm_sm90.cuh static_asserts the same numbers.
constexpr int ring_stages(int stage_rows, int scratch, int most) {
  const int fit = (kSmemPerBlockOptin - 2048 - scratch) / (stage_rows * 128);
  return fit < most ? fit : most;
}
constexpr int ring_smem_bytes(int stage_rows, int scratch, int most) {
  return 1024 + ring_stages(stage_rows, scratch, most) * stage_rows * 128 + 1024 + scratch;
}
// An N-major B (b_mn) arrives in whole 64-column boxes: a swapped-only width
// (144 ... 232, swapped TN problems) takes the next multiple of 64 rows of
// its stage, 4 stages of 40 KB (144-176) or 48 KB (200-232).
constexpr int tile_b_rows(Tile t, bool b_mn) { return b_mn ? (tile_bn(t) + 63) / 64 * 64 : tile_bn(t); }
constexpr int tile_stages(Tile t, bool b_mn = false) {
  return ring_stages(128 + tile_b_rows(t, b_mn), epilogue_scratch_bytes(t), 8);
}
constexpr int tile_smem_bytes(Tile t, bool b_mn = false) {
  return ring_smem_bytes(128 + tile_b_rows(t, b_mn), epilogue_scratch_bytes(t), 8);
}

// One-slab tiles (16-bit): 64 rows by W columns, one consumer warpgroup.
// For a small M (NN / NT / TN) they run swapped: 64 rows of the caller's N
// by W of its M (hopper.cu, slab_width); for a small N (NN / NT / TN) as
// called: 64 rows of M by W of N (slab_width_as_called).  An N-major B is
// read from the first W columns of a 64-wide box.  Their stages are small
// ((64 + W) x 128 bytes, 128 x 128 with an N-major B), so the ring holds up
// to 16 of them next to the TMA store buffers.  The widths past 64 (72 ...
// 160) run swapped only, with a K-major B (the caller's row-major A: NN and
// NT), for mid-size problems whose 128-row tiles leave SMs idle (hopper.cu,
// mid_slab_width).
constexpr int kSlabWidths[16] = {8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 112, 128, 144, 160};
constexpr int kMaxNarrowSlab = 64;
constexpr int slab_width_index(int w) {
  for (int i = 0; i < static_cast<int>(sizeof(kSlabWidths) / sizeof(kSlabWidths[0])); ++i)
    if (kSlabWidths[i] == w) return i;
  return -1;
}
// An N-major B arrives as one 64-wide box whatever W: a stage is then 64 +
// 64 rows of 128 bytes.
constexpr int slab_b_rows(int w, bool b_mn) { return b_mn ? 64 : w; }
// The one-slab kernels built, by the layouts of the problem they run: as
// called NT, NN and TN (no M-major A next to a K-major B); swapped, C^T's
// problem NT, TT and TN (the caller's NT, NN and TN; no K-major A next to an
// N-major B).
constexpr bool slab_layout_built(bool a_mn, bool b_mn, bool c_trans) { return a_mn == b_mn || a_mn == c_trans; }
// The same for width `w`: past 64 columns, swapped with a K-major B only.
constexpr bool slab_built(int w, bool a_mn, bool b_mn, bool c_trans) {
  return w <= kMaxNarrowSlab ? slab_layout_built(a_mn, b_mn, c_trans) : c_trans && !b_mn;
}
constexpr int slab_stages(int w, bool b_mn = false) { return ring_stages(64 + slab_b_rows(w, b_mn), kEpiTmaBytes, 16); }
constexpr int slab_smem_bytes(int w, bool b_mn = false) {
  return ring_smem_bytes(64 + slab_b_rows(w, b_mn), kEpiTmaBytes, 16);
}

// Per-dtype launchers (hopper_bf16.cu, hopper_f16.cu, hopper_tf32.cu).
// `workspace`: hopper_workspace_bytes(p, dev) bytes, 256-byte aligned (null when 0).
const char* launch_bf16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, Choice c, void* workspace);
const char* launch_f16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, Choice c, void* workspace);
const char* launch_tf32(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, Choice c, void* workspace);

}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
