// What an L2 evict_first policy buys a read-once stream, by what L2 holds
// before it.
//
// A GEMM with one tile row reads each element of B once.  The benchmark's L2
// flush (and any large producer kernel before a layer) leaves L2 full of
// DIRTY lines: a plain read then evicts them one for one and pays their
// write-back to HBM.  Lines loaded under createpolicy ... evict_first are
// the first victims of later misses, so the stream mostly replaces its own
// clean lines and the write-backs are left for later.  This program times a
// read of `bytes` (16-byte loads, every SM busy) in three L2 states:
//   dirty:  after writing a buffer of 8x the L2 size (what do_bench does)
//   clean:  after reading such a buffer (L2 full of clean lines)
//   warm:   right after reading the same bytes (partly L2-resident)
// each with plain loads, loads under evict_first, and cp.async (the skinny
// kernel's copy) with and without the hint; and plain / evict_first loads
// eight in flight per thread (what deeper queues of loads buy), and under
// evict_first 8 or 16 in flight from 64, 128 or 264 CTAs (does a grid of
// 64-row tiles at N = 4096, 64 CTAs, need more CTAs or more in flight?),
// and from one CTA per SM with and without 180 KB of dynamic shared memory
// (what a launch that needs the SM's shared memory reconfigured costs).
// Median of 41 runs, cudaEvents.
// Build and run (on the GPU): nvcc -O3 -arch=sm_90a -o /tmp/l2ef
//   benchmarks/research/micro/l2_evict_first.cu && /tmp/l2ef
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#include "../../csrc/cuda/cp_async.cuh"  // l2_evict_first_policy: the kernels' own policy

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));         \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

enum Mode { kPlain = 0, kHint = 1, kCpAsync = 2, kCpAsyncHint = 3, kPlain8 = 4, kHint8 = 5, kHint16 = 6 };

// One 16-byte load, under L2's evict_first policy when `hint`.
__device__ __forceinline__ uint4 load16(const uint4* p, bool hint, uint64_t policy) {
  uint4 v;
  if (hint)
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(policy));
  else
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Each thread reads 16-byte chunks with a grid stride and folds them into
// one word (written only when impossible, so the loads stay live).
template <int MODE>
__global__ void __launch_bounds__(256) read_kernel(const uint4* src, int64_t n, uint32_t* sink) {
  __shared__ uint4 stage[256 * 4];
  const uint64_t policy = tiled::cuda::l2_evict_first_policy();
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (MODE != kCpAsync && MODE != kCpAsyncHint) {
    // U independent loads in flight per thread before any is used.
    constexpr int U = MODE == kHint16 ? 16 : MODE == kPlain8 || MODE == kHint8 ? 8 : 1;
    constexpr bool kHinted = MODE == kHint || MODE == kHint8 || MODE == kHint16;
    for (; i < n; i += U * stride) {
      uint4 v[U];
#pragma unroll
      for (int j = 0; j < U; ++j) v[j] = load16(src + (i + j * stride < n ? i + j * stride : i), kHinted, policy);
#pragma unroll
      for (int j = 0; j < U; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
  } else {
    // Four copies in flight per thread, then wait and fold.
    for (; i < n; i += 4 * stride) {
      const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(&stage[threadIdx.x * 4]));
      for (int j = 0; j < 4; ++j) {
        const int64_t k = i + j * stride;
        const int bytes = k < n ? 16 : 0;
        const uint4* s = k < n ? src + k : src;
        if (MODE == kCpAsyncHint)
          asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(base + 16 * j),
                       "l"(s), "r"(bytes), "l"(policy)
                       : "memory");
        else
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(base + 16 * j), "l"(s), "r"(bytes)
                       : "memory");
      }
      asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
      for (int j = 0; j < 4; ++j) {
        const uint4 v = stage[threadIdx.x * 4 + j];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
      }
    }
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void write_kernel(uint4* dst, int64_t n, uint32_t salt) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = make_uint4(salt, salt ^ 1u, static_cast<uint32_t>(i), 7u);
}

