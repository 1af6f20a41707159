// AVX-512 micro-kernels for gemm_cpu_kernel.h (included inside its namespace
// through TILED_CPU_MICRO, after <immintrin.h>): 12 rows x 2 vectors of
// accumulators (24 of the 32 zmm registers), two B vectors and one broadcast
// of A per row and k, i.e. 24 FMAs per 2 loads + 12 broadcasts.  Sums each
// element over k in the same order as the portable kernel, one FMA per
// step.  No include guard on purpose.

template <>
struct Micro<float> {
  static constexpr int64_t MR = 12, NR = 32;
  static void run(const float* a, const float* b, int64_t kc, float* c, int64_t ldc) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_loadu_ps(c + i * ldc);
      acc[i][1] = _mm512_loadu_ps(c + i * ldc + 16);
    }
    for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      _mm512_storeu_ps(c + i * ldc, acc[i][0]);
      _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
  }
};

template <>
struct Micro<double> {
  static constexpr int64_t MR = 12, NR = 16;
  static void run(const double* a, const double* b, int64_t kc, double* c, int64_t ldc) {
    __m512d acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_loadu_pd(c + i * ldc);
      acc[i][1] = _mm512_loadu_pd(c + i * ldc + 8);
    }
    for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
      const __m512d b0 = _mm512_loadu_pd(b), b1 = _mm512_loadu_pd(b + 8);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512d ai = _mm512_set1_pd(a[i]);
        acc[i][0] = _mm512_fmadd_pd(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_pd(ai, b1, acc[i][1]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      _mm512_storeu_pd(c + i * ldc, acc[i][0]);
      _mm512_storeu_pd(c + i * ldc + 8, acc[i][1]);
    }
  }
};
