// AVX-512 micro-kernels for gemm_cpu_kernel.h (included inside its namespace
// through TILED_CPU_MICRO, after <immintrin.h>): 12 rows x 2 vectors of
// accumulators (24 of the 32 zmm registers), two B vectors and one broadcast
// of A per row and k, i.e. 24 FMAs per 2 loads + 12 broadcasts; 12 x 32 for
// fp32, 12 x 16 for fp64.  Sums each element over k in the same order as the
// portable kernel, one FMA per step, from zero, then stores the slice's sum
// into c or adds it there (Micro's contract).  No include guard on purpose.

// One zmm register of Acc: its lane count and the four operations used.
template <typename Acc>
struct Zmm;
template <>
struct Zmm<float> {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V splat(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V zero() { return _mm512_setzero_ps(); }
};
template <>
struct Zmm<double> {
  using V = __m512d;
  static constexpr int kLanes = 8;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V splat(double x) { return _mm512_set1_pd(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V zero() { return _mm512_setzero_pd(); }
};

template <typename Acc, int64_t kRows = 12>
struct MicroAvx512 {
  using Z = Zmm<Acc>;
  static constexpr int64_t MR = kRows, NR = 2 * Z::kLanes;
  static void run(const Acc* a, const Acc* b, int64_t kc, Acc* c, int64_t ldc, bool first) {
    typename Z::V acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = Z::zero();
    for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
      const typename Z::V b0 = Z::load(b), b1 = Z::load(b + Z::kLanes);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const typename Z::V ai = Z::splat(a[i]);
        acc[i][0] = Z::fma(ai, b0, acc[i][0]);
        acc[i][1] = Z::fma(ai, b1, acc[i][1]);
      }
    }
    if (!first) {
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        acc[i][0] = Z::add(Z::load(c + i * ldc), acc[i][0]);
        acc[i][1] = Z::add(Z::load(c + i * ldc + Z::kLanes), acc[i][1]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      Z::store(c + i * ldc, acc[i][0]);
      Z::store(c + i * ldc + Z::kLanes, acc[i][1]);
    }
  }
};

#include "gemm_cpu_transpose.h"

// fp32 panels of R rows (12 of A, 32 of B) from rows contiguous along k: 16
// rows x 16 k at a time, transposed in registers (rows past R as zeros, not
// stored); the k that do not fill 16 element by element.
template <int64_t R>
struct PackRows<float, float, R> {
  static bool run(const float* src, int64_t i_stride, int64_t kc, float* dst) {
    int64_t k0 = 0;
    for (; k0 + 16 <= kc; k0 += 16)
      for (int64_t i0 = 0; i0 < R; i0 += 16) {
        const int rows = static_cast<int>(R - i0 < 16 ? R - i0 : 16);
        constexpr int64_t kBytes = sizeof(float);
        transpose_rows<16>(src + i0 * i_stride + k0, i_stride * kBytes, rows, dst + k0 * R + i0, R * kBytes,
                           static_cast<__mmask16>(rows == 16 ? 0xFFFF : (1u << rows) - 1));
      }
    for (; k0 < kc; ++k0)
      for (int64_t i = 0; i < R; ++i) dst[k0 * R + i] = src[i * i_stride + k0];
    return true;
  }
};

template <>
struct Micro<float> : MicroAvx512<float> {};
template <>
struct Micro<double> : MicroAvx512<double> {};
// Few rows: 8-row panels (16 accumulators), where they pad M less than
// 12-row ones (16 rows compute 16, not 24; 40 compute 40, not 48).
template <>
struct MicroFew<float> : MicroAvx512<float, 8> {};
template <>
struct MicroFew<double> : MicroAvx512<double, 8> {};
