// Strict-fp32 large config (ladder steps 108 / 109) built four ways (ptxas
// level, FFMA order, k-tile, stages: build.sh's VARIANTS), against cuBLAS's
// SGEMM, in one process: every variant's output bitwise against the first (they
// give each accumulator the same FFMAs in the same k order), then 6 rounds,
// the variants' order alternating, each a median of event-timed calls with
// a 256 MB memset before each call (L2 flushed); operands random, never
// zeros.  Prints TFLOP/s (median of the rounds' medians) and the per-round
// ratios cuBLAS time / ours.  Build: benchmarks/micro/ptxas_ab/build.sh.
// (docs/ladder.md, round 7.)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>
#include "gemm_problem.h"
#include "cuda/dispatch.h"

#define DECL(ns) namespace tiled { namespace cuda { namespace ns { const char* run_kernel(const GemmProblem&, const DeviceInfo&, cudaStream_t); const char* name(); }}}
DECL(l_v0) DECL(l_v1) DECL(l_v2) DECL(l_v3)
using namespace tiled; using namespace tiled::cuda;
typedef const char* (*Fn)(const GemmProblem&, const DeviceInfo&, cudaStream_t);
__global__ void fill(float* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    x[i] = (h & 0xffffff) / float(0x800000) - 1.0f;
  }
}
int main(int argc, char** argv) {
  const char* names[] = {l_v0::name(), l_v1::name(), l_v2::name(), l_v3::name(), "cublas"};
  Fn fns[] = {l_v0::run_kernel, l_v1::run_kernel, l_v2::run_kernel, l_v3::run_kernel, nullptr};
  const int nv = 5;
  DeviceInfo dev; cudaDeviceProp pr; cudaGetDeviceProperties(&pr, 0);
  dev.sm_major = pr.major; dev.sm_minor = pr.minor; dev.num_sms = pr.multiProcessorCount;
  dev.max_smem_per_block_optin = pr.sharedMemPerBlockOptin; dev.l2_bytes = pr.l2CacheSize;
  printf("%s\n", pr.name);
  cublasHandle_t h; cublasCreate(&h);
  float *flush; size_t fl = 256u << 20; cudaMalloc(&flush, fl);
  struct Case { int M, N, K; const char* lay; };
  std::vector<Case> cases = {{4096,4096,4096,"NN"},{4096,4096,4096,"TN"},{4096,4096,4096,"NT"},{8192,8192,8192,"NN"},{4096,14336,4096,"NN"},{4096,4096,14336,"NN"},{2048,2048,2048,"NN"}};
  // `ab M N K LAYOUT`: that case only, each variant run once after the check
  // (for a profiler: ncu -k regex:l_v0 ... ab 4096 4096 4096 NN).
  const bool once = argc == 5;
  if (once) cases = {{atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), argv[4]}};
  for (auto& cs : cases) {
    size_t sa = (size_t)cs.M * cs.K, sb = (size_t)cs.K * cs.N, sc = (size_t)cs.M * cs.N;
    float *A, *B, *C; cudaMalloc(&A, sa * 4); cudaMalloc(&B, sb * 4); cudaMalloc(&C, sc * 4);
    fill<<<1024, 256>>>(A, sa, 1); fill<<<1024, 256>>>(B, sb, 2);
    GemmProblem p; p.M = cs.M; p.N = cs.N; p.K = cs.K; p.dtype = DType::f32; p.c = C; p.c_row_stride = cs.N;
    p.a.ptr = A; p.b.ptr = B;
    if (cs.lay[0] == 'N') { p.a.row_stride = cs.K; p.a.col_stride = 1; } else { p.a.row_stride = 1; p.a.col_stride = cs.M; }
    if (cs.lay[1] == 'N') { p.b.row_stride = cs.N; p.b.col_stride = 1; } else { p.b.row_stride = 1; p.b.col_stride = cs.K; }
    auto run = [&](int v) {
      if (fns[v]) { const char* e = fns[v](p, dev, 0); if (e) { printf("err %s: %s\n", names[v], e); exit(1); } }
      else {
        float one = 1, zero = 0;
        // row-major C = A B  <=>  col-major C^T = B^T A^T
        cublasOperation_t tb = cs.lay[1] == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T, ta = cs.lay[0] == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
        cublasSgemm(h, tb, ta, cs.N, cs.M, cs.K, &one, B, cs.lay[1] == 'N' ? cs.N : cs.K, A, cs.lay[0] == 'N' ? cs.K : cs.M, &zero, C, cs.N);
      }
    };
    // correctness: C poisoned (NaN) before each run; every variant bitwise
    // against the first variant (cuBLAS's SGEMM too: where its FFMAs run in k order it
    // matches bit for bit)
    std::vector<float> ref(sc), got(sc);
    for (int v = 0; v < nv; ++v) {
      cudaMemset(C, 0xff, sc * 4); run(v); cudaDeviceSynchronize();
      cudaMemcpy(got.data(), C, sc * 4, cudaMemcpyDeviceToHost);
      if (v == 0) ref = got;
      double md = 0; size_t neq = 0;
      for (size_t i = 0; i < sc; ++i) { md = std::max(md, (double)fabsf(got[i] - ref[i])); neq += memcmp(&got[i], &ref[i], 4) != 0; }
      printf("  check %-7s max|diff| %.3g, %zu not bit-equal\n", names[v], md, neq);
    }
    if (once) {
      for (int v = 0; v < nv; ++v) run(v);
      cudaDeviceSynchronize();
      cudaFree(A); cudaFree(B); cudaFree(C);
      continue;
    }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    const int rounds = 6, reps = std::max(3, (int)(2e12 / (2.0 * cs.M * cs.N * cs.K)));
    std::vector<std::vector<float>> med(nv);
    for (int r = 0; r < rounds; ++r)
      for (int vi = 0; vi < nv; ++vi) {
        int v = (r & 1) ? nv - 1 - vi : vi;
        std::vector<float> ts;
        for (int i = 0; i < reps; ++i) {
          cudaMemsetAsync(flush, i & 0xff, fl);
          cudaEventRecord(e0); run(v); cudaEventRecord(e1); cudaEventSynchronize(e1);
          float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end()); med[v].push_back(ts[ts.size() / 2]);
      }
    double fl2 = 2.0 * cs.M * cs.N * cs.K;
    printf("%dx%dx%d %s (reps %d):", cs.M, cs.N, cs.K, cs.lay, reps);
    for (int v = 0; v < nv; ++v) {
      std::vector<float> m = med[v]; std::sort(m.begin(), m.end());
      double t = m[m.size() / 2];
      printf("  %s %.1f TF", names[v], fl2 / t / 1e9);
    }
    printf("\n  ratios vs cublas per round:");
    for (int v = 0; v < nv - 1; ++v) { printf(" %s", names[v]); for (int r = 0; r < rounds; ++r) printf(" %.3f", med[nv-1][r] / med[v][r]); printf(" |"); }
    printf("\n");
    fflush(stdout);
    cudaFree(A); cudaFree(B); cudaFree(C);
  }
}
