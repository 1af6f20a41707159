// The sm_90a tensor-core GEMM: TMA -> multi-stage shared-memory ring ->
// wgmma, warp-specialised and persistent.
//
//   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n]),  fp32 accumulation
//
// One CTA = 3 warpgroups (384 threads), one CTA per SM, looping over output
// tiles of kBM x kBN (persistent grid, grouped raster order):
//   warpgroup 0  producer: one thread issues TMA loads of A and B k-blocks into
//                a ring of kStages stages; it gives its registers away
//                (setmaxnreg.dec) since it needs almost none.
//   warpgroups 1, 2  consumers: each owns 64 rows of the tile and issues
//                wgmma m64 x kBN x k16 (k8 for tf32) on each stage, keeping one
//                wgmma group in flight, then runs the epilogue (bias, cast,
//                bounds-checked stores) straight from the accumulator registers.
//
// Stage hand-off uses two mbarriers per stage:
//   full[s]  : 1 arrival (the producer's arrive.expect_tx) + the stage's TMA
//              bytes.  Consumers wait on it.
//   empty[s] : one arrival per consumer warp (8) once its wgmmas that read the
//              stage have completed.  The producer waits on it before reuse.
// Both sides walk the same (tile, k-block) sequence, so a stage index and a
// phase bit, flipped at each wrap of the ring, are all the state they need.
//
// Shared-memory tile layouts (all 128-byte swizzled, as TMA writes them with
// CU_TENSOR_MAP_SWIZZLE_128B and as the wgmma descriptors read them):
//   K-major operand (A row-major, or B column-major): [rows][128 bytes of K],
//       one TMA box per stage (rows <= 256).
//   MN-major operand (A column-major, or B row-major):
//       [rows/64 chunks][kBK rows of K][128 bytes = 64 elements of M or N],
//       one TMA box per 64-wide chunk (16-bit types); for tf32 (A only),
//       [rows/32 chunks][32 rows of K][128 bytes = 32 elements of M], which
//       the consumers read into registers (wgmma takes tf32 only K-major
//       from shared memory, but any A from registers).
// kBK is always 128 bytes of K (64 bf16/f16, 32 tf32), so every tile row is
// exactly one swizzle row and every wgmma consumes 32 bytes of K.
//
// Edges: TMA zero-fills out-of-bounds rows/columns/K, so the mainloop never
// branches on sizes; only the epilogue's stores are predicated.
//
// One-slab configs (kOneSlab): kBM = 64 and a single consumer warpgroup
// (256 threads), everything else as above; run swapped for a small M
// (kTransC_) or as called for a small N.
#pragma once
#include <cuda.h>  // CUtensorMap (type only)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <atomic>
#include <type_traits>

#include "../../gemm_problem.h"
#include "../cluster_launch.h"
#include "../cp_async.cuh"
#include "../epilogue.cuh"
#include "../settings.h"
#include "hopper.h"
#include "ptx.cuh"
#include "../raster.h"
#include "../stream_k.h"
#include "tensor_map.h"
#include "../smem_opt_in.h"

