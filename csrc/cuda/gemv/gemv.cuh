// Few-row GEMM for bf16/fp16: C = A B (+ bias) with M (or, swapped, N) of
// 1..8 — a decode step's x @ W.T or x @ W.  Such a GEMM reads every element
// of B once and does M multiply-adds with it, so its time is B's bytes over
// the bandwidth the grid pulls.  No tensor cores: with at most 8 live rows a
// CUDA-core FMA per element is cheaper than padding to an mma tile, and the
// kernel's whole job is to keep many 16-byte loads of B in flight on every
// SM (two register buffers of them per thread, the next one issued before
// the current one is used) under L2's evict_first policy.
//
// A CTA (8 warps) computes MR x TN of C over one slice of K:
//   * A's slice (MR rows, rows past M zero) is copied to shared memory once,
//     while the first loads of B are in flight;
//   * K-major B (its K index contiguous, x @ W.T): each warp owns RW rows of
//     B (columns of C) and its lanes walk K in 16-byte chunks, 256 elements
//     per warp step; lane partials are summed by a butterfly of shuffles;
//   * N-major B (x @ W): each warp reads 4 k-rows x 64 columns per step (8
//     lanes of 16 bytes per row), the 8 warps take interleaved k-rows, and
//     their partials are summed through shared memory in warp order;
//   * S > 1 slices of K: the S CTAs of a tile are one cluster (sm_90); each
//     leaves its fp32 partial in its own shared memory and CTA s sums 1/S of
//     the tile over the S partials in rank order (distributed shared memory).
// Every sum has a fixed order: the same bits on every run.
//
// Torch-free: pointers, sizes and strides in, see gemv.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

#include "../cp_async.cuh"
#include "../hopper/ptx.cuh"
#include "../simt/numeric.cuh"
#include "gemv.h"

namespace tiled {
namespace cuda {
namespace gemv {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// An L2 policy that leaves lines at their usual priority (B read more than once).
__device__ __forceinline__ uint64_t l2_evict_normal_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16 bytes of B under `policy`, not kept in L1 (read once per CTA).
__device__ __forceinline__ uint4 ldg16(const uint16_t* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

// 8 consecutive elements at p, of which the first n (<= 0: none) exist; the
// rest read as zero.  p is 16-byte aligned whenever n >= 8.
__device__ __forceinline__ uint4 load8(const uint16_t* p, int n, uint64_t policy) {
  if (n >= 8) return ldg16(p, policy);
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    if (e < n) w[e / 2] |= static_cast<uint32_t>(p[e]) << (16 * (e & 1));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The low / high 16-bit element of a 32-bit word, as float.
template <class T>
struct Unpack;
template <>
struct Unpack<__nv_bfloat16> {
  static __device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
  static __device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
};
template <>
struct Unpack<__half> {
  static __device__ __forceinline__ float lo(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  }
  static __device__ __forceinline__ float hi(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
};

template <class T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = Unpack<T>::lo(w[i]);
    f[2 * i + 1] = Unpack<T>::hi(w[i]);
  }
}

// The MR elements of A at one k (N-major B's layout of A in shared memory:
// MR consecutive 16-bit values, 2 * MR bytes aligned).
template <class T, int MR>
__device__ __forceinline__ void load_a_column(const uint16_t* s, float (&a)[MR]) {
  if constexpr (MR == 8) {
    float f[8];
    unpack8<T>(*reinterpret_cast<const uint4*>(s), f);
#pragma unroll
    for (int m = 0; m < 8; ++m) a[m] = f[m];
  } else if constexpr (MR == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(s);
    a[0] = Unpack<T>::lo(v.x);
    a[1] = Unpack<T>::hi(v.x);
    a[2] = Unpack<T>::lo(v.y);
    a[3] = Unpack<T>::hi(v.y);
  } else if constexpr (MR == 2) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(s);
    a[0] = Unpack<T>::lo(w);
    a[1] = Unpack<T>::hi(w);
  } else {
    a[0] = Unpack<T>::lo(static_cast<uint32_t>(*s));
  }
}

// grid: x = tile * splits + slice (a cluster is the S slices of a tile),
// y = batch.
template <class T, int MR, bool BK>
__global__ void __launch_bounds__(kThreads, 2) gemv_kernel(Params p) {
  constexpr int RW = rows_per_warp(MR);
  constexpr int TN = tile_n(MR, BK);
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int split = blockIdx.x % p.splits, tile = blockIdx.x / p.splits;
  const int64_t batch = blockIdx.y;
  const int n0 = tile * TN;
  const int k0 = split * p.k_slice;
  const int kl = min(p.K - k0, p.k_slice);  // > 0: the host makes no empty slice
  const int ks = p.k_slice;
  uint16_t* const sa = reinterpret_cast<uint16_t*>(smem);           // A's slice, MR x ks
  float* const part = reinterpret_cast<float*>(smem + MR * ks * 2);  // [MR][TN] partial of C
  const uint16_t* const A = static_cast<const uint16_t*>(p.a) + batch * p.a_batch;
  const uint16_t* const B = static_cast<const uint16_t*>(p.b) + batch * p.b_batch;
  const uint64_t policy = p.stream_b ? l2_evict_first_policy() : l2_evict_normal_policy();

  // A's slice into shared memory, 8 elements of a row at a time: row-major
  // [m][k] for a K-major B (a lane reads 8 k of one row), [k][m] for an
  // N-major B (a lane reads the MR rows of one k).
  auto stage_a = [&]() {
    const int chunks = ks / 8;
    for (int c = tid; c < MR * chunks; c += kThreads) {
      const int m = c / chunks, kk = (c % chunks) * 8;
      uint32_t w[4] = {0u, 0u, 0u, 0u};
      if (m < p.M) {
        const int n = kl - kk;
        const uint16_t* src = A + m * p.a_rs + static_cast<int64_t>(k0 + kk) * p.a_cs;
        if (p.a_vec && n >= 8) {
          const uint4 v = *reinterpret_cast<const uint4*>(src);
          w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (e < n) w[e / 2] |= static_cast<uint32_t>(src[e * p.a_cs]) << (16 * (e & 1));
        }
      }
      if constexpr (BK) {
        *reinterpret_cast<uint4*>(sa + m * ks + kk) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) sa[(kk + e) * MR + m] = static_cast<uint16_t>(w[e / 2] >> (16 * (e & 1)));
      }
    }
  };

