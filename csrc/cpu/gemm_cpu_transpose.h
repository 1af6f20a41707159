// In-register transposes of 512-bit rows for the CPU kernels' packing
// (AVX-512F; 16-bit lanes also need AVX-512BW).  Included inside each
// user's namespace and target region (gemm_cpu_amx.cpp, and
// gemm_cpu_micro_avx512.h through gemm_cpu_kernel.h), after <immintrin.h>
// and <type_traits>: each instruction set's build keeps its own copy.  No
// include guard on purpose.

// Index vectors of the transpose below, for L lanes of 512 bits (32 of 16
// bits or 16 of 32): for block size b = L/2, ..., 2, 1, the new upper row
// takes the first b of each 2b elements from the upper row and the next b
// from the lower one's first b; the new lower row the rest.
template <int L>
struct TransposeIdx {
  using Index = std::conditional_t<L == 32, uint16_t, uint32_t>;
  static constexpr int kStages = L == 32 ? 5 : 4;
  alignas(64) Index up[kStages][L], low[kStages][L];
  constexpr TransposeIdx() : up(), low() {
    for (int s = 0, b = L / 2; s < kStages; ++s, b /= 2)
      for (int q = 0; q < L; ++q) {
        const bool first = (q / b) % 2 == 0;
        up[s][q] = static_cast<Index>(first ? q : L + q - b);
        low[s][q] = static_cast<Index>(first ? q + b : L + q);
      }
  }
};
template <int L>
constexpr TransposeIdx<L> kTransposeIdx{};

// v[i] holds row i of an L x L matrix (32 x 32 of 16-bit elements, or 16 x
// 16 of 32-bit ones); afterwards v[i] holds column i (recursive block swap,
// log2(L) rounds of L/2 two-source permutes).
template <int L>
inline void transpose(__m512i (&v)[L]) {
  constexpr auto& idx = kTransposeIdx<L>;
#pragma GCC unroll 5
  for (int s = 0, b = L / 2; s < TransposeIdx<L>::kStages; ++s, b /= 2) {
    const __m512i iu = _mm512_load_si512(idx.up[s]), il = _mm512_load_si512(idx.low[s]);
#pragma GCC unroll 32
    for (int i = 0; i < L; ++i)
      if ((i / b) % 2 == 0) {
        const __m512i x = v[i], y = v[i + b];
        if constexpr (L == 32) {
          v[i] = _mm512_permutex2var_epi16(x, iu, y);
          v[i + b] = _mm512_permutex2var_epi16(x, il, y);
        } else {
          v[i] = _mm512_permutex2var_epi32(x, iu, y);
          v[i + b] = _mm512_permutex2var_epi32(x, il, y);
        }
      }
  }
}

// Transposes a block into panel rows: loads `rows` rows of 64 bytes (src,
// src_bytes apart; rows past `rows` read as zeros), transposes them as an
// L x L matrix and stores row i of the result at dst + i * dst_bytes, only
// the 32-bit lanes set in `keep`.
template <int L>
inline void transpose_rows(const void* src, int64_t src_bytes, int rows, void* dst, int64_t dst_bytes,
                           __mmask16 keep = 0xFFFF) {
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  __m512i v[L];
  for (int r = 0; r < L; ++r) v[r] = r < rows ? _mm512_loadu_si512(in + r * src_bytes) : _mm512_setzero_si512();
  transpose<L>(v);
  for (int i = 0; i < L; ++i) _mm512_mask_storeu_epi32(out + i * dst_bytes, keep, v[i]);
}
