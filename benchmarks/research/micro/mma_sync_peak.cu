// The mma.sync tensor-core peak of this GPU: the physical limit of the sm80
// family (csrc/cuda/sm80), which reports its TFLOP/s as a fraction of it.
//
// Every warp of two 8-warp CTAs per SM issues mma.sync on register operands
// into 8 independent accumulators (no chain waits on one mma's result), no
// memory traffic.  Two measurements per dtype:
//   * "mma_sync_peak_tflops": random operands (each chain its own A and B
//     registers, random values in [-1, 1) as a GEMM on random data has), the
//     kernel launched back to back for about a second and the second half
//     timed: the rate the tensor cores keep up at the clock that power
//     allows with data that toggles.  This is the peak the family's records
//     divide by.
//   * "low_toggle_burst_tflops": nearly constant operands, one launch after
//     an idle pause, the best of 5: the rate at the highest boost clock,
//     which a GEMM on random data does not hold (docs/sm80.md).
// Prints one JSON object: {"device", "capability", "sms",
// "mma_sync_peak_tflops": {"bf16", "f16", "tf32"}, "low_toggle_burst_tflops": {...}}.
//
//   nvcc -O3 -std=c++17 -arch=native benchmarks/research/micro/mma_sync_peak.cu -o /tmp/mma_sync_peak && /tmp/mma_sync_peak
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

constexpr int kChains = 8;
constexpr int kIters = 4096;
constexpr int kThreads = 256;

enum Kind { kBf16 = 0, kF16 = 1, kTf32 = 2 };

template <int KIND>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (KIND == kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (KIND == kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// A register of random operand values in [-1, 1) (magnitudes 1/16 .. 1):
// two bf16 / fp16 halves, or one tf32 word.
template <int KIND>
__device__ uint32_t random_operand(uint32_t h) {
  if constexpr (KIND == kTf32) return (h & 0x807fe000u) | (0x3f000000u - ((h >> 8) & 3u) * 0x00800000u);
  auto half = [](uint32_t x) -> uint32_t {
    return KIND == kBf16 ? (x & 0x807fu) | (0x3f00u - ((x >> 7) & 3u) * 0x80u)    // bf16: 8-bit exponent
                         : (x & 0x83ffu) | (0x3800u - ((x >> 10) & 3u) * 0x400u);  // fp16: 5-bit exponent
  };
  return half(h) | (half(h >> 16) << 16);
}

template <int KIND, bool RANDOM>
__global__ void __launch_bounds__(kThreads) peak_kernel(float* out, uint32_t seed) {
  const uint32_t tid = blockIdx.x * kThreads + threadIdx.x;
  // Low toggle: one nearly constant value (0x3c00 / 0x3f80 halves, 1.0-ish tf32 bits).
  const uint32_t v = KIND == kTf32 ? 0x3f800000u ^ (seed & 0xff) : (KIND == kBf16 ? 0x3f803f80u : 0x3c003c00u) ^ seed;
  uint32_t a[kChains][4], b[kChains][2];
#pragma unroll
  for (int c = 0; c < kChains; ++c) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a[c][i] = RANDOM ? random_operand<KIND>(mix(tid * 97u + c * 13u + i + seed)) : (i == 1 ? v ^ threadIdx.x : v);
#pragma unroll
    for (int i = 0; i < 2; ++i)
      b[c][i] = RANDOM ? random_operand<KIND>(mix(tid * 89u + c * 7u + i + 5u + seed * 3u)) : (i == 1 ? v ^ blockIdx.x : v);
  }
  float acc[kChains][4] = {};
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) mma<KIND>(acc[c], a[c], b[c]);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (s == 12345.678f) out[tid] = s;  // keeps the work live
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Peak {
  double sustained, burst;
};

template <int KIND>
Peak measure(int sms, float* out) {
  const int blocks = 2 * sms;
  const double flops_per_mma = KIND == kTf32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
  const double flops = flops_per_mma * kChains * kIters * (kThreads / 32) * blocks;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  Peak p{0, 0};
  // Burst: one launch after 200 ms idle, the best of 5.
  peak_kernel<KIND, false><<<blocks, kThreads>>>(out, 0);
  for (int rep = 0; rep < 5; ++rep) {
    cudaDeviceSynchronize();
    const auto t = std::chrono::steady_clock::now();
    while (seconds_since(t) < 0.2) {
    }
    cudaEventRecord(start);
    peak_kernel<KIND, false><<<blocks, kThreads>>>(out, rep);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (flops / (ms * 1e-3) / 1e12 > p.burst) p.burst = flops / (ms * 1e-3) / 1e12;
  }
  // Sustained: launches back to back for ~0.6 s, then as many again timed.
  const auto t0 = std::chrono::steady_clock::now();
  int n = 0;
  while (seconds_since(t0) < 0.6) {
    peak_kernel<KIND, true><<<blocks, kThreads>>>(out, n++);
    if (n % 32 == 0) cudaDeviceSynchronize();
  }
  cudaEventRecord(start);
  for (int i = 0; i < n; ++i) peak_kernel<KIND, true><<<blocks, kThreads>>>(out, i);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  p.sustained = flops * n / (ms * 1e-3) / 1e12;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return p;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  float* out = nullptr;
  cudaMalloc(&out, sizeof(float) * kThreads * 2 * prop.multiProcessorCount);
  const Peak bf16 = measure<kBf16>(prop.multiProcessorCount, out);
  const Peak f16 = measure<kF16>(prop.multiProcessorCount, out);
  const Peak tf32 = measure<kTf32>(prop.multiProcessorCount, out);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::printf(
      "{\"device\": \"%s\", \"capability\": \"%d.%d\", \"sms\": %d, "
      "\"mma_sync_peak_tflops\": {\"bf16\": %.1f, \"f16\": %.1f, \"tf32\": %.1f}, "
      "\"low_toggle_burst_tflops\": {\"bf16\": %.1f, \"f16\": %.1f, \"tf32\": %.1f}}\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, bf16.sustained, f16.sustained, tf32.sustained,
      bf16.burst, f16.burst, tf32.burst);
  cudaFree(out);
  return 0;
}