  if constexpr (BK) {
    // Rows n0 + warp * RW + r of B; the lane's k offsets are 8 * lane + 256 * j.
    float acc[RW][MR];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int m = 0; m < MR; ++m) acc[r][m] = 0.f;
    const int steps = (kl + 255) / 256;
    auto load = [&](uint4 (&buf)[RW], int j) {
      const int kk = 8 * lane + 256 * j;
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int n = n0 + warp * RW + r;
        buf[r] = load8(B + static_cast<int64_t>(n < p.N ? n : 0) * p.ldb + k0 + kk, n < p.N ? kl - kk : 0, policy);
      }
    };
    auto compute = [&](const uint4 (&buf)[RW], int j) {
      const int kk = 8 * lane + 256 * j;
      if (kk >= kl) return;  // past the slice: nothing loaded, and A's row ends
      float a[MR][8];
#pragma unroll
      for (int m = 0; m < MR; ++m) unpack8<T>(*reinterpret_cast<const uint4*>(sa + m * ks + kk), a[m]);
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        float b[8];
        unpack8<T>(buf[r], b);
#pragma unroll
        for (int m = 0; m < MR; ++m)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] = fmaf(a[m][e], b[e], acc[r][m]);
      }
    };
    uint4 b0[RW], b1[RW];
    load(b0, 0);
    stage_a();
    __syncthreads();
    for (int j = 0; j < steps; j += 2) {
      if (j + 1 < steps) load(b1, j + 1);
      compute(b0, j);
      if (j + 1 < steps) {
        if (j + 2 < steps) load(b0, j + 2);
        compute(b1, j + 1);
      }
    }
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        float v = acc[r][m];
#pragma unroll
        for (int s = 16; s >= 1; s /= 2) v += __shfl_xor_sync(0xffffffffu, v, s);
        acc[r][m] = v;
      }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int m = 0; m < MR; ++m) part[m * TN + warp * RW + r] = acc[r][m];
    }
    __syncthreads();
  } else {
    // Lane: columns n0 + 8 * c8 .. + 7, k-row rr of its warp's 4; step j
    // covers k-rows 32 j .. 32 j + 31 of the slice, warp w rows 4 w + rr.
    constexpr int U = MR >= 4 ? 4 : 8;  // k-rows per register buffer
    const int c8 = lane % 8, rr = lane / 8;
    const int col = n0 + 8 * c8;
    const int ncol = p.N - col;
    float acc[8][MR];
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int m = 0; m < MR; ++m) acc[e][m] = 0.f;
    const int groups = (kl + 32 * U - 1) / (32 * U);
    auto load = [&](uint4 (&buf)[U], int g) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = 32 * (g * U + u) + 4 * warp + rr;
        buf[u] = load8(B + static_cast<int64_t>(k0 + (k < kl ? k : 0)) * p.ldb + (ncol > 0 ? col : 0),
                       k < kl ? ncol : 0, policy);
      }
    };
    auto compute = [&](const uint4 (&buf)[U], int g) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int k = 32 * (g * U + u) + 4 * warp + rr;
        if (k >= kl) break;  // k grows with u
        float a[MR], b[8];
        load_a_column<T, MR>(sa + k * MR, a);
        unpack8<T>(buf[u], b);
