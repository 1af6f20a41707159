// Ampere-style tensor-core GEMM (sm_80 and later, through PTX on newer GPUs):
// C = A B (+ bias) for bf16 / fp16 (fp32 accumulate, output in the operands'
// dtype) and fp32 with TF32 allowed (operands rounded to tf32 in registers,
// fp32 output).
//
// A CTA computes a BM x BN tile of C (sm80.h's configurations):
//   * WARPS_M x WARPS_N warps, each a 64 x 64 warp tile: 4 x 8 mma.sync
//     tiles (m16n8k16 for 16-bit, m16n8k8 tf32), fp32 accumulators;
//   * a STAGES-deep cp.async ring of k-blocks of 128 bytes of K (64 16-bit
//     elements, 32 fp32), one __syncthreads per k-block;
//   * shared memory in 16-byte chunks, XOR-swizzled inside 8-chunk groups so
//     that every fragment read is free of bank conflicts (SmemTile below);
//   * fragments read with ldmatrix (16-bit K-major), ldmatrix.trans (16-bit
//     M/N-major), ldmatrix on 32-bit pairs (tf32 K-major: an 8 x 4 fp32
//     matrix is an 8 x 8 b16 one), or 32-bit ld.shared (tf32 M/N-major:
//     there is no 32-bit transposing ldmatrix); double-buffered in registers
//     across the k-steps of a k-block;
//   * every layout read from strides; edges (M, N, K any) zero-filled: full
//     16-byte chunks by cp.async, a chunk that straddles the matrix's end by
//     plain element loads (reading only elements inside it) + st.shared;
//   * batches through blockIdx.y (a 0 batch stride broadcasts);
//   * CTAs in groups of 8 tile rows (tile (m, n) order down a group's
//     columns) so the A and B tiles of concurrently running CTAs share L2;
//   * epilogue: accumulators + bias (fp32), rounded once to the output
//     dtype, staged in shared memory, stored in 16-byte chunks of C's rows
//     (as 8- or 4-byte pieces, or elements, where C's alignment asks).
//
// Operands must be 16-byte aligned for cp.async: base pointer, leading
// dimension and batch stride multiples of 16 bytes (sm80.cu declines
// others; dispatch then runs the general kernel).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 / m16n8k8";
// g = lane / 4, t = lane % 4).  In 32-bit words, with a 16-bit word pair
// holding K elements 2w, 2w+1:
//   A (16 x kw words): a[i] = (row g + 8 (i & 1), word t + 4 (i >> 1))
//   B (kw words x 8):  b[i] = (word t + 4 i, col g)
//   C (16 x 8 fp32):   c[i] = (row g + 8 (i >> 1), col 2 t + (i & 1))
// kw = 8 words of K: k16 for 16-bit, k8 for tf32 (one element a word).
// ldmatrix.x4: lanes 8 j .. 8 j + 7 give the row addresses of matrix j; each
// thread receives, of matrix j, word (row g, word t) - or with .trans the
// 16-bit pair (rows 2 t, 2 t + 1; col g).  So with matrices ordered
// A: (m 0-7, k-word 0-3), (m 8-15, w 0-3), (m 0-7, w 4-7), (m 8-15, w 4-7)
//    -> registers a[0..3] exactly (K-major: rows m; M-major + .trans: rows k)
// B: (n 0-7, w 0-3), (n 0-7, w 4-7), (n 8-15, w 0-3), (n 8-15, w 4-7)
//    -> b[0], b[1] of n-tile 0 and b[0], b[1] of n-tile 1.
//
// Torch-free: pointers, sizes and strides in, see sm80.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../cp_async.cuh"
#include "../ldmatrix.cuh"
#include "../simt/numeric.cuh"
#include "sm80.h"

