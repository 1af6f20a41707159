// The sm80 family's kernel (csrc/cuda/sm80/sm80.cuh) under its
// configurations and others that sm80.h's list does not hold: CTA tile,
// warp grid, stages, and the main loop's kind (ring or top barrier).  Everything runs
// on the same random operands; every variant's output must equal the first
// one's bit for bit (the same k order per element), and the first is checked
// against a float64 reference on sampled elements.
//
// Times: R rounds, each variant per round `reps` back-to-back launches
// between CUDA events, the variants' order rotated each round; the median
// round counts.  Prints a line per variant: TFLOP/s and the fraction of the
// mma.sync peak passed with --peak (benchmarks/research/micro/mma_sync_peak.cu).
//
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -Icsrc benchmarks/research/micro/sm80_variants.cu -o /tmp/sm80v
//   /tmp/sm80v bf16 4096 4096 4096 [--peak 643] [--only NAME] [--reps 10] [--rounds 7]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/sm80/sm80.cuh"

using namespace tiled::cuda::sm80;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

namespace {

struct Variant {
  std::string name;
  bool tf32;
  bool a_kmajor, b_kmajor;
  int bm, bn;
  void (*launch)(Params, cudaStream_t);
};

template <class T, int BM, int BN, int WM, int WN, int S, bool AK, bool BKM, bool RING>
void launch_v(Params p, cudaStream_t st) {
  constexpr bool kTf32 = Traits<T>::kTf32;
  constexpr Config c = {"", BM, BN, kRowBytes / Traits<T>::kBytes, WM, WN, S};
  constexpr int smem = smem_bytes(c, kTf32);
  auto k = sm80_gemm_kernel<T, BM, BN, WM, WN, S, AK, BKM, RING>;
  static bool raised = false;
  if (!raised) {
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    raised = true;
  }
  p.tiles_m = (p.M + BM - 1) / BM;
  p.tiles_n = (p.N + BN - 1) / BN;
  k<<<dim3(p.tiles_m * p.tiles_n, 1), 32 * WM * WN, smem, st>>>(p);
}

template <class T, int BM, int BN, int WM, int WN, int S, bool AK, bool BKM, bool RING>
Variant make(const char* layout) {
  char name[96];
  snprintf(name, sizeof name, "%s_%dx%d_w%dx%d_s%d_%s_%s", Traits<T>::kTf32 ? "tf32" : "bf16", BM, BN, WM, WN, S,
           RING ? "ring" : "top", layout);
  return {name, Traits<T>::kTf32, AK, BKM, BM, BN, launch_v<T, BM, BN, WM, WN, S, AK, BKM, RING>};
}

// Layout letters as the project names them: A then B, 'N' row-major.
// A row-major = K-major; B row-major = N-major (b_kmajor false).
#define LAYOUTS(T, BM, BN, WM, WN, S, E)                                                                \
  make<T, BM, BN, WM, WN, S, true, false, E>("NN"), make<T, BM, BN, WM, WN, S, false, true, E>("TT")

std::vector<Variant> variants() {
  using bf = __nv_bfloat16;
  return {
      // sm80.h's configurations (each in both loops), then alternatives
      LAYOUTS(bf, 128, 256, 2, 4, 3, true),  LAYOUTS(bf, 128, 256, 2, 4, 3, false),
      LAYOUTS(bf, 128, 128, 2, 2, 3, true),  LAYOUTS(bf, 128, 128, 2, 2, 3, false),
      LAYOUTS(bf, 128, 256, 2, 4, 4, true),  LAYOUTS(bf, 256, 128, 4, 2, 3, true),
      LAYOUTS(bf, 256, 128, 4, 2, 4, true),  LAYOUTS(bf, 128, 128, 2, 2, 4, true),
      LAYOUTS(float, 128, 256, 2, 4, 3, false), LAYOUTS(float, 128, 256, 2, 4, 3, true),
      LAYOUTS(float, 128, 128, 2, 2, 3, false), LAYOUTS(float, 128, 128, 2, 2, 3, true),
      LAYOUTS(float, 128, 128, 2, 2, 4, false),
  };
}

__device__ float rnd(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>((x >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;  // [-1, 1)
}

template <class E>
__global__ void fill(E* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(E) == 4)
      p[i] = rnd(i, seed);
    else
      p[i] = __float2bfloat16(rnd(i, seed));
  }
}

double to_d(float x) { return x; }
double to_d(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class E>
int run(std::vector<Variant> vs, int M, int N, int K, double peak, int reps, int rounds) {
  const int64_t na = int64_t(M) * K, nb = int64_t(K) * N, nc = int64_t(M) * N;
  E *a, *b;
  CHECK(cudaMalloc(&a, na * sizeof(E)));
  CHECK(cudaMalloc(&b, nb * sizeof(E)));
  fill<<<1024, 256>>>(a, na, 1u);
  fill<<<1024, 256>>>(b, nb, 2u);
  std::vector<E*> cs(vs.size());
  for (auto& c : cs) {
    CHECK(cudaMalloc(&c, nc * sizeof(E)));
    CHECK(cudaMemset(c, 0xFF, nc * sizeof(E)));  // NaN poison
  }
  std::vector<E> ha(na), hb(nb);
  CHECK(cudaMemcpy(ha.data(), a, na * sizeof(E), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb.data(), b, nb * sizeof(E), cudaMemcpyDeviceToHost));
  auto params = [&](const Variant& v, E* c) {
    Params p;
    p.a = a;
    p.b = b;
    p.c = c;
    p.M = M;
    p.N = N;
    p.K = K;
    p.lda = v.a_kmajor ? K : M;
    p.ldb = v.b_kmajor ? K : N;
    p.c_ld = N;
    p.c_align = (N * static_cast<int64_t>(sizeof(E))) % 16 == 0 ? 16 : static_cast<int>(sizeof(E));  // cudaMalloc: 256-byte bases
    return p;
  };
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<std::vector<float>> ms(vs.size());
  for (size_t i = 0; i < vs.size(); ++i) vs[i].launch(params(vs[i], cs[i]), 0);  // warm-up and the outputs
  CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < vs.size(); ++j) {
      const size_t i = (j + r) % vs.size();
      const Params p = params(vs[i], cs[i]);
      CHECK(cudaEventRecord(e0));
      for (int k = 0; k < reps; ++k) vs[i].launch(p, 0);
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float t;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      ms[i].push_back(t / reps);
    }
  CHECK(cudaGetLastError());
  // Correctness: variant 0 against float64 on sampled elements (its layout),
  // every variant of the same layout bit-identical to the first of it.
  int bad = 0;
  std::vector<E> h0(nc), h(nc);
  for (size_t i = 0; i < vs.size(); ++i) {
    CHECK(cudaMemcpy(h.data(), cs[i], nc * sizeof(E), cudaMemcpyDeviceToHost));
    size_t first = 0;
    while (first < i && !(vs[first].a_kmajor == vs[i].a_kmajor && vs[first].b_kmajor == vs[i].b_kmajor)) ++first;
    double worst = 0;
    int64_t diff = 0;
    if (first == i) {
      h0 = h;
      for (int s = 0; s < 4096; ++s) {
        const int m = int((uint64_t(s) * 2654435761u) % M), n = int((uint64_t(s) * 40503u + 7) % N);
        double ref = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          const double x = to_d(ha[vs[i].a_kmajor ? int64_t(m) * K + k : int64_t(k) * M + m]);
          const double y = to_d(hb[vs[i].b_kmajor ? int64_t(n) * K + k : int64_t(k) * N + n]);
          ref += x * y;
          mag += std::fabs(x * y);
        }
        const double e = std::fabs(to_d(h[int64_t(m) * N + n]) - ref) / mag;
        worst = std::isnan(e) ? 1e9 : std::max(worst, e);
      }
    } else {
      CHECK(cudaMemcpy(h0.data(), cs[first], nc * sizeof(E), cudaMemcpyDeviceToHost));
      diff = 0;
      for (int64_t x = 0; x < nc; ++x) diff += std::memcmp(&h[x], &h0[x], sizeof(E)) != 0;
    }
    const double bound = vs[i].tf32 ? 1.0 / 512 : 1.0 / 128;  // per element, relative to sum |a b|
    const bool ok = worst <= bound && diff == 0;
    bad += !ok;
    std::vector<float> t = ms[i];
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    const double tflops = 2.0 * M * N * K / (med * 1e-3) / 1e12;
    printf("%-34s %5dx%5dx%5d %9.1f us %7.1f TFLOP/s  %5.3f of peak  %s", vs[i].name.c_str(), M, N, K, med * 1e3,
           tflops, peak > 0 ? tflops / peak : 0.0, ok ? "ok" : "BAD");
    if (first == i)
      printf("  (err/sum|ab| %.2e)\n", worst);
    else
      printf("  (%lld elements differ from %s)\n", static_cast<long long>(diff), vs[first].name.c_str());
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s bf16|tf32 M N K [--peak P] [--only SUBSTR] [--reps R] [--rounds N]\n", argv[0]);
    return 2;
  }
  const bool tf32 = std::string(argv[1]) == "tf32";
  const int M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
  double peak = 0;
  int reps = 10, rounds = 7;
  std::string only;
  for (int i = 5; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--peak") peak = atof(argv[i + 1]);
    if (f == "--only") only = argv[i + 1];
    if (f == "--reps") reps = atoi(argv[i + 1]);
    if (f == "--rounds") rounds = atoi(argv[i + 1]);
  }
  std::vector<Variant> vs;
  for (const Variant& v : variants())
    if (v.tf32 == tf32 && (only.empty() || v.name.find(only) != std::string::npos)) vs.push_back(v);
  const int bad = tf32 ? run<float>(vs, M, N, K, peak, reps, rounds) : run<__nv_bfloat16>(vs, M, N, K, peak, reps, rounds);
  return bad ? 1 : 0;
}