#pragma unroll
        for (int e = 0; e < 8; ++e)
#pragma unroll
          for (int m = 0; m < MR; ++m) acc[e][m] = fmaf(a[m], b[e], acc[e][m]);
      }
    };
    uint4 b0[U], b1[U];
    load(b0, 0);
    stage_a();
    __syncthreads();
    for (int g = 0; g < groups; g += 2) {
      if (g + 1 < groups) load(b1, g + 1);
      compute(b0, g);
      if (g + 1 < groups) {
        if (g + 2 < groups) load(b0, g + 2);
        compute(b1, g + 1);
      }
    }
    // The 4 k-rows of a warp (lanes 8 apart), then the 8 warps in order.
#pragma unroll
    for (int e = 0; e < 8; ++e)
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        float v = acc[e][m];
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        acc[e][m] = v;
      }
    float* const wpart = part + MR * TN;  // [kWarps][MR][TN]
    if (rr == 0) {
#pragma unroll
      for (int m = 0; m < MR; ++m)
#pragma unroll
        for (int e = 0; e < 8; ++e) wpart[(warp * MR + m) * TN + 8 * c8 + e] = acc[e][m];
    }
    __syncthreads();
    for (int o = tid; o < MR * TN; o += kThreads) {
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += wpart[w * MR * TN + o];
      part[o] = v;
    }
    __syncthreads();
  }

  // part[m][t] is this slice's C[m, n0 + t]: sum the slices, add the bias, cast.
  T* const C = static_cast<T*>(p.c) + batch * p.c_batch;
  const T* const bias = static_cast<const T*>(p.bias);
  auto store = [&](int o, float v) {
    const int m = o / TN, n = n0 + o % TN;
    if (m >= p.M || n >= p.N) return;
    if (bias) v += to_acc<float>(bias[p.bias_on_rows ? m : n]);
    C[m * p.c_rs + n * p.c_cs] = from_acc<T>(v);
  };
  if (p.splits == 1) {
    for (int o = tid; o < MR * TN; o += kThreads) store(o, part[o]);
    return;
  }
  sm90::cluster_sync();  // every slice's partial written, visible cluster-wide
  constexpr int kGroups = MR * TN / 4;
  const int per = (kGroups + p.splits - 1) / p.splits;
  const int end = min((split + 1) * per, kGroups);
  const uint32_t part_addr = static_cast<uint32_t>(__cvta_generic_to_shared(part));
  for (int g = split * per + tid; g < end; g += kThreads) {
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    for (int s = 0; s < p.splits; ++s) {
      const float4 x = sm90::ld_shared_cluster_v4(part_addr + 16 * g, s);
      v[0] += x.x;
      v[1] += x.y;
      v[2] += x.z;
      v[3] += x.w;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) store(4 * g + e, v[e]);
  }
  sm90::cluster_sync();  // no CTA leaves while a peer still reads its partial
}

#else  // host pass, or a GPU before sm_90 (gemv.cu declines those)

template <class T, int MR, bool BK>
__global__ void gemv_kernel(Params) {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

#endif

}  // namespace gemv
}  // namespace cuda
}  // namespace tiled
