// Does compute-sanitizer's initcheck see global memory written by a TMA
// store (cp.async.bulk.tensor shared -> global) or a plain bulk store
// (cp.async.bulk shared -> global) as initialized?
//
//   nvcc -arch=sm_90a -o /tmp/probe initcheck_tma_store.cu
//   for m in st tma bulk none; do compute-sanitizer --tool initcheck /tmp/probe $m; done
//
// Each mode writes a fresh cudaMalloc buffer one way (none: not at all),
// then a second kernel reads all of it.  `st` (ordinary stores) must report
// no error and `none` one per element read: the controls.  tma and bulk
// answer the question.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>

constexpr int kRows = 64, kCols = 64;  // one 64 x 64 fp32 tile per CTA

__global__ void write(const __grid_constant__ CUtensorMap map, float* out, int mode) {
  __shared__ alignas(1024) float buf[kRows * kCols];
  float* tile = out + blockIdx.x * kRows * kCols;
  for (int i = threadIdx.x; i < kRows * kCols; i += blockDim.x) {
    if (mode == 0) tile[i] = float(i);
    else buf[i] = float(i);
  }
  if (mode == 0 || mode == 3) return;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t src = (uint32_t)__cvta_generic_to_shared(buf);
    if (mode == 1)
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                   ::"l"(&map), "r"(0), "r"((int)blockIdx.x * kRows), "r"(src) : "memory");
    else
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                   ::"l"(tile), "r"(src), "r"(kRows * kCols * 4) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

__global__ void read(const float* in, float* sum, int n) {
  float s = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
  atomicAdd(sum, s);
}

int main(int argc, char** argv) {
  const char* names[] = {"st", "tma", "bulk", "none"};
  int mode = -1;
  for (int m = 0; m < 4; ++m)
    if (argc > 1 && !strcmp(argv[1], names[m])) mode = m;
  if (mode < 0) { printf("usage: %s st|tma|bulk|none\n", argv[0]); return 2; }
  const int tiles = 4, n = tiles * kRows * kCols;
  float *out, *sum;
  cudaMalloc(&out, n * 4);
  cudaMalloc(&sum, 4);
  cudaMemset(sum, 0, 4);
  void* fp = nullptr;
  cudaDriverEntryPointQueryResult st;
  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fp, cudaEnableDefault, &st);
  CUtensorMap map;
  cuuint64_t dims[2] = {kCols, (cuuint64_t)tiles * kRows}, strides[1] = {kCols * 4};
  cuuint32_t box[2] = {kCols, kRows}, es[2] = {1, 1};
  if (((PFN_cuTensorMapEncodeTiled_v12000)fp)(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, out, dims, strides, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)) { printf("encode failed\n"); return 1; }
  write<<<tiles, 128>>>(map, out, mode);
  read<<<4, 256>>>(out, sum, n);
  float h = 0;
  cudaMemcpy(&h, sum, 4, cudaMemcpyDeviceToHost);
  // every tile holds 0 + 1 + ... + 4095
  printf("%s: %s, sum %.0f (expected %.0f)\n", names[mode], cudaGetErrorString(cudaGetLastError()), h,
         mode == 3 ? -1.0 : tiles * 4095.0 * 4096.0 / 2);
  return 0;
}
