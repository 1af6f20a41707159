// bf16 GEMM on Intel AMX tiles (AMX-TILE + AMX-BF16), for CPUs that have
// them and an OS that grants the tile state; gemm_cpu.cpp uses it for bf16
// (other dtypes keep the AVX-512 build) unless TILED_CPU_ISA caps it.
//
// Same task grid as the blocked kernel (gemm_cpu_blocks.h).  Per task and
// 256-deep K slice, B's columns are packed once into 32-column panels in the
// pair-interleaved ("VNNI") layout TDPBF16PS reads.  A row-major A is read
// in place, 64 rows at a time, where they make whole 32-row panels and whole
// 32-k steps; otherwise (ragged, or column-major) those rows are packed into
// 32-row panels.  Packed operands stay bf16 as given, zero-padded to whole
// panels and to a multiple of 32 in K.  The micro-kernel keeps a 32 x 32 block of fp32
// accumulators in four tiles, loads two A and two B tiles per 32 k and issues
// four TDPBF16PS.  Over K the tiles run through one K group (4096 deep)
// and the groups' sums are added in a second block (gemm_cpu_blocks.h), so
// no running sum spans more than 4096 k.  Each element of C is summed over
// K in the same order whatever the blocks and threads, so the bits do not
// depend on the thread count (they differ from the AVX-512 build's, which
// rounds every fp32 FMA).
#include "gemm_cpu.h"
#include "gemm_cpu_blocks.h"  // before the target pragma: its inline code is generic

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__linux__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace tiled {
namespace cpu {
namespace amx {
namespace {

// Linux: a process must ask for the AMX tile data state before using it.
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

bool cpu_has_amx_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & (1u << 24)) && (d & (1u << 22));  // AMX-TILE, AMX-BF16
}

}  // namespace

bool available() {
  static const bool ok = cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return ok;
}

}  // namespace amx
}  // namespace cpu
}  // namespace tiled

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx2")

namespace tiled {
namespace cpu {
namespace amx {
namespace {

constexpr int64_t kR = 32;          // rows (A) and columns (B) of a panel
constexpr int64_t kKB = 32;         // K per tile step
constexpr int64_t kKC = 256;        // K per slice
constexpr int64_t kNC = 1024;       // most columns per task
constexpr int64_t kNCWide = 256;    // fewer columns before fewer rows, down to this
constexpr int64_t kMC = 64;         // rows of A packed at a time
constexpr int64_t kMT = 8 * kMC;    // most rows per task
constexpr int64_t kPanel = kR * kKB;  // elements of one 32-row (or column) panel per k step

using bf16 = c10::BFloat16;
constexpr int64_t kBytes = sizeof(bf16);  // per element

// Tiles 0-3: C (16 rows x 16 fp32), 4-5: A (16 rows x 32 bf16), 6-7: B (16
// k pairs x 16 columns x 2 bf16); every row 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// c (ldc floats per row) = (first ? 0 : c) + the 32 x 32 product of 32 rows
// of A and a B panel over ksteps k steps.  A: row r, k step s, element kk at
// a[r * lda + s * a_step + kk] (a packed panel, [k step][32 rows][32 k]: lda
// 32, a_step 1024; a row-major A read in place: its row stride, 32); B panel:
// [k step][2 column halves][16 k pairs][16 columns][2].
void micro(const bf16* a, int64_t lda, int64_t a_step, const bf16* b, int64_t ksteps, float* c, int64_t ldc,
           bool first) {
  const int64_t stride = ldc * 4;
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(0, c, stride);
    _tile_loadd(1, c + 16, stride);
    _tile_loadd(2, c + 16 * ldc, stride);
    _tile_loadd(3, c + 16 * ldc + 16, stride);
  }
  const int64_t a_bytes = lda * kBytes;
  for (int64_t s = 0; s < ksteps; ++s, a += a_step, b += kPanel) {
    _tile_loadd(4, a, a_bytes);
    _tile_loadd(5, a + 16 * lda, a_bytes);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + 16 * kKB, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 16, stride);
  _tile_stored(2, c + 16 * ldc, stride);
  _tile_stored(3, c + 16 * ldc + 16, stride);
}

#include "gemm_cpu_transpose.h"

struct Task : TaskBuffers<bf16, float> {
  const GemmProblem& p;
  const int64_t mt_rows, nt_cols;