namespace tiled {
namespace cuda {
namespace sm90 {

// Plain-old-data kernel arguments besides the two tensor maps.
struct KernelArgs {
  int M, N, K;
  int batch;
  int tiles_m, tiles_n;
  int k_blocks;
  int a_batched, b_batched;  // 0: operand broadcast over batch (TMA batch coordinate 0)
  int c_pairs_aligned;       // 1: every even column's pair (n, n+1) may be stored as one vector
  int c_quads_aligned;       // 1: every 4-column group (4i .. 4i+3) may be stored as one vector
  int c_via_smem;            // 1: stores go row by row through shared memory (C not 4-column aligned)
  int c_tma;                 // 1: tiles are stored by TMA from shared memory (tmap_c)
  // 1 (Cfg::kCTrans only): the kernel computes C^T = B^T A^T of the caller's
  // problem (tf32 NN, whose B^T is this kernel's column-major A, tf32 NT
  // with a small M, or a 16-bit problem whose swapped tiles need fewer
  // waves, see hopper.cu): element (m, n) of this problem goes to
  // c[n * c_row_stride + m], and bias[m] is added (by TMA where c_tma, else
  // checked stores).
  int c_trans;
  Raster raster;             // the units' order (raster.h): unit rows (tile rows / kCluster) x tiles_n x batch
  void* c;
  int64_t c_batch_stride, c_row_stride;  // elements
  const void* bias;                      // [N] of T, or null
  // Stream-K (Cfg::kStreamK configs; 0: off): the first sk_tiles units are
  // dealt to the grid as equal runs of k-blocks, the rest one whole tile at
  // a time.  stream_k.h cuts the runs into pieces, orders them (all CTAs
  // walk K in step) and says which piece owns a tile.  Every other piece
  // leaves its fp32 partial in its CTA's slot of sk_partials and raises its
  // flag; the owner waits for those flags, adds the partials, earliest first,
  // to its own (a fixed order: the same bits on every run) and stores the tile.
  // Bit 0 / 1: A / B is read once (settings.h's l2_stream_bits) and loaded
  // under L2's evict_first policy.
  int l2_stream;
  // The fused epilogue (epilogue.cuh); epi_on (ping-pong kernels only):
  // applied to each C box in shared memory before TMA stores it (the host
  // turns it on only where every box goes that way, hopper_fuses_epilogue).
  Epilogue epi;
  int epi_on;
  int sk_tiles;
  float* sk_partials;  // [gridDim.x][2 consumer warpgroups][64 * kBN]
  int* sk_flags;       // [gridDim.x][2], all 0 at launch
};

template <class T, int kBN_, bool kAMN_, bool kBMN_, int kCluster_ = 1, bool kPingPong_ = false,
          bool kSplitK_ = false, bool kTransC_ = false, bool kOneSlab_ = false>
struct Sm90Config {
  using Elem = T;
  // One-slab tiles (16-bit, hopper.h's kSlabWidths): 64 rows by kBN_ = 8
  // ... 64 columns, one consumer warpgroup (256 threads), for problems so
  // small that 128-row tiles leave most SMs idle: a small M run swapped
  // (kTransC_), a small N as called.
  static constexpr bool kOneSlab = kOneSlab_;
  static constexpr int kBM = kOneSlab ? 64 : 128;
  static constexpr int kBN = kBN_;
  static constexpr bool kAMN = kAMN_;  // A is M-major (column-major A, "T")
  static constexpr bool kBMN = kBMN_;  // B is N-major (row-major B, "N")
  // tf32 with an M-major A: each consumer thread loads its A fragments from
  // shared memory into registers (wgmma's register-A form; wgmma takes tf32
  // only K-major from shared memory), B stays K-major.  Both operands arrive
  // already rounded to tf32: their tensor maps are TFLOAT32 (tma_dtype).
  static constexpr bool kARegs = kAMN && sizeof(T) == 4;
  // Kernels that can store C^T's tiles transposed (KernelArgs::c_trans):
  // every tf32 cooperative whole-tile config (the register-A kernels for the
  // caller's NN, the shared-memory ones for a small-M NT run swapped), and
  // for 16-bit types separate 128x256 instantiations (kTransC_) for problems
  // whose swapped tiles fill the waves better (hopper.cu), so that the
  // kernels of unswapped problems do not carry the transposed epilogue.
  static constexpr bool kCTrans = sizeof(T) == 4 ? !kPingPong_ && !kSplitK_ : kTransC_;
  // Widths that are not a multiple of 64 (144 ... 232) run swapped only, as
  // do the one-slab kernels built for C^T: every tile is C^T's, whatever
  // KernelArgs::c_trans says.
  static constexpr bool kSwappedOnly = kOneSlab_ ? kTransC_ : kBN_ % 64 != 0;
  // Rows of the caller's C per transposed TMA store: a tile's last 64-column
  // chunk of C^T may be 8, 16, 32 or 40 wide, and a store must not spill into
  // the next tile's rows: the largest power of two dividing that remainder.
  static constexpr int kTBoxRows = kBN_ % 64 == 0 ? 64 : (kBN_ % 64) & -(kBN_ % 64);
  // Elements of M or N per 128-byte row of an MN-major chunk (one TMA box).
  static constexpr int kMNBox = 128 / static_cast<int>(sizeof(T));
  // CTAs per cluster along M.  2: the pair computes tiles (2p, n) and
  // (2p + 1, n), which share B; each CTA loads half of that B tile and
  // multicasts it to both.
  static constexpr int kCluster = kCluster_;
  // Ping-pong: consumer warpgroup w takes every other tile of its CTA (local
  // tiles w, w + 2, ...) and computes all 128 rows of it (two m64 wgmmas per
  // k-step), so one warpgroup's epilogue overlaps the other's mainloop.  The
  // producer is unchanged: it loads tiles in order, so the two mainloops
  // mostly alternate by themselves.  Cooperative (false): both warpgroups
  // work on every tile, 64 rows each.
  static constexpr bool kPingPong = kPingPong_;
  static constexpr int kSubM = kPingPong ? 2 : 1;  // 64-row slabs per consumer warpgroup
  // Split-K (small problems): launched with clusters of S = 2..8 CTAs along
  // K (S from the launch, %cluster_nctarank); the cluster owns one output
  // tile, CTA r of it computes k-blocks [r*kb/S, (r+1)*kb/S) into fp32,
  // parks the partial tile in its own (then idle) ring, and after a cluster
  // barrier reduces rows [r*128/S, (r+1)*128/S) of the tile by reading the S
  // partials over distributed shared memory in the fixed order 0..S-1, so
  // the result does not depend on timing (deterministic).  No workspace.
  // Not persistent: one tile per cluster, grid = tiles * S.
  static constexpr bool kSplitK = kSplitK_;
  // Stream-K capable (KernelArgs::sk_tiles): cooperative, no cluster, no split.
  // (Not 128x192: choose() never deals it stream-K, so its code is not built.)
  static constexpr bool kStreamK = kCluster == 1 && !kPingPong && !kSplitK && kBN != 192 && !kTransC_ && !kOneSlab_;
  static constexpr int kPartialStride = kBN + 4;  // floats per partial row (pad: 16 B, staggers banks)
  // Consumer warps that release each stage (per CTA of the cluster).
  static constexpr int kReleasers = 4 * (kPingPong || kOneSlab ? 1 : 2);
  static constexpr int kElemBytes = static_cast<int>(sizeof(T));
  static constexpr int kBK = 128 / kElemBytes;          // one 128-byte swizzle row of K
  static constexpr int kKSteps = 4;                      // wgmmas per k-block: 32 bytes of K each
  static constexpr int kConsumers = kOneSlab ? 1 : 2;    // warpgroups doing math
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = kBM * kBK * kElemBytes;  // 16 KB
  // (A one-slab tile's N-major B is one 64-wide box, whatever kBN; a
  // swapped-only width's N-major B whole 64-wide boxes, its last one partly used.)
  static constexpr int kBBytes = (kOneSlab ? slab_b_rows(kBN, kBMN) : tile_b_rows(static_cast<Tile>(kBN), kBMN)) * kBK * kElemBytes;  // 32 KB (kBN 256) / 16 KB
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr Tile kTile = static_cast<Tile>(kBN);  // (a Tile's value is its width)
  static constexpr int kStages = kOneSlab ? slab_stages(kBN, kBMN) : tile_stages(kTile, kBMN);
  // 1024 bytes of slack to align the ring to the 128B-swizzle pattern (1 KB),
  // then a 1 KB block with 2 barriers of 8 bytes per stage, then the
  // epilogue scratch (hopper.h).
  static constexpr bool kTmaEpilogue = kOneSlab || tile_tma_epilogue(kTile);
  // A row of C tiles splits into whole 128-byte TMA boxes (not so the
  // narrower one-slab tiles as called: their stores go through registers).
  static constexpr bool kWholeCBoxes = kBN_ % (128 / static_cast<int>(sizeof(T))) == 0;
  // Registers per thread after setmaxnreg.  The CTA launches with 384 x 168
  // (__launch_bounds__(384, 1)) and setmaxnreg only moves registers within
  // that pool: an .inc waits until .decs have freed enough, so a split that
  // does not fit hangs the consumers (2 x 128 x 240 + 128 x 32 did).
  static constexpr int kConsumerRegs = 232;
  static constexpr int kProducerRegs = 40;
  // (One-slab kernels keep the compiler's allocation: one consumer warpgroup
  // of a 64 x <= 64 tile needs no more.)
  static_assert(kOneSlab || 2 * 128 * kConsumerRegs + 128 * kProducerRegs <= kThreads * 168, "the CTA's launch registers");
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 1024 + (kOneSlab ? kEpiTmaBytes : epilogue_scratch_bytes(kTile));
  static_assert(2 * 8 * kStages <= 1024, "barriers fit their block");
  static_assert(8 * 16 * kEpiPitch * sizeof(T) <= kEpiRowsBytes && kEpiRowsBytes <= epilogue_scratch_bytes(kTile),
                "epilogue scratch: 8 warps x 16 rows");
  static_assert(kSmemBytes == (kOneSlab ? slab_smem_bytes(kBN, kBMN) : tile_smem_bytes(kTile, kBMN)),
                "host and kernel agree on shared memory");
  // wgmma has no transpose for tf32: an M-major tf32 A goes through
  // registers (cooperative configs only); an N-major B needs a 16-bit type.
  static_assert(!kBMN || kElemBytes == 2, "an N-major B needs a 16-bit type");
  static_assert(!kARegs || (!kPingPong && !kSplitK), "register A: cooperative, no split");
  static_assert((kOneSlab && slab_width_index(kBN) >= 0) || kBN == 64 || kBN == 128 || kBN == 144 || kBN == 160 || kBN == 176 || kBN == 192 || kBN == 200 ||
                    kBN == 208 || kBN == 224 || kBN == 232 || kBN == 256,
                "instantiated wgmma N sizes");
  static_assert(!kSwappedOnly || (kTransC_ && kCluster == 1 && (!kBMN || kOneSlab || kAMN)),
                "144-232, one-slab: swapped, no cluster; 144-232 with an N-major B: an M-major A too (TN)");
  static_assert(!kOneSlab || (kElemBytes == 2 && !kPingPong && !kSplitK && kCluster == 1 &&
                              slab_built(kBN, kAMN, kBMN, kTransC_)),
                "one-slab: 16-bit, cooperative whole tiles, no cluster, the layouts of hopper.h's slab_built");
  static_assert(64 % kTBoxRows == 0, "transposed stores divide a 64-column chunk");
  static_assert((kBN != 64 && kBN != 192) || (kCluster == 1 && !kPingPong), "128x64 and 128x192: cooperative, no cluster");
  static_assert(!kSplitK || kBN == 64 || kBN == 128, "split-K: 128x128 or 128x64 tiles");
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs");
  static_assert(!kTransC_ || (kElemBytes == 2 && (kBN == 256 || kSwappedOnly) && !kPingPong && !kSplitK),
                "16-bit transposed-C kernels: cooperative 128x256 tiles or the swapped-only widths");
  static_assert(!kPingPong || kBN == 128, "ping-pong: 128x128 per warpgroup (128 accumulator registers)");
  static_assert(!kSplitK || (kCluster == 1 && !kPingPong), "split-K uses the cluster for K, cooperatively");
  static_assert(!kSplitK || kBM * kPartialStride * 4 <= kStages * kStageBytes, "partial tile fits the ring");
  static_assert(kSmemBytes <= kSmemPerBlockOptin, "shared memory per block on sm_90");
};

// Output element conversions (fp32 accumulator -> T).
template <class T>
struct OutCast;
template <>
struct OutCast<__nv_bfloat16> {
  __device__ __forceinline__ static float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  __device__ __forceinline__ static void store1(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
  __device__ __forceinline__ static uint16_t bits1(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
  __device__ __forceinline__ static void store2(__nv_bfloat16* p, float x, float y) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
  }
};
template <>
struct OutCast<__half> {
  __device__ __forceinline__ static float load(const __half* p) { return __half2float(*p); }
  __device__ __forceinline__ static void store1(__half* p, float x) { *p = __float2half_rn(x); }
  __device__ __forceinline__ static uint16_t bits1(float x) { return __half_as_ushort(__float2half_rn(x)); }
  __device__ __forceinline__ static void store2(__half* p, float x, float y) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
  }
};
template <>
struct OutCast<float> {
  __device__ __forceinline__ static float load(const float* p) { return *p; }
  __device__ __forceinline__ static void store1(float* p, float x) { *p = x; }
  __device__ __forceinline__ static void store2(float* p, float x, float y) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  }
};

// Checked store of one output pair (columns col, col + 1 of a row, the
// second only when has_second): one vector when C's pairs are aligned.
template <class T>
__device__ __forceinline__ void store_pair_checked(T* out, float x, float y, bool has_second, bool pairs_aligned) {
  if (has_second && pairs_aligned) {
    OutCast<T>::store2(out, x, y);
  } else {
    OutCast<T>::store1(out, x);
    if (has_second) OutCast<T>::store1(out + 1, y);
  }
}

// Byte offset of byte `byte` (< 128) of row `row` in a 128B-swizzled tile
// (rows of 128 bytes, 1 KB aligned, as TMA writes and wgmma reads them): the
// 16-byte chunk index is XORed with the row's position in its 8-row group.
__device__ __forceinline__ uint32_t sw128_offset(uint32_t row, uint32_t byte) {
  return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15);
}

// The fused epilogue over a C box in shared memory (`rows` rows of 128
// bytes, 128B-swizzled, as TMA stores it) holding acc + bias rounded to T,
// whose element (r, x) is C[b][row0 + r][col0 + x]: the
// warpgroup's 128 threads take its 16-byte chunks in turn, store pre where
// asked and write act(pre) * mul + residual back in place.  Chunks at or
// past the caller's row_end / col_end are left (TMA clips them); col_end is
// a multiple of the chunk's columns (epilogue_vectors_ok).  A rolled loop:
// unrolled over a thread's 4 chunks (their loads in flight together) it
// compiled 3x slower and spilled in most kernels (docs/fused.md).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <class T>
__device__ __forceinline__ void epilogue_box(const Epilogue& e, uint32_t buf, int rows, int64_t b, int64_t row0,
                                             int64_t col0, int64_t row_end, int64_t col_end, int thread) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  using P = Pack<T, V>;
  static_assert(sizeof(P) == sizeof(uint4), "a 16-byte chunk");
#pragma unroll 1
  for (int q = thread; q < rows * 8; q += 128) {
    const int r = q >> 3, chunk = q & 7;
    const int64_t row = row0 + r, col = col0 + chunk * V;
    if (row >= row_end || col >= col_end) continue;
    const uint32_t addr = buf + sw128_offset(static_cast<uint32_t>(r), static_cast<uint32_t>(chunk * 16));
    const uint4 w = ld_shared_v4_b32(addr);
    P in;
    memcpy(&in, &w, sizeof(w));
    const P out = epilogue_pack<T, V>(e, in, b, row, col);
    uint4 o;
    memcpy(&o, &out, sizeof(o));
    st_shared_v4_b32(addr, o);
  }
}
#endif

// bias[col] and bias[col + 1] where they exist (0 at or past n, or without a bias).
template <class T>
__device__ __forceinline__ void load_bias_pair(const T* bias, int col, int n, float& b0, float& b1) {
  b0 = bias && col < n ? OutCast<T>::load(bias + col) : 0.f;
  b1 = bias && col + 1 < n ? OutCast<T>::load(bias + col + 1) : 0.f;
}

