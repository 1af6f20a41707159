// Per-CTA timeline of one sm90 configuration (the clock64 stamps make_probe.py
// puts into a copy of gemm_sm90.cuh) and its event time, with L2 flushed
// before each launch and warm: medians over CTAs and 25 launches, in cycles
// from each CTA's first instructions.  bf16, row-major A and B (NN), 128x64
// tiles, or 128x128 with -DCFG128; any other Sm90Config with -DCFG=...
#include "../dispatch.h"
#include "gemm_sm90_probe.cuh"
#include <cstdio>
#include <vector>
#include <algorithm>
using namespace tiled;
using namespace tiled::cuda::sm90;
using namespace tiled::cuda;
#ifdef CFG128
#define CFG Sm90Config<__nv_bfloat16, 128, false, true>
#endif
#ifndef CFG
#define CFG Sm90Config<__nv_bfloat16, 64, false, true>
#endif
int main(int argc, char** argv) {
  int M = argc > 1 ? atoi(argv[1]) : 1024, N = argc > 2 ? atoi(argv[2]) : 1024, K = argc > 3 ? atoi(argv[3]) : 64;
  int tile_bn = CFG::kBN;
  __nv_bfloat16 *a, *b, *c; char* flush;
  cudaMalloc(&a, (size_t)M * K * 2); cudaMalloc(&b, (size_t)K * N * 2); cudaMalloc(&c, (size_t)M * N * 2);
  cudaMalloc(&flush, 512 << 20);
  std::vector<__nv_bfloat16> h((size_t)std::max(M, N) * K);
  for (auto& x : h) x = __float2bfloat16((rand() % 17 - 8) / 8.f);
  cudaMemcpy(a, h.data(), (size_t)M * K * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h.data(), (size_t)K * N * 2, cudaMemcpyHostToDevice);
  GemmProblem p; p.M = M; p.N = N; p.K = K; p.dtype = DType::bf16;
  p.a.ptr = a; p.a.row_stride = K; p.a.col_stride = 1;           // row-major A [M][K]
  if (CFG::kBMN) { p.b.ptr = b; p.b.row_stride = N; p.b.col_stride = 1; }   // row-major B [K][N]
  else { p.b.ptr = b; p.b.row_stride = 1; p.b.col_stride = K; }            // column-major B
  p.c = c; p.c_row_stride = N;
  DeviceInfo dev{}; cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  dev.sm_major = prop.major; dev.sm_minor = prop.minor; dev.num_sms = prop.multiProcessorCount;
  Choice ch{}; ch.b_mn = CFG::kBMN; ch.group_m = 8;
  unsigned long long* probe; cudaGetSymbolAddress((void**)&probe, g_probe);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const int tiles = ((M + 127) / 128) * ((N + tile_bn - 1) / tile_bn);
  const int grid = std::min(tiles, dev.num_sms);
  for (int flushed = 1; flushed >= 0; --flushed) {
    std::vector<float> ms; std::vector<std::vector<double>> d(16);
    for (int it = 0; it < 30; ++it) {
      cudaMemset(probe, 0, 4096 * 16 * 8);
      if (flushed) cudaMemsetAsync(flush, it, 512 << 20);
      cudaEventRecord(e0);
      const char* err = launch_sm90<CFG>(p, dev, 0, ch, nullptr);
      cudaEventRecord(e1);
      if (err) { printf("launch: %s\n", err); return 1; }
      cudaEventSynchronize(e1);
      float t; cudaEventElapsedTime(&t, e0, e1); if (it >= 5) ms.push_back(t * 1000);
      std::vector<unsigned long long> hp((size_t)grid * 16);
      cudaMemcpy(hp.data(), probe, hp.size() * 8, cudaMemcpyDeviceToHost);
      if (it < 5) continue;
      for (int blk = 0; blk < grid; ++blk) {
        auto* q = &hp[(size_t)blk * 16];
        // deltas from the CTA's first instruction (cycles); 9: CTA start - earliest CTA start (ns)
        for (int i = 1; i <= 15; ++i) if (i != 9 && i != 10 && i != 11 && q[i]) d[i].push_back((double)(long long)(q[i] - q[0]));
      }
      unsigned long long g0 = ~0ull, g1 = 0, gs = 0;
      for (int blk = 0; blk < grid; ++blk) { auto* q = &hp[(size_t)blk * 16]; g0 = std::min(g0, q[10]); g1 = std::max(g1, q[11]); gs = std::max(gs, q[10]); }
      d[9].push_back((double)(gs - g0)); d[10].push_back((double)(g1 - g0));
    }
    auto med = [](std::vector<double> v) { if (v.empty()) return -1.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::vector<double> mv(ms.begin(), ms.end());
    printf("%s M=%d N=%d K=%d grid=%d  event %.2f us | cycles from CTA start (median over CTAs x runs): "
           "init %.0f | prod entry %.0f | pf %.0f | coord %.0f | empty ok %.0f | 1st TMA %.0f | cons at wait %.0f | cons entry %.0f | data %.0f | mma done %.0f | epi issued %.0f | stores done %.0f "
           "| last CTA start %.0f ns, first start -> last store %.0f ns\n",
           flushed ? "flushed" : "warm   ", M, N, K, grid, med(mv), med(d[1]), med(d[2]), med(d[12]), med(d[13]), med(d[14]), med(d[3]), med(d[15]), med(d[8]), med(d[4]),
           med(d[5]), med(d[6]), med(d[7]), med(d[9]), med(d[10]));
  }
  cudaError_t e = cudaGetLastError();
  printf("cuda: %s\n", cudaGetErrorString(e));
  return 0;
}