  Task(const GemmProblem& prob, int64_t rows, int64_t cols)
      : TaskBuffers(prob, rows, cols, kR, kR, round_up(std::min(kMC, prob.M), kR) * round_up(std::min(kKC, prob.K), kKB),
                    round_up(std::min(cols, prob.N), kR) * round_up(std::min(kKC, prob.K), kKB)),
        p(prob),
        mt_rows(rows),
        nt_cols(cols) {
    static const TileConfig config;
    _tile_loadconfig(&config);
  }
  ~Task() { _tile_release(); }

  // Rows [0, n) of A's block (row i, k at src[i * rs + k * cs]) into 32-row
  // panels of k steps: dst[(panel * steps + s) * kPanel + r * kKB + kk].
  // Row by row, so a row-major A is read sequentially.
  static void pack_a(const bf16* src, int64_t rs, int64_t cs, int64_t n, int64_t kc, bf16* dst) {
    const int64_t steps = (kc + kKB - 1) / kKB;
    if (rs == 1 && cs != 1 && n % kR == 0 && kc % kKB == 0) {
      // Column-major A in whole 32 x 32 blocks: 32 columns (64 bytes each)
      // in, transposed in registers, 32 panel rows out.
      for (int64_t ip = 0; ip < n; ip += kR)
        for (int64_t s = 0; s < steps; ++s)
          transpose_rows<32>(src + s * kKB * cs + ip, cs * kBytes, 32, dst + ((ip / kR) * steps + s) * kPanel,
                             kKB * kBytes);
      return;
    }
    for (int64_t i = 0; i < round_up(n, kR); ++i) {
      bf16* d = dst + (i / kR) * steps * kPanel + (i % kR) * kKB;
      const bf16* srow = src + i * rs;
      for (int64_t s = 0; s < steps; ++s, d += kPanel) {
        const int64_t kn = i < n ? std::min(kKB, kc - s * kKB) : 0;
        if (cs == 1 && kn == kKB) {
          std::memcpy(static_cast<void*>(d), srow + s * kKB, kKB * kBytes);
        } else {
          for (int64_t kk = 0; kk < kKB; ++kk) d[kk] = kk < kn ? srow[(s * kKB + kk) * cs] : bf16(0.f);
        }
      }
    }
  }

