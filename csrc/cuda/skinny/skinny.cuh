// Small-M ("skinny") GEMM for bf16/fp16, and fp32 with TF32 allowed: C = A B
// (+ bias) with M (or, after a swap, N) of 1..128.  Such a GEMM is a stream of B through the SMs: B has
// K x N elements and every one of them is used M times only, so the time is
// B's bytes over the memory bandwidth if, and only if, enough SMs pull on it.
// 128-row tensor-core tiles (the Hopper kernel) give N/128 CTAs, 32 for
// N = 4096 on 132 SMs; this kernel splits K as well, so that the grid fills
// every SM (two CTAs each) however few output tiles there are.
//
// A CTA computes a BM x 128 tile of C over one slice of K:
//   * 4 warps, each BM x 32 (MT = BM/16 m16 tiles by 4 n8 tiles), mma.sync
//     m16n8k16 (16-bit) or m16n8k8 (tf32) with fp32 accumulators (runs on
//     sm_80 and later);
//   * a STAGES-deep cp.async ring of k-blocks of 128 bytes of K (64 16-bit
//     elements, 32 fp32): B's 128-column tile (16 KB) and A's BM-row one,
//     each 16-byte chunk XOR-swizzled in its row so that ldmatrix reads 8
//     rows without bank conflicts;
//   * either operand K-major (its K index contiguous) or M/N-major, read
//     straight from strides: ldmatrix for the first, ldmatrix.trans for the
//     second (16-bit).  tf32: ldmatrix on 32-bit pairs for a K-major
//     operand (an 8 x 4 fp32 matrix is an 8 x 8 b16 one, and each thread
//     receives exactly its tf32 fragment element), 32-bit ld.shared for an
//     M/N-major one (there is no 32-bit transposing ldmatrix), its tile
//     swizzled so that those loads are conflict-free too; the fragments
//     rounded to tf32 in registers (sm80.cuh's to_tf32: to nearest, ties
//     away from zero), as the sm80 family does;
//   * edges zero-filled by cp.async's source size (rows past M/N, the part
//     of the last k-block past K).
// With one K slice the epilogue adds the bias, casts and stores C.  With S
// slices the partial tiles are summed in the fixed order 0..S-1 (the same
// bits on every run), then bias and cast:
//   * on sm_90, the S CTAs of a tile form a cluster: each leaves its fp32
//     partial in its own shared memory and reduces 1/S of the tile by
//     reading all S partials over distributed shared memory (one kernel,
//     no workspace);
//   * elsewhere each CTA stores its partial to a workspace and a second
//     kernel reduces.
//
// Torch-free: pointers, sizes and strides in, see skinny.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#include "../cp_async.cuh"
#include "../ldmatrix.cuh"
#include "../hopper/ptx.cuh"
#include "../epilogue.cuh"
#include "../simt/numeric.cuh"
#include "../sm80/sm80.cuh"  // Mma (m16n8k16, m16n8k8 tf32), to_tf32, ld_shared_b32, smem_u32
#include "skinny.h"