// Two output elements packed into 32-bit words (one word for 16-bit types,
// two for fp32), for the interior epilogue's lane exchange and vector stores.
template <class T>
struct PairBits {  // one word for bf16 / f16, two for fp32, packed by OutCast's pair store
  static constexpr int kWords = static_cast<int>(2 * sizeof(T) / 4);
  __device__ __forceinline__ static void pack(float x, float y, uint32_t (&w)[kWords]) {
    OutCast<T>::store2(reinterpret_cast<T*>(&w[0]), x, y);
  }
};

// Stores 2 * kWords 32-bit words (8 or 16 bytes, aligned) as one vector.
__device__ __forceinline__ void st_global_words(void* p, const uint32_t (&w)[2]) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
}
__device__ __forceinline__ void st_global_words(void* p, const uint32_t (&w)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
}

// The epilogue's TMA-store loops come in two copies, store(std::true_type)
// adding the bias and store(std::false_type) without it: without a bias, the
// bias loads, their predicates and the adds were ~2/3 of the instructions
// that fill a box, which both warpgroups issue at once (docs/hopper.md,
// round 33).  An fp32 C (the tf32 kernels) keeps the one copy with the bias:
// with two, ptxas serialises the mainloop's wgmmas of the cooperative tf32
// kernels (C7514; up to 30% slower, measured; tests/test_sm90_ptxas.py).
template <class Cfg, class Store>
__device__ __forceinline__ void by_bias(const void* bias, Store&& store) {
  if (Cfg::kElemBytes == 4 || bias)
    store(std::true_type{});
  else
    store(std::false_type{});
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A consumer warp is done reading a stage: tell every producer that writes it.
template <int kCluster>
__device__ __forceinline__ void release_stage(uint32_t empty) {
  if constexpr (kCluster == 1) {
    mbar_arrive(empty);
  } else {
#pragma unroll
    for (int r = 0; r < kCluster; ++r) mbar_arrive_cluster(empty, r);
  }
}
#endif

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                     const __grid_constant__ CUtensorMap tmap_c, const KernelArgs args) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = typename Cfg::Elem;
  constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kBK = Cfg::kBK, kStages = Cfg::kStages;
  constexpr int kChunkBytes = 64 * 128;  // one 64-row K-major slab / one 64-wide MN-major chunk

  extern __shared__ uint8_t smem_raw[];
  const uint32_t ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t full_bar = ring + kStages * Cfg::kStageBytes;
  const uint32_t empty_bar = full_bar + 8 * kStages;
  // Epilogue scratch: 1 KB aligned (the ring is, stages are multiples of 1 KB).
  const uint32_t epi_smem = ring + kStages * Cfg::kStageBytes + 1024;
  T* const epi_scratch = reinterpret_cast<T*>(smem_raw + (epi_smem - smem_addr(smem_raw)));

  // Warp-uniform as far as the compiler can tell (a broadcast from lane 0),
  // so what is computed from it (the consumer's slab of each stage, hence the
  // wgmma descriptors) lives in uniform registers: the k-block loop of the
  // 128x256c2 NN kernel has no R2UR and 80 instructions instead of 97
  // (docs/hopper.md, round 12).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  const int wg_thread = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar + 8 * s, 1);
      // Every consumer warp that reads the stage (both warpgroups when
      // cooperative, one when ping-pong), in every CTA of the cluster, releases
      // it (with multicast, the peer's producer writes into this CTA's ring too).
      mbar_init(empty_bar + 8 * s, Cfg::kReleasers * Cfg::kCluster);
    }
    fence_barrier_init();
  }
  if constexpr (Cfg::kCluster > 1) {
    cluster_sync();  // the peer's barriers are initialised before anyone arrives on them
  } else if constexpr (Cfg::kSplitK) {
    __syncthreads();  // barriers are CTA-local; the cluster barrier comes before the reduction
  } else {
    __syncthreads();
  }
  // Work is dealt to clusters; both CTAs of a cluster walk the same sequence
  // of tile pairs (rank picks the row of the pair), so their k-blocks match.
  constexpr bool kClustered = Cfg::kCluster > 1 || Cfg::kSplitK;
  const int rank = Cfg::kCluster > 1 ? static_cast<int>(cluster_ctarank()) : 0;  // row of the M pair
  const int first_unit = kClustered ? static_cast<int>(cluster_id_x()) : static_cast<int>(blockIdx.x);
  const int unit_stride = kClustered ? static_cast<int>(num_clusters_x()) : static_cast<int>(gridDim.x);
  const int unit_rows = (args.tiles_m + Cfg::kCluster - 1) / Cfg::kCluster;
  const int total_units = unit_rows * args.tiles_n * args.batch;
  // Whole tiles start after the stream-K ones.
  const int dp_first = first_unit + (Cfg::kStreamK ? args.sk_tiles : 0);
  // Split-K: this CTA's slice of the k-blocks.
  int kb_begin = 0, kb_end = args.k_blocks;
  if constexpr (Cfg::kSplitK) {
    const int ks = static_cast<int>(cluster_ctarank()), nks = static_cast<int>(cluster_nctarank());
    kb_begin = static_cast<int>(static_cast<int64_t>(args.k_blocks) * ks / nks);
    kb_end = static_cast<int>(static_cast<int64_t>(args.k_blocks) * (ks + 1) / nks);
  }

  if (warpgroup == 0) {
    // ------------------------------------------------------------ producer
    if constexpr (!Cfg::kOneSlab) setmaxnreg_dec<Cfg::kProducerRegs>();
    if (wg_thread == 0) {
      prefetch_tensormap(&tmap_a);
      prefetch_tensormap(&tmap_b);
      int stage = 0;
      uint32_t phase = 0;
      // An operand read once (args.l2_stream) is loaded under L2's evict_first policy.
      const bool hint_a = (args.l2_stream & 1) != 0, hint_b = (args.l2_stream & 2) != 0;
      const uint64_t policy = args.l2_stream ? l2_evict_first_policy() : 0;
      // k-blocks [kb_from, kb_to) of one unit into the ring.
      auto load_unit = [&](int unit, int kb_from, int kb_to) {
        const TileCoord tc = args.raster.coord(unit);
        // With a cluster, a tile row past the matrix (odd tiles_m) still runs:
        // its A boxes are all zero-fill and its stores are masked, but it
        // must load its half of the peer's B.
        const int m0 = (tc.tm * Cfg::kCluster + rank) * kBM, n0 = tc.tn * kBN;
        const int ab = args.a_batched ? tc.b : 0;
        const int bb = args.b_batched ? tc.b : 0;
        for (int kb = kb_from; kb < kb_to; ++kb) {
          const int k0 = kb * kBK;
          const uint32_t full = full_bar + 8 * stage;
          mbar_wait(empty_bar + 8 * stage, phase ^ 1);
          mbar_arrive_expect_tx(full, Cfg::kStageBytes);
          const uint32_t sa = ring + stage * Cfg::kStageBytes;
          const uint32_t sb = sa + Cfg::kABytes;
          if constexpr (!Cfg::kAMN) {
            tma_load_3d(sa, &tmap_a, full, k0, m0, ab, hint_a, policy);
          } else {
#pragma unroll
            for (int i = 0; i < kBM / Cfg::kMNBox; ++i)
              tma_load_3d(sa + i * (kBK * 128), &tmap_a, full, m0 + Cfg::kMNBox * i, k0, ab, hint_a, policy);
          }
          if constexpr (Cfg::kCluster == 1) {
            if constexpr (!Cfg::kBMN) {
              tma_load_3d(sb, &tmap_b, full, k0, n0, bb, hint_b, policy);
            } else {
#pragma unroll
              for (int j = 0; j < (kBN + 63) / 64; ++j)  // (a narrow one-slab tile: one box, its first kBN columns used)
                tma_load_3d(sb + j * kChunkBytes, &tmap_b, full, n0 + 64 * j, k0, bb, hint_b, policy);
            }
          } else {
            // This CTA's half of B (rows / chunks [rank * kBN/2, +kBN/2)) to both CTAs.
            constexpr uint16_t kBoth = 0x3;
            if constexpr (!Cfg::kBMN) {
              const int half = rank * (kBN / 2);
              tma_load_3d_multicast(sb + half * 128, &tmap_b, full, k0, n0 + half, bb, kBoth, hint_b, policy);
            } else {
#pragma unroll
              for (int jj = 0; jj < kBN / 128; ++jj) {
                const int j = rank * (kBN / 128) + jj;
                tma_load_3d_multicast(sb + j * kChunkBytes, &tmap_b, full, n0 + 64 * j, k0, bb, kBoth, hint_b, policy);
              }
            }
          }
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      };
      // (Without stream-K tiles the run is empty: skipping it spares the
      // first load two 64-bit divisions.)
      if constexpr (Cfg::kStreamK) {
        if (args.sk_tiles > 0) {
          SkRun run{sk_run_begin(args.sk_tiles, args.k_blocks, blockIdx.x, gridDim.x),
                    sk_run_begin(args.sk_tiles, args.k_blocks, blockIdx.x + 1, gridDim.x)};
          int unit, kb0, kb1;
          while (sk_prev(run, args.k_blocks, unit, kb0, kb1)) load_unit(unit, kb0, kb1);
        }
      }
      for (int unit = dp_first; unit < total_units; unit += unit_stride) load_unit(unit, kb_begin, kb_end);
    }
  } else {
    // ------------------------------------------------------------ consumers
    if constexpr (!Cfg::kOneSlab) setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int cw = warpgroup - 1;  // cooperative: which 64-row half of each tile; ping-pong: which tiles
    const int warp = wg_thread / 32, lane = wg_thread % 32;
    constexpr int kSubM = Cfg::kSubM;
    float acc[kSubM][kBN / 2];
#pragma unroll
    for (int m = 0; m < kSubM; ++m)
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i) acc[m][i] = 0.f;  // never read (first wgmma has scale-d 0), but defined

    // Descriptor constants.  K-major: SBO = 8 rows * 128 B; K-step = +32 B.
    // MN-major: LBO = chunk stride, SBO = 8 K-rows * 128 B; K-step = +16 rows.
    constexpr uint32_t kALbo = Cfg::kAMN ? kChunkBytes : 16;
    constexpr uint32_t kBLbo = Cfg::kBMN ? kChunkBytes : 16;
    constexpr uint32_t kAStep = Cfg::kAMN ? 16 * 128 : 32;
    constexpr uint32_t kBStep = Cfg::kBMN ? 16 * 128 : 32;
    static_assert(!Cfg::kAMN || Cfg::kARegs || kBK == 64, "MN-major chunk is 64 K-rows");

    int stage = 0;
    uint32_t phase = 0;
    // Ping-pong: step the ring position over the other warpgroup's tile
    // (k_blocks stages further, flipping the phase at every wrap).
    const int skip_stages = args.k_blocks % kStages;
    const uint32_t skip_phase = static_cast<uint32_t>(args.k_blocks / kStages) & 1u;
    auto skip_tile = [&]() {
      stage += skip_stages;
      phase ^= skip_phase;
      if (stage >= kStages) {
        stage -= kStages;
        phase ^= 1u;
      }
    };
    // The mainloop over k-blocks [kb_from, kb_to) of one tile: waits on each
    // stage, issues its wgmmas, keeps one k-block's group in flight and hands
    // the stage before it back to the producer.  Returns the last stage used
    // (released by finish_mainloop once its wgmmas are done).
    // Register A (tf32, M-major A): this thread's four A elements of a k8
    // step (ptx.cuh's WgmmaRegsTf32: rows 16 warp + g (+8), columns t (+4),
    // g = lane / 4, t = lane % 4) in the warpgroup's 64-row slab, which is
    // two 4 KB chunks of 32 rows of M x 32 rows of K, 128B-swizzled: element
    // (m, k) sits at (m / 32) * 4 KB + k * 128 + (((m % 32) / 4 ^ k % 8) * 16)
    // + (m % 4) * 4.  Offsets of a[0..3] for k step 0; step ks adds ks * 1 KB.
    // (A 32-bit load of a warp hits 16 chunks over 8 positions: 2-way
    // bank conflicts, 2 wavefronts.)
    uint32_t a_frag_off[4] = {0, 0, 0, 0};
    if constexpr (Cfg::kARegs) {
      const uint32_t g = lane / 4, t = lane % 4;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t hi = i & 1, kh = i >> 1;  // row + 8, column + 4
        const uint32_t k = t + 4 * kh;
        const uint32_t chunk = 4 * (warp & 1) + 2 * hi + g / 4;
        a_frag_off[i] = (warp >> 1) * 4096 + k * 128 + ((chunk ^ k) << 4) + (g % 4) * 4;
      }
    }
    auto mainloop = [&](int kb_from, int kb_to) {
      int prev_stage = 0;
      if constexpr (Cfg::kARegs) {
        // One commit group per k8 step, at most two in flight: the wait after
        // issuing step s retires step s - 1, which frees its fragment
        // registers (step s + 1 reuses them) and, at s = 0 of a k-block,
        // the previous k-block's stage.
        uint32_t frag[2][4];
        for (int kb = kb_from; kb < kb_to; ++kb) {
          mbar_wait(full_bar + 8 * stage, phase);
          const uint32_t sa = ring + stage * Cfg::kStageBytes + cw * kChunkBytes;
          const uint32_t sb = ring + stage * Cfg::kStageBytes + Cfg::kABytes;
#pragma unroll
          for (int ks = 0; ks < Cfg::kKSteps; ++ks) {
            uint32_t(&f)[4] = frag[ks & 1];
#pragma unroll
            for (int i = 0; i < 4; ++i) f[i] = ld_shared_b32(sa + a_frag_off[i] + ks * 1024);
            wgmma_fence();
            WgmmaRegsTf32<kBN>::run(acc[0], f, make_smem_desc_sw128(sb + ks * 32, 16, 1024),
                                    (kb > kb_from || ks > 0) ? 1 : 0);
            wgmma_commit_group();
            wgmma_wait_group<1>();
            if (ks == 0 && kb > kb_from && lane == 0) release_stage<Cfg::kCluster>(empty_bar + 8 * prev_stage);
          }
          prev_stage = stage;
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
        return prev_stage;
      } else {
        for (int kb = kb_from; kb < kb_to; ++kb) {
          mbar_wait(full_bar + 8 * stage, phase);
          // 64 rows of A per wgmma: the s-th 64-row slab (K-major) or the s-th
          // 64-wide M chunk (MN-major), both s * 8 KB into the stage, with
          // s = cw (cooperative) or each of 0, 1 (ping-pong).
          const uint32_t sa0 = ring + stage * Cfg::kStageBytes + (Cfg::kPingPong ? 0 : cw * kChunkBytes);
          const uint32_t sb = ring + stage * Cfg::kStageBytes + Cfg::kABytes;
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < Cfg::kKSteps; ++ks) {
            const uint64_t db = make_smem_desc_sw128(sb + ks * kBStep, kBLbo, 1024);
#pragma unroll
            for (int m = 0; m < kSubM; ++m) {
              const uint64_t da = make_smem_desc_sw128(sa0 + m * kChunkBytes + ks * kAStep, kALbo, 1024);
              Wgmma<T, kBN>::template run<Cfg::kAMN ? 1 : 0, Cfg::kBMN ? 1 : 0>(acc[m], da, db,
                                                                                (kb > kb_from || ks > 0) ? 1 : 0);
            }
          }
          wgmma_commit_group();
          // Keep this k-block's group in flight; the previous one is done, so
          // its stage can go back to the producer.
          wgmma_wait_group<1>();
          if (kb > kb_from && lane == 0) release_stage<Cfg::kCluster>(empty_bar + 8 * prev_stage);
          prev_stage = stage;
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
        return prev_stage;
      }
    };
    auto finish_mainloop = [&](int prev_stage) {
      wgmma_wait_group<0>();
#pragma unroll
      for (int m = 0; m < kSubM; ++m) fence_accumulators(acc[m]);
      if (lane == 0) release_stage<Cfg::kCluster>(empty_bar + 8 * prev_stage);
    };

    // ------------------------------------------------------------ epilogue
    // TMA-store boxes this warpgroup has filled (all tiles): box i uses
    // buffer i % 2, so a buffer is refilled only after the box stored from
    // it before (two boxes ago) has been read.  With an even number of boxes
    // per tile that is the box's index in its tile; with one (bf16/f16
    // 128x64) a count carried over the tiles.
    int epi_boxes = 0;
    // Accumulator fragment of m64nNk*: thread (warp w, lane l) holds, for
    // each 8-column group j, rows 16w + l/4 (+8) and columns 8j + 2(l%4) (+1):
    //   acc[4j + 0..1] -> row r, cols c, c+1;  acc[4j + 2..3] -> row r+8.
    auto epilogue = [&](const TileCoord& tc, int tile_m) {
      const int col_base = tc.tn * kBN + 2 * (lane % 4);
      T* c = static_cast<T*>(args.c) + static_cast<int64_t>(tc.b) * args.c_batch_stride;
      const T* bias = static_cast<const T*>(args.bias);
      // First row of the m-th 64-row slab this warpgroup stores.
      auto slab_row = [&](int m) { return static_cast<int64_t>(tile_m) * kBM + (Cfg::kPingPong ? m : cw) * 64; };
      if constexpr (Cfg::kCTrans) {
        if (Cfg::kSwappedOnly || args.c_trans) {
          // C^T: this thread's rows are columns of the caller's C (and index
          // the bias), its columns are C's rows.
          if constexpr (Cfg::kTmaEpilogue) {
            if (args.c_tma) {
              // Through TMA (tmap_c in the caller's coordinates: 128 bytes of
              // columns x 64 rows per box, 32 columns of fp32 or 64 of a
              // 16-bit type): per 64 of this tile's columns, the
              // warpgroup's 64 rows make two fp32 boxes (warps 0-1 writing
              // the first 32 columns into buffer 0, warps 2-3 the other 32
              // into buffer 1, both refilled only once TMA has read the
              // previous pair) or one 16-bit box (the buffers alternate, as
              // in the row-major store below).  Each element is transposed
              // into the 128B-swizzled box: a warp store covers 4 box rows x
              // 8 columns, 4 or 8 distinct 16-byte chunks, no bank conflict.
              constexpr int kTBoxes = Cfg::kElemBytes == 4 ? 2 : 1;  // boxes per 64 columns
              const uint32_t bar = 5 + cw;
              const int slab0 = static_cast<int>(slab_row(0));  // the caller's first column of this slab
              float bv[2] = {0.f, 0.f};
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int col = slab0 + warp * 16 + lane / 4 + 8 * h;
                if (bias && col < args.M) bv[h] = OutCast<T>::load(bias + col);
              }
              auto store_tile = [&](auto with_bias) {
                constexpr bool kBias = decltype(with_bias)::value;
#pragma unroll
                for (int jc = 0; jc < (kBN + 63) / 64; ++jc) {
                  const int parity = kTBoxes == 2 ? 0 : epi_boxes++ & 1;
                  const uint32_t buf = epi_smem + (2 * cw + (kTBoxes == 2 ? warp >> 1 : parity)) * kCBoxBytes;
                  if (wg_thread == 0) bulk_wait_group_read<kTBoxes == 2 ? 0 : 1>();
                  named_barrier_sync(bar, 128);
#pragma unroll
                  for (int jj = 0; jj < 8; ++jj) {
                    if (8 * jc + jj >= kBN / 8) break;  // the narrow widths' last chunk
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                      const uint32_t r = static_cast<uint32_t>(8 * jj + 2 * (lane % 4) + e);  // box row
#pragma unroll
                      for (int h = 0; h < 2; ++h) {
                        const int box_col = (kTBoxes == 2 ? (warp & 1) * 16 : warp * 16) + lane / 4 + 8 * h;
                        const uint32_t byte = static_cast<uint32_t>(box_col * Cfg::kElemBytes);
                        float x = acc[0][4 * (8 * jc + jj) + 2 * h + e];
                        if constexpr (kBias) x += bv[h];
                        if constexpr (Cfg::kElemBytes == 4)
                          st_shared_b32(buf + sw128_offset(r, byte), __float_as_uint(x));
                        else
                          st_shared_b16(buf + sw128_offset(r, byte), OutCast<T>::bits1(x));
                      }
                    }
                  }
                  fence_proxy_async_smem();
                  named_barrier_sync(bar, 128);
                  if (wg_thread == 0) {
                    const int row0 = tc.tn * kBN + 64 * jc;
                    if constexpr (kTBoxes == 2) {
                      tma_store_3d(&tmap_c, epi_smem + 2 * cw * kCBoxBytes, slab0, row0, tc.b);
                      tma_store_3d(&tmap_c, epi_smem + (2 * cw + 1) * kCBoxBytes, slab0 + 32, row0, tc.b);
                    } else {
                      // A whole chunk of 64 of C's rows, or the 8 / 16 / 32 / 40 left at a narrow tile's end.
                      constexpr int kRowsLeft = kBN % 64 == 0 ? 64 : kBN % 64;
                      const int rows = 64 * (jc + 1) <= kBN ? 64 : kRowsLeft;
#pragma unroll
                      for (int s = 0; s < 64 / Cfg::kTBoxRows; ++s)
                        if (s * Cfg::kTBoxRows < rows)
                          tma_store_3d(&tmap_c, buf + s * Cfg::kTBoxRows * 128, slab0, row0 + s * Cfg::kTBoxRows, tc.b);
                    }
                    bulk_commit_group();
                  }
                }
              };
              by_bias<Cfg>(bias, store_tile);
              return;
            }
          }
          // Checked stores: for one register the 8 lanes of a column group
          // write 8 consecutive elements of a C row (one 32-byte sector), 4
          // rows per warp store.
          const int64_t row_base = slab_row(0) + warp * 16 + lane / 4;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = row_base + 8 * h;
            if (r >= args.M) continue;
            const float bv = bias ? OutCast<T>::load(bias + r) : 0.f;
            T* const out = c + r;
#pragma unroll
            for (int j = 0; j < kBN / 8; ++j) {
              const int col = col_base + 8 * j;
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (col + e < args.N)
                  OutCast<T>::store1(out + static_cast<int64_t>(col + e) * args.c_row_stride, acc[0][4 * j + 2 * h + e] + bv);
            }
          }
          return;
        }
      }
      // TMA store: each consumer warpgroup writes its 64-row slab box by box
      // (64 rows x 128 bytes of C) into one of its two shared-memory buffers
      // in the 128B-swizzled layout (conflict-free: the 8 rows a warp store
      // touches land on 8 different 16-byte chunk positions), and one thread
      // hands the box to TMA, which writes it (clipped at M and N) while the
      // next box is filled.  Before refilling a buffer, that thread waits
      // until TMA has read the box stored from it two boxes ago (possibly in
      // the previous tile).  (Whole boxes only: the host leaves args.c_tma
      // off for the narrower one-slab tiles.)
      if constexpr (Cfg::kTmaEpilogue && Cfg::kWholeCBoxes) {
        if (args.c_tma) {
          constexpr int kBoxCols = 128 / Cfg::kElemBytes;  // 64 bf16 / f16, 32 fp32
          constexpr int kBoxes = kBN / kBoxCols;
          const uint32_t bar = 5 + cw;  // named barriers 5, 6: one per consumer warpgroup
          auto store_tile = [&](auto with_bias) {
            constexpr bool kBias = decltype(with_bias)::value;
#pragma unroll
            for (int m = 0; m < kSubM; ++m) {
              const int row0 = static_cast<int>(slab_row(m));
#pragma unroll
              for (int bx = 0; bx < kBoxes; ++bx) {
                const int parity = kBoxes % 2 == 0 ? bx & 1 : epi_boxes++ & 1;
                const uint32_t buf = epi_smem + (2 * cw + parity) * kCBoxBytes;
                if (wg_thread == 0) bulk_wait_group_read<1>();
                named_barrier_sync(bar, 128);
#pragma unroll
                for (int jj = 0; jj < kBoxCols / 8; ++jj) {
                  const int j = bx * (kBoxCols / 8) + jj;
                  const int col = col_base + 8 * j;
                  float b0 = 0.f, b1 = 0.f;
                  if constexpr (kBias) load_bias_pair(bias, col, args.N, b0, b1);
                  const uint32_t byte = static_cast<uint32_t>((8 * jj + 2 * (lane % 4)) * Cfg::kElemBytes);
#pragma unroll
                  for (int h = 0; h < 2; ++h) {
                    const uint32_t r = static_cast<uint32_t>(warp * 16 + lane / 4 + 8 * h);
                    const uint32_t addr = buf + sw128_offset(r, byte);
                    float x = acc[m][4 * j + 2 * h], y = acc[m][4 * j + 2 * h + 1];
                    if constexpr (kBias) x += b0, y += b1;
                    if constexpr (Cfg::kElemBytes == 4) {
                      st_shared_v2(addr, x, y);
                    } else {
                      uint32_t w[1];
                      PairBits<T>::pack(x, y, w);
                      st_shared_b32(addr, w[0]);
                    }
                  }
                }
                if constexpr (Cfg::kPingPong) {
                  if (args.epi_on) {
                    named_barrier_sync(bar, 128);
                    epilogue_box<T>(args.epi, buf, 64, tc.b, row0, tc.tn * kBN + bx * kBoxCols, args.M, args.N,
                                    wg_thread);
                  }
                }
                fence_proxy_async_smem();
                named_barrier_sync(bar, 128);
                if (wg_thread == 0) {
                  tma_store_3d(&tmap_c, buf, tc.tn * kBN + bx * kBoxCols, row0, tc.b);
                  bulk_commit_group();
                }
              }
            }
          };
          by_bias<Cfg>(bias, store_tile);
          return;
        }
      }
      // Interior tile (every row of this warpgroup's slabs < M, every column
      // < N) with 4-column-aligned C: no per-element checks, and lanes l and
      // l ^ 1 swap one pair so that each lane holds 4 consecutive columns of
      // its row (8-byte stores for 16-bit types, 16-byte for fp32; a warp's
      // store fills whole 32-byte sectors).  Even lane 2p of a quad keeps its
      // pair of 8-column group 2i and takes lane 2p+1's: columns 16i + 4p ..
      // +3; odd lane 2p+1 keeps its pair of group 2i+1 and takes lane 2p's:
      // columns 16i + 8 + 4p .. +3.
      // C's rows not 4-column aligned (e.g. an odd N): fragment-order stores
      // would be 2-4 bytes each, a warp's store spread over 8 rows and 8
      // partly written sectors.  Instead each warp passes its 16 rows through
      // shared memory, 32 columns at a time, and stores them row by row: the
      // 32 lanes on 32 consecutive columns (64 or 128 contiguous bytes).
      // (32-column chunks: the narrower one-slab widths store checked.)
      if (kBN % 32 == 0 && args.c_via_smem) {
        T* const rows_smem = epi_scratch + (cw * 4 + warp) * (16 * kEpiPitch);
        const int frag_row = lane / 4, frag_col = 2 * (lane % 4);
#pragma unroll
        for (int m = 0; m < kSubM; ++m) {
          const int64_t row0 = slab_row(m) + warp * 16;
          const int64_t rows_left = args.M - row0;  // may be <= 0 (rows past M)
#pragma unroll
          for (int ch = 0; ch < kBN / 32; ++ch) {
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const int j = 4 * ch + jj;
              const int col = col_base + 8 * j;
              float b0, b1;
              load_bias_pair(bias, col, args.N, b0, b1);
#pragma unroll
              for (int h = 0; h < 2; ++h)
                OutCast<T>::store2(rows_smem + (frag_row + 8 * h) * kEpiPitch + 8 * jj + frag_col,
                                   acc[m][4 * j + 2 * h] + b0, acc[m][4 * j + 2 * h + 1] + b1);
            }
            __syncwarp();
            const int col = tc.tn * kBN + 32 * ch + lane;
            if (col < args.N) {
              T* out = c + row0 * args.c_row_stride + col;
#pragma unroll
              for (int r = 0; r < 16; ++r)
                if (r < rows_left) out[r * args.c_row_stride] = rows_smem[r * kEpiPitch + lane];
            }
            __syncwarp();  // the next chunk overwrites the scratch
          }
        }
        return;
      }
      const int64_t slab_end = static_cast<int64_t>(tile_m) * kBM + (Cfg::kPingPong ? kBM : (cw + 1) * 64);
      if (kBN % 16 == 0 && args.c_quads_aligned && slab_end <= args.M && tc.tn * kBN + kBN <= args.N) {
        using Bits = PairBits<T>;
        constexpr int kW = Bits::kWords;
        const int quad_lane = lane % 4;
        const bool odd = (quad_lane & 1) != 0;
        const int lane_col = tc.tn * kBN + 8 * (quad_lane & 1) + 4 * (quad_lane >> 1);
        T* rows[kSubM][2];
#pragma unroll
        for (int m = 0; m < kSubM; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            rows[m][h] = c +
                         (slab_row(m) + warp * 16 + lane / 4 + 8 * h) * args.c_row_stride +
                         lane_col;
#pragma unroll
        for (int i = 0; i < kBN / 16; ++i) {
          float bx[2] = {0.f, 0.f}, by[2] = {0.f, 0.f};
          if (bias) {
#pragma unroll
            for (int g = 0; g < 2; ++g) {
              bx[g] = OutCast<T>::load(bias + col_base + 8 * (2 * i + g));
              by[g] = OutCast<T>::load(bias + col_base + 8 * (2 * i + g) + 1);
            }
          }
#pragma unroll
          for (int m = 0; m < kSubM; ++m) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t p0[kW], p1[kW];  // this lane's pairs of groups 2i and 2i+1
              Bits::pack(acc[m][4 * (2 * i) + 2 * h] + bx[0], acc[m][4 * (2 * i) + 2 * h + 1] + by[0], p0);
              Bits::pack(acc[m][4 * (2 * i + 1) + 2 * h] + bx[1], acc[m][4 * (2 * i + 1) + 2 * h + 1] + by[1], p1);
              uint32_t out[2 * kW];
#pragma unroll
              for (int w = 0; w < kW; ++w) {
                const uint32_t recv = __shfl_xor_sync(0xffffffffu, odd ? p0[w] : p1[w], 1);
                out[w] = odd ? recv : p0[w];
                out[kW + w] = odd ? p1[w] : recv;
              }
              st_global_words(rows[m][h] + 16 * i, out);
            }
          }
        }
        return;
      }
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const int col = col_base + 8 * j;
        if (col < args.N) {
          const bool has_second = col + 1 < args.N;
          float b0, b1;
          load_bias_pair(bias, col, args.N, b0, b1);
#pragma unroll
          for (int m = 0; m < kSubM; ++m) {
            const int64_t row0 = slab_row(m) + warp * 16 + lane / 4;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int64_t row = row0 + 8 * h;
              if (row < args.M) {
                store_pair_checked(c + row * args.c_row_stride + col, acc[m][4 * j + 2 * h] + b0,
                                   acc[m][4 * j + 2 * h + 1] + b1, has_second, args.c_pairs_aligned != 0);
              }
            }
          }
        }
      }
    };

    // ------------------------------------------------------------ stream-K pieces
    if constexpr (Cfg::kStreamK) {
      // A warpgroup's 64-row half of a partial tile: kBN / 8 float4 per
      // thread, stored thread-interleaved (float4 q of thread t at q * 128 + t)
      // in the fragment order, so writer and owner need no row mapping and
      // every access of a warp covers 512 contiguous bytes.
      constexpr int kQuads = kBN / 8;
      const uint32_t sk_bar = 3 + cw;  // named barriers 3, 4: one per consumer warpgroup
      auto slot = [&](int cta) {
        return reinterpret_cast<float4*>(args.sk_partials) + (static_cast<int64_t>(cta) * 2 + cw) * (kQuads * 128);
      };
      SkRun run{0, 0};
      if (args.sk_tiles > 0)
        run = SkRun{sk_run_begin(args.sk_tiles, args.k_blocks, blockIdx.x, gridDim.x),
                    sk_run_begin(args.sk_tiles, args.k_blocks, blockIdx.x + 1, gridDim.x)};
      int unit, kb0, kb1;
      while (sk_prev(run, args.k_blocks, unit, kb0, kb1)) {
        const TileCoord tc = args.raster.coord(unit);
        finish_mainloop(mainloop(kb0, kb1));
        if (kb1 < args.k_blocks) {
          // Not the tile's end: always this CTA's first piece; park it.
          float4* dst = slot(blockIdx.x);
#pragma unroll
          for (int q = 0; q < kQuads; ++q)
            __stcg(dst + q * 128 + wg_thread, make_float4(acc[0][4 * q], acc[0][4 * q + 1], acc[0][4 * q + 2], acc[0][4 * q + 3]));
          named_barrier_sync(sk_bar, 128);
          if (wg_thread == 0) {
            __threadfence();
            st_release_gpu(args.sk_flags + 2 * blockIdx.x + cw, 1);
          }
          continue;
        }
        if (kb0 > 0) {
          // The owner: the earlier pieces are the last pieces of the previous
          // CTAs' runs, from the run holding the tile's first k-block up to
          // this CTA's (stream_k.h).
          const int first = sk_first_run(args.sk_tiles, args.k_blocks, unit, gridDim.x);
          const int last = static_cast<int>(blockIdx.x) - 1;
          // The warpgroup's threads poll the flags side by side (a tile can
          // have dozens of pieces when tiles are few and K is deep).
          for (int j = first + wg_thread; j <= last; j += 128) {
            const int* flag = args.sk_flags + 2 * j + cw;
            while (ld_acquire_gpu(flag) == 0) {
            }
          }
          named_barrier_sync(sk_bar, 128);
          // Then the partials, in k order, kU of them in flight at a time
          // (more for narrow tiles, whose accumulators leave registers free).
          constexpr int kU = kQuads <= 8 ? 4 : kQuads <= 16 ? 2 : 1;
          for (int j0 = first; j0 <= last; j0 += kU) {
            float4 v[kU][kQuads];
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              const float4* src = slot(j0 + u <= last ? j0 + u : j0);
#pragma unroll
              for (int q = 0; q < kQuads; ++q) v[u][q] = __ldcg(src + q * 128 + wg_thread);
            }
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              if (j0 + u > last) break;
#pragma unroll
              for (int q = 0; q < kQuads; ++q) {
                acc[0][4 * q] += v[u][q].x;
                acc[0][4 * q + 1] += v[u][q].y;
                acc[0][4 * q + 2] += v[u][q].z;
                acc[0][4 * q + 3] += v[u][q].w;
              }
            }
          }
        }
        epilogue(tc, tc.tm);
      }
    }

    // ------------------------------------------------------------ whole tiles
    // Ping-pong mainloop order: warpgroup w starts the mainloop of its local
    // tile j only after the other one has issued (waited on every `full`
    // barrier of) local tile j - 1, through named barrier 1 + w.  Besides
    // alternating the two mainloops, this keeps each `full` barrier at most
    // one phase behind the position a warpgroup waits for, so the parity
    // wait cannot be fooled by a phase two laps old.  Every arrive has its
    // sync: a warpgroup arrives only if the next local tile exists, and syncs
    // only if the previous one did.
    constexpr uint32_t kOrderThreads = 256;
    int unit = dp_first;
    int local = 0;  // this CTA's local tile index
    if constexpr (Cfg::kPingPong) {
      if (cw == 1) {
        skip_tile();
        unit += unit_stride;
        local = 1;
      }
    }
    constexpr int kUnitSteps = Cfg::kPingPong ? 2 : 1;
    for (; unit < total_units; unit += kUnitSteps * unit_stride, local += kUnitSteps) {
      const TileCoord tc = args.raster.coord(unit);
      const int tile_m = tc.tm * Cfg::kCluster + rank;
      if constexpr (Cfg::kPingPong) {
        if (local > 0) named_barrier_sync(1 + cw, kOrderThreads);
      }
      const int prev_stage = mainloop(kb_begin, kb_end);
      if constexpr (Cfg::kPingPong) {
        if (unit + unit_stride < total_units) named_barrier_arrive(1 + (cw ^ 1), kOrderThreads);
      }
      finish_mainloop(prev_stage);
      if constexpr (Cfg::kPingPong) skip_tile();  // the other warpgroup's next tile

      if constexpr (Cfg::kSplitK) {
        // Park the fp32 partial in the ring (row-major, kPartialStride floats
        // per row).  Every TMA write into the ring has landed (each stage's
        // `full` was waited on) and this CTA loads nothing more, but the other
        // consumer warpgroup may still be reading the last stages: wait for it.
        named_barrier_sync(1, 256);
        const int prow = cw * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          const int pcol = 8 * j + 2 * (lane % 4);
#pragma unroll
          for (int h = 0; h < 2; ++h)
            st_shared_v2(ring + ((prow + 8 * h) * Cfg::kPartialStride + pcol) * 4, acc[0][4 * j + 2 * h],
                         acc[0][4 * j + 2 * h + 1]);
        }
        continue;  // one tile per cluster; the reduction follows the cluster barrier below
      }
      epilogue(tc, tile_m);
    }
    // The last boxes' global writes are done before the CTA exits.
    if (Cfg::kTmaEpilogue && args.c_tma && wg_thread == 0) bulk_wait_group<0>();
  }
  if constexpr (Cfg::kCluster > 1) {
    // No CTA may exit while its peer can still arrive on its barriers or
    // multicast into its shared memory.
    __syncwarp();
    cluster_sync();
  }
  if constexpr (Cfg::kSplitK) {
    // Every CTA's partial is in its shared memory (release/acquire of the
    // cluster barrier makes it visible to the peers).
    __syncwarp();
    cluster_sync();
    if (warpgroup > 0 && first_unit < total_units) {
      const int S = static_cast<int>(cluster_nctarank());
      const int r = static_cast<int>(cluster_ctarank());
      const int rows = kBM / S;  // S divides 128
      const TileCoord tc = args.raster.coord(first_unit);
      T* c = static_cast<T*>(args.c) + static_cast<int64_t>(tc.b) * args.c_batch_stride;
      const T* bias = static_cast<const T*>(args.bias);
      const int t = threadIdx.x - 128;
      constexpr int kQuads = kBN / 4;
      for (int q = t; q < rows * kQuads; q += 256) {
        const int prow = r * rows + q / kQuads, pcol = 4 * (q % kQuads);
        const uint32_t addr = ring + (prow * Cfg::kPartialStride + pcol) * 4;
        float4 sum = ld_shared_cluster_v4(addr, 0);
        for (int src = 1; src < S; ++src) {  // fixed order: deterministic
          const float4 v = ld_shared_cluster_v4(addr, static_cast<uint32_t>(src));
          sum.x += v.x;
          sum.y += v.y;
          sum.z += v.z;
          sum.w += v.w;
        }
        const int64_t row = static_cast<int64_t>(tc.tm) * kBM + prow;
        const int col0 = tc.tn * kBN + pcol;
        if (row >= args.M) continue;
        T* out = c + row * args.c_row_stride;
        const float vals[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int col = col0 + e;
          if (col >= args.N) break;
          const bool has_second = col + 1 < args.N;
          float x = vals[e], y = vals[e + 1];
          if (bias) {
            x += OutCast<T>::load(bias + col);
            if (has_second) y += OutCast<T>::load(bias + col + 1);
          }
          store_pair_checked(out + col, x, y, has_second, args.c_pairs_aligned != 0);
        }
      }
    }
    // No CTA may exit (freeing its shared memory) while a peer still reads it.
    __syncwarp();
    cluster_sync();
  }