namespace tiled {
namespace cuda {
namespace sm80 {

template <class T>
struct Traits {
  static constexpr bool kTf32 = std::is_same<T, float>::value;
  static constexpr int kBytes = kTf32 ? 4 : 2;
  static constexpr int kPerChunk = 16 / kBytes;  // elements in a 16-byte chunk
  static constexpr int kMmaK = kTf32 ? 8 : 16;   // K of one mma
};

// Row-swizzled tile in shared memory: ROWS rows of CHUNKS 16-byte chunks,
// chunk c of row r stored at chunk c ^ s(r) of that row.  Rows are whole
// multiples of 128 bytes (CHUNKS >= 8), so only the chunk's position within
// its aligned group of 8 (the 8 x 16 bytes of the 32 banks) decides banks.
//   s(r) = r & 7 (default): the 8 rows one ldmatrix matrix reads, at the
//     same logical chunk, land on 8 different bank groups;
//   s(r) = 2 (r & 3) (PAIRS, tf32 M/N-major tiles read by 32-bit loads): a
//     warp's load touches rows k..k+3 (k a multiple of 4) x 8 consecutive
//     elements = chunks {c, c + 1}, c even; XOR with 0, 2, 4, 6 spreads
//     these 4 x 2 chunks over 8 different bank groups.
template <int ROWS, int CHUNKS, bool PAIRS>
struct SmemTile {
  static_assert(CHUNKS >= 8 && CHUNKS % 8 == 0, "rows of whole 128-byte groups");
  static constexpr int kRows = ROWS;
  static constexpr int kChunks = CHUNKS;
  static constexpr int kBytes = ROWS * CHUNKS * 16;
  static __device__ __forceinline__ int swizzle(int row) { return PAIRS ? (row & 3) << 1 : row & 7; }
  static __device__ __forceinline__ uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>((row * CHUNKS + (chunk ^ swizzle(row))) * 16);
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy, cached in L2 only (.cg).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, const uint32_t (&w)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
}

__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// fp32 bits -> tf32 bits, rounded to nearest (ties away from zero): half an
// ulp of tf32 added to the magnitude's bits; the mma reads the 19 high bits
// and ignores the 13 low ones.  One integer add, where cvt.rna.tf32.f32 is
// a compare and a predicated add (and its predicates pushed the tf32
// kernels with a K-major operand past 255 registers into spills).  An
// infinity stays one (its low bits do not count); so does a NaN unless its
// payload lies wholly in the 13 low bits (then the mma reads an infinity,
// as it does for unrounded fp32 operands).
__device__ __forceinline__ uint32_t to_tf32(uint32_t x) { return x + 0x1000u; }

// D += A B on one mma tile, fp32 accumulators.
template <class T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Mma<float> {  // tf32 operands (already rounded), m16n8k8
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// A chunk that is not wholly inside the matrix: zeros, then its first `n`
// elements (n <= 0: none) one at a time with plain loads, so only elements
// inside the matrix are touched (a 16-byte copy of a chunk ending past a
// small allocation would read past it, whatever cp.async's src-size).  One
// element in flight at a time: this path shares the main loop's registers
// with 128 accumulators (gathering the chunk in registers first made ptxas
// spill in the tf32 kernels).
template <class E>
__device__ __forceinline__ void edge_chunk(uint32_t dst, const E* src, int n) {
  const uint32_t zero[4] = {0u, 0u, 0u, 0u};
  st_shared_v4(dst, zero);
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(E));
#pragma unroll 1
  for (int e = 0; e < min(n, kPerChunk); ++e) {
    if constexpr (sizeof(E) == 4) {
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dst + 4 * e), "r"(reinterpret_cast<const uint32_t*>(src)[e])
                   : "memory");
    } else {
      asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(dst + 2 * e), "h"(reinterpret_cast<const uint16_t*>(src)[e])
                   : "memory");
    }
  }
}

