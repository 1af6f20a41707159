// Per-CTA timeline of one sm90 configuration (the clock64 stamps make_probe.py
// puts into a copy of gemm_sm90.cuh) and its event time, with L2 flushed
// before each launch, then warm: for each stamp the median over CTAs and 25
// launches, in cycles from each CTA's first instructions, in time order.
// Arguments M N K [bias].  bf16, row-major A and B (NN), 128x64 tiles; 128x128 with -DCFG128, 128x256
// with -DCFG256; another Sm90Config from a file that defines CFG and then
// includes this one (nvcc splits -D values at commas).
#include "../dispatch.h"
#include "gemm_sm90_probe.cuh"
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>
using namespace tiled;
using namespace tiled::cuda;
using namespace tiled::cuda::sm90;
#ifdef CFG128
#define CFG Sm90Config<__nv_bfloat16, 128, false, true>
#endif
#ifdef CFG256
#define CFG Sm90Config<__nv_bfloat16, 256, false, true>
#endif
#ifndef CFG
#define CFG Sm90Config<__nv_bfloat16, 64, false, true>
#endif
int main(int argc, char** argv) {
  using T = CFG::Elem;
  const int M = argc > 1 ? atoi(argv[1]) : 1024, N = argc > 2 ? atoi(argv[2]) : 1024, K = argc > 3 ? atoi(argv[3]) : 64;
  T *a, *b, *c;
  char* flush;
  cudaMalloc(&a, (size_t)M * K * sizeof(T));
  cudaMalloc(&b, (size_t)K * N * sizeof(T));
  cudaMalloc(&c, (size_t)M * N * sizeof(T));
  cudaMalloc(&flush, 512 << 20);
  std::vector<T> h((size_t)std::max(M, N) * K);
  for (auto& x : h) x = static_cast<T>((rand() % 17 - 8) / 8.f);
  cudaMemcpy(a, h.data(), (size_t)M * K * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(b, h.data(), (size_t)K * N * sizeof(T), cudaMemcpyHostToDevice);
  GemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.dtype = sizeof(T) == 4 ? DType::f32 : std::is_same<T, __half>::value ? DType::f16 : DType::bf16;
  p.allow_tf32 = true;
  if (CFG::kAMN) p.a.ptr = a, p.a.row_stride = 1, p.a.col_stride = M;  // column-major A
  else p.a.ptr = a, p.a.row_stride = K, p.a.col_stride = 1;            // row-major A
  if (CFG::kBMN) p.b.ptr = b, p.b.row_stride = N, p.b.col_stride = 1;  // row-major B
  else p.b.ptr = b, p.b.row_stride = 1, p.b.col_stride = K;            // column-major B
  p.c = c, p.c_row_stride = N;
  if (argc > 4 && std::string(argv[4]) == "bias") {  // a bias of N random values, added in the epilogue
    T* bias;
    cudaMalloc(&bias, (size_t)N * sizeof(T));
    cudaMemcpy(bias, h.data(), (size_t)N * sizeof(T), cudaMemcpyHostToDevice);
    p.bias = bias;
  }
  DeviceInfo dev{};
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  dev.sm_major = prop.major, dev.sm_minor = prop.minor, dev.num_sms = prop.multiProcessorCount;
  Choice ch{};
  ch.a_mn = CFG::kAMN, ch.b_mn = CFG::kBMN, ch.group_m = 8, ch.cluster = CFG::kCluster;
  unsigned long long* probe;
  cudaGetSymbolAddress((void**)&probe, g_probe);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int tiles = ((M + CFG::kBM - 1) / CFG::kBM) * ((N + CFG::kBN - 1) / CFG::kBN);
  const int grid = std::min(tiles, dev.num_sms);
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? -1.0 : v[v.size() / 2];
  };
  for (int flushed = 1; flushed >= 0; --flushed) {
    std::vector<double> us, d[16], first_to_last;
    for (int it = 0; it < 30; ++it) {
      cudaMemset(probe, 0, 4096 * 16 * 8);
      if (flushed) cudaMemsetAsync(flush, it, 512 << 20);
      cudaEventRecord(e0);
      const char* err = launch_sm90<CFG>(p, dev, 0, ch, nullptr);
      cudaEventRecord(e1);
      if (err) {
        printf("launch: %s\n", err);
        return 1;
      }
      cudaEventSynchronize(e1);
      float t;
      cudaEventElapsedTime(&t, e0, e1);
      std::vector<unsigned long long> hp((size_t)grid * 16);
      cudaMemcpy(hp.data(), probe, hp.size() * 8, cudaMemcpyDeviceToHost);
      if (it < 5) continue;
      us.push_back(t * 1000);
      unsigned long long g0 = ~0ull, g1 = 0;
      for (int blk = 0; blk < grid; ++blk) {
        const unsigned long long* q = &hp[(size_t)blk * 16];
        for (int i = 1; i < 16; ++i)
          if (i != 10 && i != 11 && q[i]) d[i].push_back((double)(long long)(q[i] - q[0]));
        g0 = std::min(g0, q[10]), g1 = std::max(g1, q[11]);
      }
      first_to_last.push_back((double)(g1 - g0));
    }
    std::vector<std::pair<double, int>> order;
    for (int i = 1; i < 16; ++i)
      if (!d[i].empty()) order.push_back({med(d[i]), i});
    std::sort(order.begin(), order.end());
    printf("%s M=%d N=%d K=%d%s grid=%d  event %.2f us, first CTA start to last store %.0f ns | cycles:", flushed ? "flushed" : "warm",
           M, N, K, p.bias ? " bias" : "", grid, med(us), med(first_to_last));
    for (auto& o : order) printf(" %s %.0f |", kStampNames[o.second], o.first);
    printf("\n");
  }
  printf("cuda: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
