// FFMA issue rate by how many source operands come from the register file.
//
// A CUDA-core GEMM's inner loop is FFMA acc[i][j] += a[i] * b[j].  An FFMA
// names three source registers; the SASS `.reuse` flag lets one operand slot
// keep its value from the previous instruction, so in a run over one row
// (a[i] fixed) each FFMA reads two registers (b[j], acc[i][j]) and the row's
// first reads three.  This program measures what the three-read form costs:
// each pattern keeps 16 independent accumulator chains per thread (FFMA
// latency is covered) and the same number of FFMAs, only the operands differ.
//   two_reads:   acc[j] = fma(x, y[j], acc[j])            (x reused)
//   three_reads: acc[j] = fma(x[j], y[j], acc[j])         (nothing to reuse)
//   three_mixed: one three-read FFMA in every T (T = 16, 8, 4): the rows of
//                a thread tile 16, 8 or 4 wide with no reuse across rows
// Build and run (on the GPU): nvcc -O3 -arch=sm_90a -o /tmp/ffma
//   benchmarks/research/micro/ffma_operands.cu && /tmp/ffma
// It prints FFMA warp-instructions per SM clock (4.0 is the peak: one per
// scheduler) for 1 and 2 warps per scheduler (our SIMT GEMM runs 2).
// `cuobjdump -sass /tmp/ffma` shows the operand patterns ptxas emitted.
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kIters = 4096;

// Rows of width W: the first FFMA of a row takes a new x (three reads), the
// rest reuse it.  W = 1 is "three_reads"; W = 16 with one x for all is
// close to "two_reads" (one new x per 16).
template <int W>
__global__ void __launch_bounds__(256) rows_kernel(float* out, float seed) {
  float acc[16], y[16], x[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    acc[j] = 0.f;
    y[j] = seed * (j + 1) + threadIdx.x;
    x[j] = seed * (j + 3) - threadIdx.x;
  }
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int j = 0; j < 16; ++j) acc[j] = fmaf(x[j / W * W], y[j], acc[j]);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 16; ++j) s += acc[j];
  if (s == 12345.678f) out[threadIdx.x] = s;
}

template <int W>
float run(int warps_per_sm, int sms, int clock_khz) {
  float* out;
  cudaMalloc(&out, 4096);
  const int threads = warps_per_sm * 32;
  rows_kernel<W><<<sms, threads>>>(out, 1.0f);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  constexpr int kReps = 20;
  for (int r = 0; r < kReps; ++r) rows_kernel<W><<<sms, threads>>>(out, 1.0f + r);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaFree(out);
  const double ffma_warp_instr_per_sm = double(kReps) * kIters * 16 * warps_per_sm;
  const double clocks = ms * 1e-3 * clock_khz * 1e3;
  return static_cast<float>(ffma_warp_instr_per_sm / clocks);
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf("%s, %d SMs, max SM clock %d MHz (rates below use it: a lower real clock reads lower)\n",
              prop.name, prop.multiProcessorCount, clock_khz / 1000);
  for (int wps : {4, 8}) {
    std::printf("warps/SM %d: FFMA warp-instr per SM clock\n", wps);
    std::printf("  rows of 16 (1 three-read in 16): %.3f\n", run<16>(wps, prop.multiProcessorCount, clock_khz));
    std::printf("  rows of 8  (1 in 8):             %.3f\n", run<8>(wps, prop.multiProcessorCount, clock_khz));
    std::printf("  rows of 4  (1 in 4):             %.3f\n", run<4>(wps, prop.multiProcessorCount, clock_khz));
    std::printf("  rows of 2  (1 in 2):             %.3f\n", run<2>(wps, prop.multiProcessorCount, clock_khz));
    std::printf("  rows of 1  (every FFMA 3 reads): %.3f\n", run<1>(wps, prop.multiProcessorCount, clock_khz));
  }
  return 0;
}