#else
  // Built for an architecture without sm_90a features: never launched
  // (hopper_can_run checks the device), but trap loudly if it ever is.
  __trap();
#endif
}

// ------------------------------------------------------------------ host side

// fp32 operands load as TFLOAT32: TMA rounds each value to tf32 to nearest
// (ties to even, the 13 low bits cleared; measured on an H100, docs/hopper.md
// round 24) on its way into shared memory, as cuBLAS's tf32 rounds both
// operands; wgmma itself would truncate.  The rounding costs nothing
// measurable.  C's map (the epilogue's stores) stays FLOAT32: every bit kept.
template <class T>
constexpr CUtensorMapDataType tma_dtype(bool operand) {
  return std::is_same<T, __nv_bfloat16>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : std::is_same<T, __half>::value      ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
         : operand                             ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32
                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

// Builds both tensor maps and launches one instantiation.  hopper_can_run has
// already checked alignment, strides, sizes and the device.
template <class Cfg>
const char* launch_sm90(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, const Choice& c,
                        void* workspace) {
  using T = typename Cfg::Elem;
  constexpr int es = Cfg::kElemBytes;
  const bool a_batched = p.batch > 1 && p.a.batch_stride != 0;
  const bool b_batched = p.batch > 1 && p.b.batch_stride != 0;

  OperandMapSpec sa{};
  sa.dtype = tma_dtype<T>(true);
  sa.elem_bytes = es;
  sa.ptr = p.a.ptr;
  sa.batch = a_batched ? static_cast<uint64_t>(p.batch) : 1;
  sa.batch_stride = a_batched ? static_cast<uint64_t>(p.a.batch_stride) : 0;
  if (!Cfg::kAMN) {  // [M][K], K contiguous
    sa.inner = p.K, sa.outer = p.M, sa.outer_stride = p.a.row_stride;
    sa.box_inner = Cfg::kBK, sa.box_outer = Cfg::kBM;
  } else {  // [K][M], M contiguous
    sa.inner = p.M, sa.outer = p.K, sa.outer_stride = p.a.col_stride;
    sa.box_inner = Cfg::kMNBox, sa.box_outer = Cfg::kBK;
  }
  OperandMapSpec sb{};
  sb.dtype = tma_dtype<T>(true);
  sb.elem_bytes = es;
  sb.ptr = p.b.ptr;
  sb.batch = b_batched ? static_cast<uint64_t>(p.batch) : 1;
  sb.batch_stride = b_batched ? static_cast<uint64_t>(p.b.batch_stride) : 0;
  if (!Cfg::kBMN) {  // [N][K], K contiguous (column-major B)
    sb.inner = p.K, sb.outer = p.N, sb.outer_stride = p.b.col_stride;
    sb.box_inner = Cfg::kBK, sb.box_outer = Cfg::kBN / Cfg::kCluster;  // a cluster splits B's rows
  } else {  // [K][N], N contiguous (row-major B)
    sb.inner = p.N, sb.outer = p.K, sb.outer_stride = p.b.row_stride;
    sb.box_inner = 64, sb.box_outer = Cfg::kBK;
  }
  CUtensorMap map_a, map_b;
  if (const char* e = encode_operand_map(&map_a, sa)) return e;
  if (const char* e = encode_operand_map(&map_b, sb)) return e;

  auto kernel = sm90_gemm_kernel<Cfg>;
  // The dynamic shared-memory opt-in is per device; remember which devices
  // this instantiation was raised on (devices 0..63; others set it every call).
  static std::atomic<uint64_t> raised{0};
  if (!raise_smem_limit(kernel, Cfg::kSmemBytes, raised))
    return "sm90: cannot raise the kernel's dynamic shared-memory limit";

  KernelArgs args{};
  args.M = static_cast<int>(p.M);
  args.N = static_cast<int>(p.N);
  args.K = static_cast<int>(p.K);
  args.batch = static_cast<int>(p.batch);
  args.tiles_m = static_cast<int>((p.M + Cfg::kBM - 1) / Cfg::kBM);
  args.tiles_n = static_cast<int>((p.N + Cfg::kBN - 1) / Cfg::kBN);
  args.k_blocks = static_cast<int>((p.K + Cfg::kBK - 1) / Cfg::kBK);
  args.a_batched = a_batched;
  args.b_batched = b_batched;
  // Operands L2 need not keep (docs/skinny.md, "Streamed operands"): read
  // by one CTA, or by at most 4 whose tiles all run in one wave (they read
  // each k-block at nearly the same time).  A's rows are read by every tile
  // column, B's columns by every tile row (a cluster's pair of rows shares
  // one read of B), a broadcast operand again in every batch.
  {
    const int64_t ctas = static_cast<int64_t>(args.tiles_m) * args.tiles_n * p.batch * (Cfg::kSplitK ? c.split_k : 1);
    const auto streamed = [&](int64_t readers) { return readers == 1 || (readers <= 4 && ctas <= dev.num_sms); };
    const int64_t a_readers = static_cast<int64_t>(args.tiles_n) * (a_batched ? 1 : p.batch);
    const int64_t b_readers = static_cast<int64_t>((args.tiles_m + Cfg::kCluster - 1) / Cfg::kCluster) * (b_batched ? 1 : p.batch);
    args.l2_stream = l2_stream_bits(streamed(a_readers), streamed(b_readers));
  }
  // Every group of n columns starting at a multiple of n (in every row and
  // batch) may be stored as one vector.
  const auto c_groups_aligned = [&](int n) {
    return pointer_alignment(p.c) >= n * es && p.c_row_stride % n == 0 && (p.batch <= 1 || p.c_batch_stride % n == 0);
  };
  args.c_pairs_aligned = c_groups_aligned(2);
  // Vector stores where C's columns come in aligned groups of 4; a C that is
  // not 4-column aligned goes through shared memory; a transposed C takes
  // the checked scalar / pair stores.
  args.c_quads_aligned = c_groups_aligned(4) && !c.c_trans;
  // TMA stores where C allows them (16-byte aligned base and strides; else
  // the register stores).
  args.c_trans = c.c_trans ? 1 : 0;
  if (c.c_trans && !Cfg::kCTrans) return "sm90: a transposed C needs a cooperative whole-tile kernel";
  if (Cfg::kSwappedOnly && !c.c_trans) return "sm90: 128x144 ... 128x232 and one-slab tiles run swapped only";
  CUtensorMap map_c{};
  if (Cfg::kTmaEpilogue && (c.c_trans || Cfg::kWholeCBoxes) && c_tma_ok(p, es)) {
    OperandMapSpec sc{};
    sc.dtype = tma_dtype<T>(false);
    sc.elem_bytes = es;
    sc.ptr = p.c;
    sc.batch = p.batch > 1 ? static_cast<uint64_t>(p.batch) : 1;
    sc.batch_stride = p.batch > 1 ? static_cast<uint64_t>(p.c_batch_stride) : 0;
    // C^T's (m, n) is the caller's C[n][m]: C is [this problem's N][M].
    sc.inner = c.c_trans ? p.M : p.N, sc.outer = c.c_trans ? p.N : p.M, sc.outer_stride = p.c_row_stride;
    sc.box_inner = 128 / es, sc.box_outer = c.c_trans ? Cfg::kTBoxRows : 64;
    args.c_tma = encode_operand_map(&map_c, sc) == nullptr ? 1 : 0;  // else the register stores
  }
  args.c_via_smem = !c_groups_aligned(4) && !c.c_trans;
  // The epilogue, fused into a ping-pong kernel's TMA stores of C
  // (hopper_fuses_epilogue checked that every box is stored that way).
  args.epi = p.epi;
  args.epi_on = p.epi.any() ? 1 : 0;
  if (args.epi_on && (!args.c_tma || !Cfg::kPingPong))
    return "sm90: the epilogue is fused into ping-pong kernels' TMA stores only (dispatch runs it as a pass otherwise)";
  args.raster = Raster::of((args.tiles_m + Cfg::kCluster - 1) / Cfg::kCluster, args.tiles_n, c.group_m >= 1 ? c.group_m : 8);
  args.c = p.c;
  args.c_batch_stride = p.c_batch_stride;
  args.c_row_stride = p.c_row_stride;
  args.bias = p.bias;

  if constexpr (Cfg::kSplitK) {
    // One cluster of c.split_k CTAs (along K) per output tile.
    const int64_t tiles = static_cast<int64_t>(args.tiles_m) * args.tiles_n * args.batch;
    const int S = c.split_k;
    if (S != 2 && S != 4 && S != 8) return "sm90: split-K factor must be 2, 4 or 8";
    if (S > args.k_blocks) return "sm90: split-K factor exceeds the k-block count";
    ClusterLaunch launch(static_cast<unsigned>(S), dim3(Cfg::kThreads, 1, 1), Cfg::kSmemBytes, stream);
    return launch.launch(dim3(static_cast<unsigned>(tiles * S), 1, 1), kernel, "sm90: split-K cluster launch failed",
                         map_a, map_b, map_c, args);
  } else if constexpr (Cfg::kCluster == 1) {
    const int64_t tiles = static_cast<int64_t>(args.tiles_m) * args.tiles_n * args.batch;
    int grid = static_cast<int>(tiles < dev.num_sms ? tiles : dev.num_sms);
    if constexpr (Cfg::kStreamK) {
      // Stream-K (choose() counted the tiles for a grid of num_sms): every SM
      // gets a CTA; the flags start at 0 on every launch.
      if (c.sk_tiles > 0) {
        if (workspace == nullptr) return "sm90: stream-K needs a workspace";
        grid = dev.num_sms;
        args.sk_tiles = static_cast<int>(c.sk_tiles);  // <= the tile count, an int (hopper_can_run)
        args.sk_flags = static_cast<int*>(workspace);
        args.sk_partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + stream_k_flag_bytes(grid));
        if (cudaMemsetAsync(workspace, 0, stream_k_flag_bytes(grid), stream) != cudaSuccess)
          return "sm90: stream-K flag reset failed";
      }
    }
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(map_a, map_b, map_c, args);
    return nullptr;
  } else {
    // Units of work are tile pairs; as many clusters as can be resident at once.
    const int64_t units =
        static_cast<int64_t>((args.tiles_m + Cfg::kCluster - 1) / Cfg::kCluster) * args.tiles_n * args.batch;
    ClusterLaunch launch(Cfg::kCluster, dim3(Cfg::kThreads, 1, 1), Cfg::kSmemBytes, stream);
    static std::atomic<int> resident{0};  // max co-resident clusters (same for every sm_90 device we run on)
    int max_clusters = resident.load(std::memory_order_relaxed);
    if (max_clusters == 0) {
      max_clusters = launch.max_active_clusters(kernel, dim3(Cfg::kCluster * (dev.num_sms / Cfg::kCluster), 1, 1));
      if (max_clusters <= 0) max_clusters = dev.num_sms / Cfg::kCluster;
      resident.store(max_clusters, std::memory_order_relaxed);
    }
    const int64_t clusters = units < max_clusters ? units : max_clusters;
    return launch.launch(dim3(static_cast<unsigned>(clusters * Cfg::kCluster), 1, 1), kernel,
                         "sm90: cluster launch failed", map_a, map_b, map_c, args);
  }
}

