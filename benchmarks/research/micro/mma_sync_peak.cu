// The mma.sync tensor-core peak of this GPU: the physical limit of the sm80
// family (csrc/cuda/sm80), which reports its TFLOP/s as a fraction of it.
//
// Every warp of two 8-warp CTAs per SM issues mma.sync on register operands
// into 8 independent accumulators (no chain waits on one mma's result), no
// memory traffic; each dtype runs 5 times, the best counts.  Prints one JSON
// object: {"device": ..., "sms": ..., "mma_sync_peak_tflops": {"bf16": ...,
// "f16": ..., "tf32": ...}} (the results file's top-level
// "mma_sync_peak_tflops" is its bf16 value unless a dtype is named).
//
//   nvcc -O3 -std=c++17 -arch=native benchmarks/research/micro/mma_sync_peak.cu -o /tmp/mma_sync_peak && /tmp/mma_sync_peak
#include <cuda_runtime.h>

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

template <int KIND>
__global__ void __launch_bounds__(kThreads) peak_kernel(float* out, uint32_t seed) {
  // Small operand values (0x3c00 / 0x3f80 halves, 1.0-ish tf32 bits) keep
  // the accumulators finite; their values do not change the rate.
  const uint32_t v = KIND == kTf32 ? 0x3f800000u ^ (seed & 0xff) : (KIND == kBf16 ? 0x3f803f80u : 0x3c003c00u) ^ seed;
  uint32_t a[4] = {v, v ^ threadIdx.x, v, v}, b[2] = {v, v ^ blockIdx.x};
  float acc[kChains][4] = {};
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) mma<KIND>(acc[c], a, b);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (s == 12345.678f) out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the work live
}

template <int KIND>
double measure(int sms, float* out) {
  const int blocks = 2 * sms;
  const double flops_per_mma = KIND == kTf32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
  const double flops = flops_per_mma * kChains * kIters * (kThreads / 32) * blocks;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  peak_kernel<KIND><<<blocks, kThreads>>>(out, 0);  // warm-up (clocks up)
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(start);
    peak_kernel<KIND><<<blocks, kThreads>>>(out, rep);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double tflops = flops / (ms * 1e-3) / 1e12;
    if (tflops > best) best = tflops;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
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
  const double bf16 = measure<kBf16>(prop.multiProcessorCount, out);
  const double f16 = measure<kF16>(prop.multiProcessorCount, out);
  const double tf32 = measure<kTf32>(prop.multiProcessorCount, out);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::printf(
      "{\"device\": \"%s\", \"capability\": \"%d.%d\", \"sms\": %d, \"mma_sync_peak_tflops\": "
      "{\"bf16\": %.1f, \"f16\": %.1f, \"tf32\": %.1f}}\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, bf16, f16, tf32);
  cudaFree(out);
  return 0;
}