  // Columns [0, n) of B's block (k, column j at src[k * rs + j * cs]) into
  // 32-column panels, pair-interleaved: dst[(panel * steps + s) * kPanel +
  // (half * 16 + pair) * 32 + col * 2 + e] holds B[k0 + 2 pair + e][16 half + col].
  // 16 columns by 32 k at a time.  A column-major B (the weight of x @ W^T)
  // holds each column's k pairs as consecutive 32-bit words: 16 columns in,
  // transposed as 16 x 16 words in registers, 16 pair rows out.  A row-major
  // B goes pair of rows by pair of rows, read sequentially.
  static void pack_b(const bf16* src, int64_t rs, int64_t cs, int64_t n, int64_t kc, bf16* dst) {
    const int64_t steps = (kc + kKB - 1) / kKB;
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t j = 0; j < round_up(n, kR); j += 16) {
        bf16* const dblk = dst + ((j / kR) * steps + s) * kPanel + (j % kR) / 16 * 16 * 32;
        if (rs == 1 && cs != 1 && j + 16 <= n && (s + 1) * kKB <= kc) {
          transpose_rows<16>(src + j * cs + s * kKB, cs * kBytes, 16, dblk, 32 * kBytes);
          continue;
        }
        for (int64_t pair = 0; pair < kKB / 2; ++pair) {
          const int64_t k = s * kKB + 2 * pair;
          bf16* const drow = dblk + pair * 32;
          if (cs == 1 && k + 1 < kc && j + 16 <= n) {
            // Row-major B, whole: interleave 16 columns of rows k and k + 1
            // (unpack works within 128-bit lanes: lo = columns 0-3 | 8-11,
            // hi = 4-7 | 12-15).
            const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k * rs + j));
            const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (k + 1) * rs + j));
            const __m256i lo = _mm256_unpacklo_epi16(r0, r1), hi = _mm256_unpackhi_epi16(r0, r1);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(drow), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(drow + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
            continue;
          }
          for (int64_t e = 0; e < 2; ++e)
            for (int64_t col = 0; col < 16; ++col) {
              const bool in = k + e < kc && j + col < n;
              drow[col * 2 + e] = in ? src[(k + e) * rs + (j + col) * cs] : bf16(0.f);
            }
        }
      }
  }

  void run_block(int64_t batch, int64_t m0, int64_t n0) {
    const Block<bf16> blk = block_of<bf16>(p, batch, m0, n0, mt_rows, nt_cols);
    const bf16 *A = blk.a, *B = blk.b;
    const int64_t mt = blk.mt, nc = blk.nc;
    // The first K slice of each K group (gemm_cpu_blocks.h) starts the
    // accumulator tiles at zero, the others at the group's sum so far; K = 0
    // stores zeros (+ bias).
    static_assert(kGroupK % kKC == 0, "whole slices per K group");
    if (p.K == 0) std::fill(c_acc, c_acc + c_size, 0.f);
    for (int64_t k0 = 0; k0 < p.K; k0 += kKC) {
      const int64_t kc = std::min(kKC, p.K - k0), steps = (kc + kKB - 1) / kKB;
      const bool first = k0 % kGroupK == 0;
      pack_b(B + k0 * p.b.row_stride + n0 * p.b.col_stride, p.b.row_stride, p.b.col_stride, nc, kc, b_pack);
      for (int64_t mb = 0; mb < mt; mb += kMC) {
        const int64_t mc = std::min(kMC, mt - mb);
        const bf16* const a_blk = A + (m0 + mb) * p.a.row_stride + k0 * p.a.col_stride;
        // A row-major A whose block is whole 32-row panels and 32-k steps,
        // its rows 16-byte aligned, is read in place by the tile loads (its
        // rows at their own stride); anything else is packed (zero-padded,
        // or transposed).  Rows at an odd element offset (1023 x 1023: 2046
        // bytes apart) read slower in place than packed.
        const bool in_place = p.a.col_stride == 1 && mc % kR == 0 && kc % kKB == 0 && p.a.row_stride % 8 == 0 &&
                              reinterpret_cast<uintptr_t>(A) % 16 == 0;
        if (!in_place) pack_a(a_blk, p.a.row_stride, p.a.col_stride, mc, kc, a_pack);
        for (int64_t ip = 0; ip < mc; ip += kR) {
          const bf16* const a = in_place ? a_blk + ip * p.a.row_stride : a_pack + (ip / kR) * steps * kPanel;
          const int64_t lda = in_place ? p.a.row_stride : kKB, a_step = in_place ? kKB : kPanel;
          for (int64_t jp = 0; jp < nc; jp += kR)
            micro(a, lda, a_step, b_pack + (jp / kR) * steps * kPanel, steps, c_acc + (mb + ip) * ldc + jp, ldc,
                  first);
        }
      }
      fold_group(k0 + kc, p.K);
    }
    store_block(p, blk, result(), ldc);
  }
};

}  // namespace

void gemm_bf16(const GemmProblem& p) {
  // Wide tasks: each reads (or, column-major, transposes) its rows of A
  // for up to 1024 columns, not 256; a problem with too few such tasks
  // narrows them to 256 columns before it shortens them (short tasks pack
  // B more often).
  run_tasks<Task>(p, task_grid(p, kMT, kMC, kNC, kR, kNCWide));
}

}  // namespace amx
}  // namespace cpu
}  // namespace tiled
#pragma GCC pop_options

#else
namespace tiled {
namespace cpu {
namespace amx {
bool available() { return false; }
void gemm_bf16(const GemmProblem&) {}
}  // namespace amx
}  // namespace cpu
}  // namespace tiled
#endif
