// Does a TMA load with a TFLOAT32 tensor map round fp32 to tf32 (and how)?
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

__global__ void load(const __grid_constant__ CUtensorMap map, uint32_t* out) {
  __shared__ alignas(1024) uint32_t buf[32 * 32];
  __shared__ alignas(8) uint64_t bar;
  uint32_t sb = (uint32_t)__cvta_generic_to_shared(&bar), sd = (uint32_t)__cvta_generic_to_shared(buf);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(sb));
    asm volatile("fence.proxy.async.shared::cta;");
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(sb), "r"(32 * 32 * 4));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(sd), "l"(&map), "r"(0), "r"((int)blockIdx.x * 32), "r"(sb) : "memory");
  }
  __syncthreads();
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\n @!p bra W;\n}" ::"r"(sb));
  for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) out[blockIdx.x * 1024 + i] = buf[i];
}
__global__ void ref(const float* in, uint32_t* rna, uint32_t* rn, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    uint32_t a, b;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(a) : "f"(in[i]));
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(b) : "f"(in[i]));
    rna[i] = a; rn[i] = b;
  }
}
int main() {
  const int rows = 32 * 64, n = rows * 32;
  std::vector<float> h(n);
  std::mt19937 g(1); std::normal_distribution<float> d;
  for (auto& x : h) x = d(g);
  // hand-picked: ties, just above/below, negatives
  float s[] = {1.f + 0x1p-11f, 1.f + 0x1p-11f + 0x1p-23f, 1.f + 3 * 0x1p-12f, 1.f + 0x1p-12f, -(1.f + 3 * 0x1p-12f),
               1.f + 0x1p-10f + 0x1p-11f, 1e-40f, -1e-40f};
  for (int i = 0; i < 8; ++i) h[i] = s[i];
  float* din; uint32_t *dout, *drna, *drn;
  cudaMalloc(&din, n * 4); cudaMalloc(&dout, n * 4); cudaMalloc(&drna, n * 4); cudaMalloc(&drn, n * 4);
  cudaMemcpy(din, h.data(), n * 4, cudaMemcpyHostToDevice);
  ref<<<(n + 255) / 256, 256>>>(din, drna, drn, n);
  std::vector<uint32_t> rna(n), rn(n), got(n);
  cudaMemcpy(rna.data(), drna, n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(rn.data(), drn, n * 4, cudaMemcpyDeviceToHost);
  void* fp = nullptr; cudaDriverEntryPointQueryResult st;
  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fp, cudaEnableDefault, &st);
  auto enc = (PFN_cuTensorMapEncodeTiled_v12000)fp;
  const char* names[] = {"FLOAT32", "TFLOAT32", "TFLOAT32_FTZ"};
  CUtensorMapDataType types[] = {CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
                                 CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ};
  for (int t = 0; t < 3; ++t) {
    CUtensorMap map;
    cuuint64_t dims[2] = {32, (cuuint64_t)rows}; cuuint64_t strides[1] = {128};
    cuuint32_t box[2] = {32, 32}, es[2] = {1, 1};
    CUresult r = enc(&map, types[t], 2, din, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r) { printf("%s: encode failed %d\n", names[t], r); continue; }
    cudaMemset(dout, 0xff, n * 4);
    load<<<rows / 32, 128>>>(map, dout);
    cudaError_t e = cudaDeviceSynchronize();
    if (e) { printf("%s: %s\n", names[t], cudaGetErrorString(e)); return 1; }
    cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost);
    int same = 0, trunc = 0, m_rna = 0, m_rn = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t b; memcpy(&b, &h[i], 4);
      same += got[i] == b; trunc += got[i] == (b & 0xffffe000u);
      m_rna += (got[i] & 0xffffe000u) == rna[i]; m_rn += (got[i] & 0xffffe000u) == rn[i];
    }
    printf("%-13s n=%d identical=%d low-bits-zeroed=%d (top bits) ==rna:%d ==rn:%d\n", names[t], n, same, trunc, m_rna, m_rn);
    for (int i = 0; i < 8; ++i) { uint32_t b; memcpy(&b, &h[i], 4); printf("   in %08x got %08x rna %08x rn %08x\n", b, got[i], rna[i], rn[i]); }
  }
}