// The one-slab kernel of width `w` (hopper.h's kSlabWidths, from index I
// on), with the given layouts and C orientation.
template <class T, bool kAMN, bool kBMN, bool kTransC, int I = 0>
const char* launch_one_slab(int w, const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, const Choice& c,
                            void* workspace) {
  constexpr int kN = static_cast<int>(sizeof(kSlabWidths) / sizeof(kSlabWidths[0]));
  if constexpr (I == kN) {
    return "sm90: no one-slab kernel of that width";
  } else {
    constexpr int W = kSlabWidths[I];
    if constexpr (slab_built(W, kAMN, kBMN, kTransC)) {
      if (w == W)
        return launch_sm90<Sm90Config<T, W, kAMN, kBMN, 1, false, false, kTransC, true>>(p, dev, stream, c, workspace);
    }
    return launch_one_slab<T, kAMN, kBMN, kTransC, I + 1>(w, p, dev, stream, c, workspace);
  }
}

// The one-slab kernel for c's width and layouts (slab_layout_built), C^T's
// tiles where kTransC.
template <class T, bool kTransC>
const char* launch_slab_choice(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, const Choice& c,
                            void* workspace) {
  if (!slab_built(c.slab, c.a_mn, c.b_mn, kTransC)) return "sm90: no one-slab kernel for that layout";
  // (The one mixed layout built: an M-major A swapped, an N-major B as called.)
  if (c.a_mn != c.b_mn) return launch_one_slab<T, kTransC, !kTransC, kTransC>(c.slab, p, dev, stream, c, workspace);
  return c.a_mn ? launch_one_slab<T, true, true, kTransC>(c.slab, p, dev, stream, c, workspace)
                : launch_one_slab<T, false, false, kTransC>(c.slab, p, dev, stream, c, workspace);
}