// Cooperative copy of rows [row0, row0 + ROWS) x cols [col0, col0 + CHUNKS
// * per-chunk) of a matrix X(r, c) = base[r * ld + c] (c contiguous) into
// `Tile` at `dst`; rows >= row_end and cols >= col_end read as zero.  Thread
// `tid` copies chunk tid % CHUNKS of rows tid / CHUNKS + i * (THREADS /
// CHUNKS): one column offset, and rows a constant stride apart.
template <class Tile, int THREADS, class E>
__device__ __forceinline__ void load_tile(uint32_t dst, const E* base, int64_t ld, int row0, int row_end, int col0,
                                          int col_end, int tid) {
  constexpr int kPerChunk = 16 / static_cast<int>(sizeof(E));
  constexpr int kChunks = Tile::kChunks;
  static_assert(THREADS % kChunks == 0, "a thread's chunks share one column");
  static_assert((Tile::kRows * kChunks) % THREADS == 0, "chunks divide evenly among the threads");
  constexpr int kRowStep = THREADS / kChunks;
  constexpr int kPer = Tile::kRows * kChunks / THREADS;
  const int r0 = tid / kChunks, ch = tid % kChunks;
  const int col = col0 + ch * kPerChunk;
  const bool col_full = col + kPerChunk <= col_end;
  const E* src = base + static_cast<int64_t>(row0 + r0) * ld + col;
  const int64_t step = static_cast<int64_t>(kRowStep) * ld;
  if (row0 + Tile::kRows <= row_end && col0 + kChunks * kPerChunk <= col_end) {
    // The whole tile inside the matrix (every tile but the edges): no
    // per-chunk tests, which would cost more issue slots than the mma.
#pragma unroll
    for (int i = 0; i < kPer; ++i) cp_async16(dst + Tile::offset(r0 + i * kRowStep, ch), src + i * step);
    return;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int r = r0 + i * kRowStep;
    const uint32_t d = dst + Tile::offset(r, ch);
    const bool row_in = row0 + r < row_end;
    if (row_in && col_full)
      cp_async16(d, src + i * step);
    else
      edge_chunk(d, src + i * step, row_in ? col_end - col : 0);
  }
}

#endif  // __CUDA_ARCH__ >= 800