namespace tiled {
namespace cuda {
namespace skinny {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// 16-byte global -> shared copy; bytes past `src_bytes` (0..16) are zeroed.
// With `hint`, under the L2 policy `policy` (l2_evict_first_policy).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes, bool hint = false,
                                           uint64_t policy = 0) {
  if (hint)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes), "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

// A tile of ROWS rows of CHUNKS 16-byte chunks in shared memory; chunk `ch`
// of row `r` is stored at chunk ch ^ s(r):
//   s(r) = r mod min(8, CHUNKS): the 8 rows an ldmatrix reads at one logical
//     chunk hit 8 different bank groups;
//   PAIRS (tf32 M/N-major tiles, read by 32-bit loads over rows k..k+3, k a
//     multiple of 4, x chunks {c, c + 1}, c even): s(r) = 2 (r & 3) where a
//     row is whole 128-byte groups (CHUNKS >= 8), spreading those 4 x 2
//     chunks over the 8 bank groups; 64-byte rows (4 chunks: BM = 16) already
//     do with r & 3.
template <int ROWS, int CHUNKS, bool PAIRS = false>
struct SwizzledTile {
  static constexpr int kChunks = CHUNKS;
  static constexpr int kMask = (kChunks < 8 ? kChunks : 8) - 1;
  static constexpr int kBytes = ROWS * CHUNKS * 16;
  static __device__ __forceinline__ int swizzle(int row) {
    return PAIRS && kChunks >= 8 ? (row & 3) << 1 : row & kMask;
  }
  static __device__ __forceinline__ uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>((row * kChunks + (chunk ^ swizzle(row))) * 16);
  }
  // Cooperative copy of rows [row0, row0 + ROWS) x the CHUNKS chunks of
  // elements from col0 of a matrix whose element (r, c) is at
  // base[r * ld + c]; rows >= row_end and cols >= col_end read as zero.
  template <class T>
  static __device__ __forceinline__ void load(uint32_t dst, const T* base, int64_t ld, int row0, int row_end,
                                              int col0, int col_end, int tid, bool hint = false,
                                              uint64_t policy = 0) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));  // elements per chunk
    constexpr int kTotal = ROWS * kChunks;
    static_assert(kTotal % kThreads == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
    for (int i = 0; i < kTotal / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx / kChunks, ch = idx % kChunks;
      const int row = row0 + r, col = col0 + ch * kPer;
      int n = 0;  // elements of the chunk inside the matrix
      const T* src = base;
      if (row < row_end && col < col_end) {
        n = min(col_end - col, kPer);
        src = base + static_cast<int64_t>(row) * ld + col;
      }
      if (n == kPer) {
        cp_async16(dst + offset(r, ch), src, 16, hint, policy);
      } else {
        // An edge chunk: only its elements inside the matrix are read, by
        // plain loads, the rest zero (a 16-byte cp.async of a chunk that
        // ends inside a small allocation reads past it, whatever its
        // src-size: compute-sanitizer's memcheck flagged a 1x1 operand).
        uint32_t w[4] = {0u, 0u, 0u, 0u};
        if constexpr (sizeof(T) == 2) {
          const uint16_t* s16 = reinterpret_cast<const uint16_t*>(src);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (e < n) w[e / 2] |= static_cast<uint32_t>(s16[e]) << (16 * (e % 2));
        } else {
          const uint32_t* s32 = reinterpret_cast<const uint32_t*>(src);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (e < n) w[e] = s32[e];
        }
        const uint32_t d = dst + offset(r, ch);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(d), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
      }
    }
  }
};

// C(row, col) = the dtype of (v + bias), the bias indexed by column (by row
// for a swapped problem).  Every epilogue ends here.
// With an epilogue (p.epi), after the bias and before the cast, at the
// caller's (batch, row, col): the K slices are summed by then.
template <class T>
__device__ __forceinline__ void store_out(const Params& p, T* C, int64_t batch, int row, int col, float v) {
  const T* bias = static_cast<const T*>(p.bias);
  if (bias) v += to_acc<float>(bias[p.bias_on_rows ? row : col]);
  if (p.epi.any())  // uniform branch
    v = epilogue_element_rt<T, float>(p.epi, v, batch, p.bias_on_rows ? col : row, p.bias_on_rows ? row : col);
  C[row * p.c_rs + col * p.c_cs] = from_acc<T>(v);
}