int main() {
  int dev = 0, sms = 0, l2 = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, l2 >> 20);

  const int64_t flush_bytes = 8LL * l2;
  uint4 *flush = nullptr, *data = nullptr;
  uint32_t* sink = nullptr;
  const int64_t max_bytes = 112LL << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&data, max_bytes));
  CHECK(cudaMalloc(&sink, 4));
  write_kernel<<<sms * 8, 256>>>(data, max_bytes / 16, 3u);
  CHECK(cudaDeviceSynchronize());

  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  // The reads timed: kernel, grid (0: sms * 4 CTAs, -1: one per SM), dynamic
  // shared memory: the last with 180 KB of it per CTA (unused), as the
  // tensor-core kernels ask for, so the SM's L1 / shared split must change
  // after the flush's kernel, which uses none.
  constexpr int kBigSmem = 180 * 1024;
  CHECK(cudaFuncSetAttribute(read_kernel<kHint8>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBigSmem));
  struct Read {
    const char* name;
    void (*kernel)(const uint4*, int64_t, uint32_t*);
    int grid;
    int smem;
  };
  const Read reads[] = {{"ld", read_kernel<kPlain>, 0, 0},
                        {"ld+evict_first", read_kernel<kHint>, 0, 0},
                        {"cp.async", read_kernel<kCpAsync>, 0, 0},
                        {"cp.async+evict_first", read_kernel<kCpAsyncHint>, 0, 0},
                        {"ld x8", read_kernel<kPlain8>, 0, 0},
                        {"ld x8+evict_first", read_kernel<kHint8>, 0, 0},
                        {"ld x8+ef 64 CTAs", read_kernel<kHint8>, 64, 0},
                        {"ld x8+ef 128 CTAs", read_kernel<kHint8>, 128, 0},
                        {"ld x8+ef 264 CTAs", read_kernel<kHint8>, 264, 0},
                        {"ld x16+ef 64 CTAs", read_kernel<kHint16>, 64, 0},
                        {"ld x16+ef 128 CTAs", read_kernel<kHint16>, 128, 0},
                        {"ld x8+ef 1 CTA/SM", read_kernel<kHint8>, -1, 0},
                        {"ld x8+ef 1 CTA/SM+180KB", read_kernel<kHint8>, -1, kBigSmem}};
  const char* state_names[] = {"dirty", "clean", "warm"};
  const int64_t sizes[] = {8LL << 20, 32LL << 20, 112LL << 20};
  std::printf("%-8s %-6s %-22s %10s %8s\n", "bytes", "L2", "loads", "median us", "GB/s");
  for (int64_t bytes : sizes) {
    const int64_t n = bytes / 16;
    for (int state = 0; state < 3; ++state) {
      for (const Read& r : reads) {
        std::vector<float> us;
        for (int rep = 0; rep < 41; ++rep) {
          if (state == 0) write_kernel<<<sms * 8, 256>>>(flush, flush_bytes / 16, rep);
          if (state == 1) read_kernel<kPlain><<<sms * 8, 256>>>(flush, flush_bytes / 16, sink);
          if (state == 2) read_kernel<kPlain><<<sms * 8, 256>>>(data, n, sink);
          CHECK(cudaEventRecord(t0));
          const dim3 grid(r.grid > 0 ? r.grid : r.grid == 0 ? sms * 4 : sms);
          r.kernel<<<grid, 256, r.smem>>>(data, n, sink);
          CHECK(cudaEventRecord(t1));
          CHECK(cudaEventSynchronize(t1));
          float ms = 0.f;
          CHECK(cudaEventElapsedTime(&ms, t0, t1));
          us.push_back(ms * 1e3f);
        }
        std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
        const float med = us[us.size() / 2];
        std::printf("%-8lld %-6s %-22s %10.2f %8.0f\n", static_cast<long long>(bytes >> 20), state_names[state],
                    r.name, med, bytes / (med * 1e3));
      }
    }
  }
  CHECK(cudaGetLastError());
  return 0;
}