// One CTA: a BM x BN tile of C of one batch, over all of K.
// A_KMAJOR: A(m, k) at a[m * lda + k], else a[k * lda + m].
// B_KMAJOR: B(k, n) at b[n * ldb + k], else b[k * ldb + n].
// The configuration's numbers are template arguments (sm80_launch.cuh
// passes those of sm80.h's list).
template <class T, int BM, int BN, int WARPS_M, int WARPS_N, int S, bool A_KMAJOR, bool B_KMAJOR, bool RING>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, 1) sm80_gemm_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using Tr = Traits<T>;
  constexpr bool kTf32 = Tr::kTf32;
  constexpr int BK = kRowBytes / Tr::kBytes;
  constexpr Config kCfg = {"", BM, BN, BK, WARPS_M, WARPS_N, S};
  static_assert(config_ok(kCfg, kTf32), "a valid configuration");
  constexpr int kThreads = threads(kCfg);
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;
  constexpr int MT = WTM / 16, NT = WTN / 8;
  constexpr int kSteps = BK / Tr::kMmaK;
  constexpr int EPC = Tr::kPerChunk;
  static_assert(NT % 2 == 0, "B fragments come two n8 tiles per ldmatrix");
  static_assert(BK * Tr::kBytes == kRowBytes && kSteps * 2 == kRowBytes / 16, "a k-step is 2 chunks of K");
  // K-major tiles: MN rows x 8 chunks of K; M/N-major: BK rows (k) x MN/EPC chunks.
  using TileA = SmemTile<A_KMAJOR ? BM : BK, A_KMAJOR ? kRowBytes / 16 : BM / EPC, !A_KMAJOR && kTf32>;
  using TileB = SmemTile<B_KMAJOR ? BN : BK, B_KMAJOR ? kRowBytes / 16 : BN / EPC, !B_KMAJOR && kTf32>;
  constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;
  static_assert(kStageBytes == stage_bytes(kCfg, kTf32), "stage size as the launcher reserves it");
  extern __shared__ __align__(128) unsigned char smem[];
  using E = typename std::conditional<kTf32, float, uint16_t>::type;  // raw operand element

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Tile order: groups of kGroupM tile rows, each group walked column by column.
  constexpr int kGroupM = 8;
  const int group_tiles = kGroupM * p.tiles_n;
  const int group = blockIdx.x / group_tiles;
  const int first_m = group * kGroupM;
  const int group_rows = min(p.tiles_m - first_m, kGroupM);
  const int in_group = blockIdx.x - group * group_tiles;
  const int m0 = (first_m + in_group % group_rows) * BM;
  const int n0 = (in_group / group_rows) * BN;
  const int64_t batch = blockIdx.y;
  const E* A = static_cast<const E*>(p.a) + batch * p.a_batch;
  const E* B = static_cast<const E*>(p.b) + batch * p.b_batch;
  const uint32_t base = smem_u32(smem);

  // This CTA's k-blocks: split blockIdx.z of the K range (sm80.h, Params).
  const int all_blocks = (p.K + BK - 1) / BK;
  const int per_split = p.kb_per_split > 0 ? p.kb_per_split : all_blocks;
  const int kb0 = static_cast<int>(blockIdx.z) * per_split;
  const int k_blocks = min(all_blocks - kb0, per_split);

  auto load_stage = [&](int kb, int slot) {  // kb counts from the split's first k-block
    const uint32_t sa = base + slot * kStageBytes, sb = sa + TileA::kBytes;
    const int k0 = (kb0 + kb) * BK;
    if constexpr (A_KMAJOR)
      load_tile<TileA, kThreads>(sa, A, p.lda, m0, p.M, k0, p.K, tid);
    else
      load_tile<TileA, kThreads>(sa, A, p.lda, k0, p.K, m0, p.M, tid);
    if constexpr (B_KMAJOR)
      load_tile<TileB, kThreads>(sb, B, p.ldb, n0, p.N, k0, p.K, tid);
    else
      load_tile<TileB, kThreads>(sb, B, p.ldb, k0, p.K, n0, p.N, tid);
  };

  // Warp tile origin; ldmatrix roles: matrix j = lane / 8, its row r = lane % 8.
  const int wm0 = (warp % WARPS_M) * WTM, wn0 = (warp / WARPS_M) * WTN;
  const int j = lane / 8, r = lane % 8, g = lane / 4, t = lane % 4;

  // Fragments of k-step `ks` (2 chunks of K) of the stage at sa / sb.
  auto load_frags = [&](uint32_t sa, uint32_t sb, int ks, uint32_t (&af)[MT][4], uint32_t (&bf)[NT][2]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m = wm0 + mt * 16;
      if constexpr (A_KMAJOR) {
        ldmatrix_x4(af[mt], sa + TileA::offset(m + (j & 1) * 8 + r, ks * 2 + (j >> 1)));
      } else if constexpr (!kTf32) {
        ldmatrix_x4_trans(af[mt], sa + TileA::offset(ks * 16 + (j >> 1) * 8 + r, (m + (j & 1) * 8) / 8));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // a[i] = (m + g + 8 (i & 1), k = 8 ks + t + 4 (i >> 1))
          const int mi = m + g + 8 * (i & 1);
          af[mt][i] = ld_shared_b32(sa + TileA::offset(ks * 8 + t + 4 * (i >> 1), mi / 4) + (mi % 4) * 4);
        }
      }
    }
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      const int n = wn0 + np * 16;
      if constexpr (B_KMAJOR || !kTf32) {
        uint32_t x[4];
        if constexpr (B_KMAJOR)
          ldmatrix_x4(x, sb + TileB::offset(n + (j >> 1) * 8 + r, ks * 2 + (j & 1)));
        else
          ldmatrix_x4_trans(x, sb + TileB::offset(ks * 16 + (j & 1) * 8 + r, (n + (j >> 1) * 8) / 8));
        bf[2 * np][0] = x[0];
        bf[2 * np][1] = x[1];
        bf[2 * np + 1][0] = x[2];
        bf[2 * np + 1][1] = x[3];
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 2; ++i) {  // b[i] = (k = 8 ks + t + 4 i, n + 8 h + g)
            const int ni = n + 8 * h + g;
            bf[2 * np + h][i] = ld_shared_b32(sb + TileB::offset(ks * 8 + t + 4 * i, ni / 4) + (ni % 4) * 4);
          }
      }
    }
  };

  // tf32: the fragments about to enter the mma rounded to nearest, in place
  // (here rather than at their load, so the conversion does not wait for
  // the load's latency that the double buffer hides).
  auto round_frags = [&](uint32_t(&af)[MT][4], uint32_t(&bf)[NT][2]) {
    if constexpr (kTf32) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) af[mt][i] = to_tf32(af[mt][i]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i) bf[nt][i] = to_tf32(bf[nt][i]);
    }
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

  // RING fills all S slots up front (a slot is refilled as soon as its last
  // fragments are read); otherwise one slot stays free for the next copy.
  constexpr int kAhead = RING ? S : S - 1;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < k_blocks) load_stage(s, s);
    cp_async_commit();  // empty groups keep the count uniform
  }

  // Fragments double-buffered across k-steps: the next step's loads issue
  // before this step's mma.
  uint32_t af[2][MT][4], bf[2][NT][2];
  auto mma_step = [&](int buf) {
    round_frags(af[buf], bf[buf]);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) Mma<T>::run(acc[mt][nt], af[buf][mt], bf[buf][nt]);
  };
  int read_slot = 0;
  if constexpr (!RING) {
    // One barrier at the top of each k-block: k-block kb landed for
    // everyone and the slot read in kb - 1 is free for k-block kb + S - 1.
    int write_slot = S - 1;
    for (int kb = 0; kb < k_blocks; ++kb) {
      cp_async_wait<S - 2>();
      __syncthreads();
      if (kb + S - 1 < k_blocks) load_stage(kb + S - 1, write_slot);
      cp_async_commit();
      write_slot = write_slot + 1 == S ? 0 : write_slot + 1;
      const uint32_t sa = base + read_slot * kStageBytes, sb = sa + TileA::kBytes;
      read_slot = read_slot + 1 == S ? 0 : read_slot + 1;
      load_frags(sa, sb, 0, af[0], bf[0]);
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        if (ks + 1 < kSteps) load_frags(sa, sb, ks + 1, af[(ks + 1) & 1], bf[(ks + 1) & 1]);
        mma_step(ks & 1);
      }
    }
  } else {
    // The barrier sits in the k-block's second-to-last k-step, after that
    // step's mma: the last step's fragments are already in registers, so
    // (a) k-block kb's slot is free at once and takes k-block kb + S, and
    // (b) k-block kb + 1's first fragments load while the last step's mma
    // run; no warp reaches the barrier with nothing in flight.
    static_assert(kSteps % 2 == 0 && kSteps >= 2, "the next k-block's first fragments go to buffer 0");
    cp_async_wait<kAhead - 1>();
    __syncthreads();  // k-block 0 landed for everyone
    uint32_t sa = base, sb = base + TileA::kBytes;
    load_frags(sa, sb, 0, af[0], bf[0]);
    for (int kb = 0; kb < k_blocks; ++kb) {
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        if (ks + 1 < kSteps) {
          load_frags(sa, sb, ks + 1, af[(ks + 1) & 1], bf[(ks + 1) & 1]);
        } else {  // past the barrier of step kSteps - 2: k-block kb + 1 landed
          read_slot = read_slot + 1 == S ? 0 : read_slot + 1;
          sa = base + read_slot * kStageBytes;
          sb = sa + TileA::kBytes;
          if (kb + 1 < k_blocks) load_frags(sa, sb, 0, af[0], bf[0]);
        }
        mma_step(ks & 1);
        if (ks == kSteps - 2) {
          // Groups committed: S + kb; at most S - 2 pending = k-blocks
          // 0 .. kb + 1 landed (for everyone after the barrier).
          cp_async_wait<S - 2>();
          __syncthreads();
          if (kb + S < k_blocks) load_stage(kb + S, read_slot);
          cp_async_commit();
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory at exit

  // Accumulator (mt, nt, i): row wm0 + 16 mt + g + 8 (i >> 1), column
  // wn0 + 8 nt + 2 t + (i & 1).
  if (p.partial != nullptr) {
    // Split K: this split's fp32 sums, dense [split][batch][M][N], no bias
    // (sm80_reduce_kernel adds the splits in order, then the bias).
    float* P = p.partial + (static_cast<int64_t>(blockIdx.z) * gridDim.y + batch) * p.M * p.N;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int col = n0 + wn0 + nt * 8 + 2 * t;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + wm0 + mt * 16 + g + 8 * h;
          if (row >= p.M) continue;
          float* dst = P + static_cast<int64_t>(row) * p.N + col;
          if (col + 1 < p.N && p.N % 2 == 0) {
            *reinterpret_cast<float2*>(dst) = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
          } else {
            if (col < p.N) dst[0] = acc[mt][nt][2 * h];
            if (col + 1 < p.N) dst[1] = acc[mt][nt][2 * h + 1];
          }
        }
    }
    return;
  }
  // The C tile through shared memory (the pipeline's, free now): each
  // warp writes its accumulators + bias, rounded once to C's dtype, into a
  // BM x (BN + 8) tile (the 8 elements of padding spread a fragment
  // store's 8 rows over all banks), then the CTA stores whole rows in
  // 16-byte chunks, coalesced: fragments stored straight from registers
  // fill half of each 32-byte sector, which decides problems of one or two
  // k-blocks (attention's K = 64).
  constexpr int kCRow = (BN + 8) * static_cast<int>(sizeof(T));  // bytes per staged row
  static_assert(BM * kCRow <= S * kStageBytes, "the C tile fits the pipeline's shared memory");
  __syncthreads();  // every warp is done reading the last k-block
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int cl = wn0 + nt * 8 + 2 * t, col = n0 + cl;
    float b0 = 0.f, b1 = 0.f;
    if (bias != nullptr) {
      if (col < p.N) b0 = to_acc<float>(bias[col]);
      if (col + 1 < p.N) b1 = to_acc<float>(bias[col + 1]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = wm0 + mt * 16 + g + 8 * h;
        const float v0 = acc[mt][nt][2 * h] + b0, v1 = acc[mt][nt][2 * h + 1] + b1;
        unsigned char* dst = smem + rl * kCRow + cl * static_cast<int>(sizeof(T));
        if constexpr (kTf32) {
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
          *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(v0, v1);
        } else {
          *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
        }
      }
  }
  __syncthreads();
  constexpr int kPer16 = 16 / static_cast<int>(sizeof(T));  // elements in a 16-byte chunk
  constexpr int kRowChunks = BN / kPer16;
  const int rows = min(BM, p.M - m0), cols = min(BN, p.N - n0);
  T* C = static_cast<T*>(p.c) + batch * p.c_batch + static_cast<int64_t>(m0) * p.c_ld + n0;
#pragma unroll 4
  for (int i = tid; i < rows * kRowChunks; i += kThreads) {
    const int rl = i / kRowChunks, c0 = (i % kRowChunks) * kPer16;
    if (c0 >= cols) continue;
    const unsigned char* src = smem + rl * kCRow + c0 * static_cast<int>(sizeof(T));
    T* dst = C + static_cast<int64_t>(rl) * p.c_ld + c0;
    if (c0 + kPer16 <= cols && p.c_align >= 4) {  // a whole chunk, in the widest stores C's alignment allows
      if (p.c_align >= 16) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else if (p.c_align == 8) {
#pragma unroll
        for (int j = 0; j < 2; ++j) reinterpret_cast<uint2*>(dst)[j] = reinterpret_cast<const uint2*>(src)[j];
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) reinterpret_cast<uint32_t*>(dst)[j] = reinterpret_cast<const uint32_t*>(src)[j];
      }
    } else {
      for (int e = 0; e < min(kPer16, cols - c0); ++e) dst[e] = reinterpret_cast<const T*>(src)[e];
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // sm80_can_run declines GPUs before sm_80
#endif
}

// Split K's second pass: C = sum of the splits' fp32 partial sums (in split
// order: the same bits on every run) + bias, rounded once to C's dtype.
template <class T>
__global__ void __launch_bounds__(256) sm80_reduce_kernel(const Params p, int splits, int batch) {
  const int64_t slice = static_cast<int64_t>(batch) * p.M * p.N;
  const T* bias = static_cast<const T*>(p.bias);
  T* C = static_cast<T*>(p.c);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < slice;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < splits; ++s) v += p.partial[s * slice + i];
    const int col = static_cast<int>(i % p.N);
    const int64_t rb = i / p.N;
    const int64_t row = rb % p.M, b = rb / p.M;
    if (bias != nullptr) v += to_acc<float>(bias[col]);
    C[b * p.c_batch + row * p.c_ld + col] = from_acc<T>(v);
  }
}

}  // namespace sm80
}  // namespace cuda
}  // namespace tiled