// One CTA: a BM x 128 tile of C over k-blocks [kb0, kb1) of one batch.
// A_KMAJOR: A(m, k) at a[m * lda + k], else a[k * lda + m].
// B_KMAJOR: B(k, n) at b[n * ldb + k], else b[k * ldb + n].
template <class T, int BM, int STAGES, bool A_KMAJOR, bool B_KMAJOR>
__global__ void __launch_bounds__(kThreads) skinny_kernel(Params p) {
  constexpr bool kTf32 = sizeof(T) == 4;
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  constexpr int kBK = bk_for(sizeof(T));                  // K per k-block
  constexpr int kMmaK = kTf32 ? 8 : 16;                   // K per mma
  constexpr int MT = BM / 16;
  constexpr int WN = kBN / kWarps;  // 32 columns per warp
  constexpr int NT = WN / 8;
  using TileA = SwizzledTile<A_KMAJOR ? BM : kBK, (A_KMAJOR ? kBK : BM) / kPer, kTf32 && !A_KMAJOR>;
  using TileB = SwizzledTile<B_KMAJOR ? kBN : kBK, (B_KMAJOR ? kBK : kBN) / kPer, kTf32 && !B_KMAJOR>;
  constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // grid: x = m-tile * splits + split (a cluster is the S slices of a tile),
  // y = n-tile, z = batch
  const int split = blockIdx.x % p.splits;
  const int m0 = (blockIdx.x / p.splits) * BM, n0 = blockIdx.y * kBN;
  const int64_t batch = blockIdx.z;
  const int k_blocks = (p.K + kBK - 1) / kBK;
  const int kb0 = split * p.k_blocks_per_split;
  const int kb1 = min(kb0 + p.k_blocks_per_split, k_blocks);
  const T* A = static_cast<const T*>(p.a) + batch * p.a_batch;
  const T* B = static_cast<const T*>(p.b) + batch * p.b_batch;
  const uint32_t base = sm80::smem_u32(smem);
  const uint64_t b_policy = p.stream_b ? l2_evict_first_policy() : 0;

  auto load_stage = [&](int kb, int slot) {
    const uint32_t sa = base + slot * kStageBytes, sb = sa + TileA::kBytes;
    const int k0 = kb * kBK;
    if (A_KMAJOR)
      TileA::load(sa, A, p.lda, m0, p.M, k0, p.K, tid);
    else
      TileA::load(sa, A, p.lda, k0, p.K, m0, p.M, tid);
    if (B_KMAJOR)
      TileB::load(sb, B, p.ldb, n0, p.N, k0, p.K, tid, p.stream_b, b_policy);
    else
      TileB::load(sb, B, p.ldb, k0, p.K, n0, p.N, tid, p.stream_b, b_policy);
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (kb0 + s < kb1) load_stage(kb0 + s, s);
    cp_async_commit();  // empty groups keep the count uniform
  }

  // ldmatrix lane roles: matrix j = lane / 8, row r = lane % 8 of it.  mma
  // fragment roles: g = lane / 4 (row of A / column of B), q = lane % 4.
  const int j = lane / 8, r = lane % 8;
  const int g = lane / 4, q = lane % 4;
  const int wn0 = warp * WN;
  for (int kb = kb0; kb < kb1; ++kb) {
    const int it = kb - kb0;
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage `it` landed for everyone; slot it-1 is free
    {
      const int next = kb + STAGES - 1;
      if (next < kb1) load_stage(next, (it + STAGES - 1) % STAGES);
      cp_async_commit();
    }
    const uint32_t sa = base + (it % STAGES) * kStageBytes, sb = sa + TileA::kBytes;
#pragma unroll
    for (int kk = 0; kk < kBK / kMmaK; ++kk) {
      uint32_t af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // The fragment a0..a3 as ldmatrix's matrices (rows 0-7, k 0-h), (rows
        // 8-15, k 0-h), (rows 0-7, k h-2h), (rows 8-15, k h-2h), h = kMmaK / 2
        // = one 16-byte chunk of K (8 16-bit elements, 4 fp32).  A tf32
        // M-major A: the same a0..a3 = A(g, q), A(g + 8, q), A(g, q + 4),
        // A(g + 8, q + 4) by 32-bit loads.
        const int m = mt * 16 + (j & 1) * 8, k = kk * kMmaK + (j >> 1) * (kMmaK / 2);
        if constexpr (A_KMAJOR) {
          ldmatrix_x4(af[mt], sa + TileA::offset(m + r, k / kPer));
        } else if constexpr (!kTf32) {
          ldmatrix_x4_trans(af[mt], sa + TileA::offset(k + r, m / kPer));
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int mi = mt * 16 + g + (i & 1) * 8, ki = kk * 8 + q + (i >> 1) * 4;
            af[mt][i] = sm80::ld_shared_b32(sa + TileA::offset(ki, mi / 4) + (mi % 4) * 4);
          }
        }
        if constexpr (kTf32) {
#pragma unroll
          for (int i = 0; i < 4; ++i) af[mt][i] = sm80::to_tf32(af[mt][i]);
        }
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        // bf[0], bf[1]: b0, b1 of the n8 tile 2 np; bf[2], bf[3]: of 2 np + 1.
        // As ldmatrix's matrices (n 0-7, k 0-h), (n 0-7, k h-2h), (n 8-15,
        // k 0-h), (n 8-15, k h-2h); a tf32 N-major B: b0, b1 = B(q, g),
        // B(q + 4, g) of each n8 tile by 32-bit loads.
        uint32_t bf[4];
        const int n = wn0 + np * 16 + (j >> 1) * 8, k = kk * kMmaK + (j & 1) * (kMmaK / 2);
        if constexpr (B_KMAJOR) {
          ldmatrix_x4(bf, sb + TileB::offset(n + r, k / kPer));
        } else if constexpr (!kTf32) {
          ldmatrix_x4_trans(bf, sb + TileB::offset(k + r, n / kPer));
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int ni = wn0 + np * 16 + (i >> 1) * 8 + g, ki = kk * 8 + q + (i & 1) * 4;
            bf[i] = sm80::ld_shared_b32(sb + TileB::offset(ki, ni / 4) + (ni % 4) * 4);
          }
        }
        if constexpr (kTf32) {
#pragma unroll
          for (int i = 0; i < 4; ++i) bf[i] = sm80::to_tf32(bf[i]);
        }
        const uint32_t b_lo[2] = {bf[0], bf[1]}, b_hi[2] = {bf[2], bf[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          sm80::Mma<T>::run(acc[mt][2 * np], af[mt], b_lo);
          sm80::Mma<T>::run(acc[mt][2 * np + 1], af[mt], b_hi);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory at exit

  // Accumulator (mt, nt, e): row mt*16 + lane/4 (+8 for e >= 2), column
  // wn0 + nt*8 + (lane%4)*2 + (e & 1) (m16n8k16 and m16n8k8 alike).
  T* C = static_cast<T*>(p.c) + batch * p.c_batch;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (p.cluster_reduce) {
    // Partial tile -> own shared memory (row stride kBN + 4 floats: 16-byte
    // aligned rows, shifted banks), then CTA `split` of the cluster sums
    // its 1/S of the tile's float4 groups over the S CTAs in rank order.
    constexpr int LDR = kBN + 4;
    static_assert(BM * LDR * 4 <= STAGES * kStageBytes, "partial tile must fit the pipeline buffers");
    __syncthreads();  // every warp is done reading the pipeline buffers
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = mt * 16 + g + 8 * h, col = wn0 + nt * 8 + 2 * q;
          sm90::st_shared_v2(base + (row * LDR + col) * 4, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        }
    sm90::cluster_sync();  // all partials written, visible cluster-wide
    constexpr int kGroups = BM * kBN / 4;
    const int per = (kGroups + p.splits - 1) / p.splits;
    const int end = min((split + 1) * per, kGroups);
    for (int gi = split * per + tid; gi < end; gi += kThreads) {
      const int row = gi / (kBN / 4), col = (gi % (kBN / 4)) * 4;
      float v[4] = {0.f, 0.f, 0.f, 0.f};
      for (int s = 0; s < p.splits; ++s) {
        const float4 x = sm90::ld_shared_cluster_v4(base + (row * LDR + col) * 4, s);
        v[0] += x.x;
        v[1] += x.y;
        v[2] += x.z;
        v[3] += x.w;
      }
      const int r = m0 + row;
      if (r < p.M) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = n0 + col + e;
          if (c >= p.N) break;
          store_out(p, C, batch, r, c, v[e]);
        }
      }
    }
    sm90::cluster_sync();  // no CTA leaves while a peer still reads its partial
    return;
  }
#endif
  if (p.splits > 1) {
    float* ws = p.ws + (batch * p.splits + split) * static_cast<int64_t>(p.M) * p.N;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + mt * 16 + g + 8 * h, col = n0 + wn0 + nt * 8 + 2 * q;
          if (row >= p.M) continue;
          float* dst = ws + static_cast<int64_t>(row) * p.N + col;
          if (col + 1 < p.N && (p.N % 2) == 0) {
            *reinterpret_cast<float2*>(dst) = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
          } else {
            if (col < p.N) dst[0] = acc[mt][nt][2 * h];
            if (col + 1 < p.N) dst[1] = acc[mt][nt][2 * h + 1];
          }
        }
    return;
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int row = m0 + mt * 16 + g + 8 * h, col = n0 + wn0 + nt * 8 + 2 * q + e;
          if (row >= p.M || col >= p.N) continue;
          store_out(p, C, batch, row, col, acc[mt][nt][2 * h + e]);
        }
}

// Sums the splits' partials in order 0..S-1, adds the bias, casts.
template <class T>
__global__ void __launch_bounds__(256) skinny_reduce_kernel(Params p) {
  const int64_t mn = static_cast<int64_t>(p.M) * p.N;
  const int64_t batch = blockIdx.y;
  T* C = static_cast<T*>(p.c) + batch * p.c_batch;
  const float* ws = p.ws + batch * p.splits * mn;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < mn;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = 0.f;
    for (int s = 0; s < p.splits; ++s) v += ws[s * mn + i];
    store_out(p, C, batch, static_cast<int>(i / p.N), static_cast<int>(i % p.N), v);
  }
}

#else  // host pass, or a GPU without bf16 mma.sync / cp.async (skinny_can_run
      // declines those; trap rather than return garbage if one gets here)

template <class T, int BM, int STAGES, bool A_KMAJOR, bool B_KMAJOR>
__global__ void skinny_kernel(Params) {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}
template <class T>
__global__ void skinny_reduce_kernel(Params) {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

#endif

}  // namespace skinny
}  // namespace cuda
}  // namespace tiled