// One dtype's instantiations, selected by the host-side Choice.  Each dtype
// file (hopper_bf16.cu, ...) instantiates this once.
template <class T>
const char* launch_choice(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, Choice c, void* workspace) {
  if constexpr (sizeof(T) == 2) {
    const int layout = (c.a_mn ? 2 : 0) + (c.b_mn ? 1 : 0);
#define TILED_SM90_LAYOUTS(BN, CL, PP, ...)                                                            \
  switch (layout) {                                                                                     \
    case 0: return launch_sm90<Sm90Config<T, BN, false, false, CL, PP, ##__VA_ARGS__>>(p, dev, stream, c, workspace); \
    case 1: return launch_sm90<Sm90Config<T, BN, false, true, CL, PP, ##__VA_ARGS__>>(p, dev, stream, c, workspace);  \
    case 2: return launch_sm90<Sm90Config<T, BN, true, false, CL, PP, ##__VA_ARGS__>>(p, dev, stream, c, workspace);  \
    default: return launch_sm90<Sm90Config<T, BN, true, true, CL, PP, ##__VA_ARGS__>>(p, dev, stream, c, workspace);  \
  }
    if (c.c_trans) {  // C^T's tiles stored transposed (hopper.cu's swap_fills_waves, swap_width)
      if (c.pingpong || c.split_k > 1 || c.sk_tiles > 0 || (c.cluster != 1 && c.tile != Tile::k128x256))
        return "sm90: a 16-bit transposed C needs cooperative whole tiles";
      if (c.slab > 0 || tile_swapped_only(c.tile)) {
        // No cluster; 144-232: a K-major B (the caller's row-major A), or
        // both operands MN-major (the caller's TN).
        if (c.slab > 0) return launch_slab_choice<T, true>(p, dev, stream, c, workspace);
        if (c.b_mn && !c.a_mn) return "sm90: swapped-only tiles (128x144 ... 128x232) with an N-major B need an M-major A";
        const int bn = tile_bn(c.tile);
#define TILED_SM90_SWAPPED_ONLY(BN)                                                                                 \
  if (bn == BN) {                                                                                                   \
    if (c.b_mn) return launch_sm90<Sm90Config<T, BN, true, true, 1, false, false, true>>(p, dev, stream, c, workspace); \
    if (c.a_mn) return launch_sm90<Sm90Config<T, BN, true, false, 1, false, false, true>>(p, dev, stream, c, workspace); \
    return launch_sm90<Sm90Config<T, BN, false, false, 1, false, false, true>>(p, dev, stream, c, workspace);       \
  }
        TILED_SM90_SWAPPED_ONLY(144)
        TILED_SM90_SWAPPED_ONLY(160)
        TILED_SM90_SWAPPED_ONLY(176)
        TILED_SM90_SWAPPED_ONLY(200)
        TILED_SM90_SWAPPED_ONLY(208)
        TILED_SM90_SWAPPED_ONLY(224)
        TILED_SM90_SWAPPED_ONLY(232)
#undef TILED_SM90_SWAPPED_ONLY
        return "sm90: no swapped-only kernel of that width";
      }
      if (c.tile != Tile::k128x256) return "sm90: a 16-bit transposed C needs cooperative 128x256 tiles";
      if (c.cluster == 2) TILED_SM90_LAYOUTS(256, 2, false, false, true)
      TILED_SM90_LAYOUTS(256, 1, false, false, true)
    }
    // One-slab tiles as called (a small N; hopper.cu's slab_width_as_called).
    if (c.slab > 0) return launch_slab_choice<T, false>(p, dev, stream, c, workspace);
    if (c.tile == Tile::k128x256) {
      if (c.cluster == 2) TILED_SM90_LAYOUTS(256, 2, false)
      TILED_SM90_LAYOUTS(256, 1, false)
    }
    if (c.pingpong) {
      if (c.cluster == 2) TILED_SM90_LAYOUTS(128, 2, true)
      TILED_SM90_LAYOUTS(128, 1, true)
    }
    if (c.split_k > 1 && c.tile == Tile::k128x64) TILED_SM90_LAYOUTS(64, 1, false, true)
    if (c.split_k > 1) TILED_SM90_LAYOUTS(128, 1, false, true)
    if (c.tile == Tile::k128x192) TILED_SM90_LAYOUTS(192, 1, false)
    if (c.tile == Tile::k128x64) TILED_SM90_LAYOUTS(64, 1, false)
    TILED_SM90_LAYOUTS(128, 1, false)
#undef TILED_SM90_LAYOUTS
  } else {
    if (c.b_mn) return "sm90: tf32 takes a K-major B only";
    // Cooperative whole tiles (stream-K and clusters included), with A from
    // shared memory (K-major) or from registers (M-major).
    auto cooperative = [&](auto a_mn) -> const char* {
      constexpr bool kA = decltype(a_mn)::value;
      if (c.tile == Tile::k128x256 && c.cluster == 2)
        return launch_sm90<Sm90Config<T, 256, kA, false, 2>>(p, dev, stream, c, workspace);
      if (c.tile == Tile::k128x256) return launch_sm90<Sm90Config<T, 256, kA, false>>(p, dev, stream, c, workspace);
      if (c.tile == Tile::k128x192) return launch_sm90<Sm90Config<T, 192, kA, false>>(p, dev, stream, c, workspace);
      if (c.tile == Tile::k128x64) return launch_sm90<Sm90Config<T, 64, kA, false>>(p, dev, stream, c, workspace);
      return launch_sm90<Sm90Config<T, 128, kA, false>>(p, dev, stream, c, workspace);
    };
    if (c.a_mn) {
      if (c.pingpong || c.split_k > 1) return "sm90: tf32 with an M-major A: cooperative tiles only";
      return cooperative(std::true_type{});
    }
    if (c.pingpong) return launch_sm90<Sm90Config<T, 128, false, false, 1, true>>(p, dev, stream, c, workspace);
    if (c.split_k > 1 && c.tile == Tile::k128x64)
      return launch_sm90<Sm90Config<T, 64, false, false, 1, false, true>>(p, dev, stream, c, workspace);
    if (c.split_k > 1) return launch_sm90<Sm90Config<T, 128, false, false, 1, false, true>>(p, dev, stream, c, workspace);
    return cooperative(std::false_type{});
  }
}

}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
