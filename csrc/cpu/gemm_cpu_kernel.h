// Host GEMM kernel, compiled once per instruction set: gemm_cpu.cpp (baseline
// x86-64 / any CPU) and gemm_cpu_avx2.cpp (AVX2 + FMA), each defining
// TILED_CPU_ISA to the namespace it lives in and including the headers below
// first; gemm_cpu.cpp picks one at run time.  No include guard on purpose.
//
// The classic three-level blocking.
//   * the output is cut into blocks of up to MT x NC (smaller when that
//     would leave threads idle), one parallel task each (torch::stable::parallel_for),
//     so no two threads write the same element and, as each element is
//     summed over K in one order whatever block holds it, the result does
//     not depend on the number of threads;
//   * K is walked in KC slices; for each slice the task packs its B slice
//     into NR-column panels once, then its rows MC at a time into MR-row
//     panels of A (so B is packed M/MT times, not M/MC), both converted to
//     the accumulator type, so the micro-kernel reads both with unit stride
//     whatever the operands' layouts are;
//   * an MR x NR micro-kernel keeps its accumulators in registers: the
//     portable one below (MR 4, NR 16, the compiler vectorises the NR loop),
//     or one an instruction set's file supplies (TILED_CPU_MICRO names a
//     header with specialisations of Micro, included inside the namespace);
//     the block sizes follow its MR.
#ifndef TILED_CPU_ISA
#error "define TILED_CPU_ISA before including gemm_cpu_kernel.h"
#endif
// task_grid / run_tasks: included by the .cpp before its target pragma.
#include "gemm_cpu_blocks.h"

namespace tiled {
namespace cpu {
namespace TILED_CPU_ISA {

// c[i * ldc + j] = (first ? 0 : c[i * ldc + j]) + s[i][j], for i < MR,
// j < NR, where s[i][j] is the sum over k < kc of a[k * MR + i] *
// b[k * NR + j], summed in registers from zero in k order (a, b: packed
// panels; c: the task's accumulator block).  The slice's sum starts from
// zero, not from c, so that no running sum spans more than one slice (the
// summation levels of gemm_cpu_blocks.h).
template <typename Acc>
struct Micro {
  static constexpr int64_t MR = 4, NR = 16;
  static void run(const Acc* a, const Acc* b, int64_t kc, Acc* c, int64_t ldc, bool first) {
    Acc acc[MR][NR];
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NR; ++j) acc[i][j] = Acc(0);
    for (int64_t k = 0; k < kc; ++k) {
      const Acc* bk = b + k * NR;
      const Acc* ak = a + k * MR;
      for (int64_t i = 0; i < MR; ++i) {
        const Acc ai = ak[i];
#pragma omp simd
        for (int64_t j = 0; j < NR; ++j) acc[i][j] += ai * bk[j];
      }
    }
    if (first) {
      for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
    } else {
      for (int64_t i = 0; i < MR; ++i)
        for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
    }
  }
};
// The micro-kernel for problems of few rows (at most kFewRows), where the
// wider one's padding costs: an instruction set's file may supply one with
// a smaller MR (AVX-512: 8 rows instead of 12, where 16 rows would compute
// 24); run() takes it when it pads M less.  The portable MR 4 needs none.
constexpr int64_t kFewRows = 64;
template <typename Acc>
struct MicroFew : Micro<Acc> {};
// Packs the R rows of a whole panel whose elements are contiguous along k
// (a row-major A, a column-major B): dst[k * R + i] = src[i * i_stride + k]
// for k < kc.  An instruction set's file may supply a faster one for its
// types; false: not supplied, the caller packs element by element.
template <typename T, typename Acc, int64_t R>
struct PackRows {
  static bool run(const T*, int64_t, int64_t, Acc*) { return false; }
};
#ifdef TILED_CPU_MICRO
#include TILED_CPU_MICRO
#endif

constexpr int64_t NC = 256;  // multiple of every NR
constexpr int64_t KC = 256;

template <typename T, typename Acc>
inline Acc load(const T* base, int64_t off) {
  return static_cast<Acc>(static_cast<float>(base[off]));
}
template <>
inline double load<double, double>(const double* base, int64_t off) {
  return base[off];
}

template <typename T, typename Acc, typename Mi = Micro<Acc>>
struct Task : TaskBuffers<Acc, Acc> {
  static constexpr int64_t MR = Mi::MR, NR = Mi::NR;
  static_assert(NC % NR == 0, "whole panels per block");
  static constexpr int64_t MC = MR * ((64 + MR - 1) / MR);  // rows of A packed at a time
  static constexpr int64_t MT = 8 * MC;  // most rows of one task, which reuse one packed B slice
  const GemmProblem& p;
  const int64_t mt_rows;  // rows per task: MT, or fewer so that every thread gets work
  const int64_t nt_cols;  // columns per task: NC, or fewer (a multiple of NR) for the same reason
  using Buffers = TaskBuffers<Acc, Acc>;
  using Buffers::a_pack, Buffers::b_pack, Buffers::c_acc, Buffers::ldc, Buffers::c_size;

  // Buffers sized for this problem's blocks, not the largest block: small
  // GEMMs (decode-style M) touch little memory.
  Task(const GemmProblem& prob, int64_t rows, int64_t cols)
      : Buffers(prob, rows, cols, MR, NR, round_up(std::min(MC, prob.M), MR) * std::min(KC, prob.K),
                round_up(std::min(cols, prob.N), NR) * std::min(KC, prob.K)),
        p(prob),
        mt_rows(rows),
        nt_cols(cols) {}

  // Packs `n` vectors of length kc into panels of R, k-major inside a panel,
  // zero-padded to a whole panel so the micro-kernel needs no edge code.
  // Element (i, k) of the block is src[i * i_stride + k * k_stride]: for A's
  // block i runs over rows of A, for B's over columns of B.
  template <int64_t R>
  static void pack(const T* src, int64_t i_stride, int64_t k_stride, int64_t n, int64_t kc, Acc* out) {
    for (int64_t ip = 0; ip < n; ip += R) {
      Acc* dst = out + ip * kc;
      const T* s = src + ip * i_stride;
      if (ip + R <= n) {
        // Whole panel: no bounds test, so the compiler vectorises the copy
        // where i_stride is 1 (a row-major B, a column-major A); where k is
        // the contiguous direction, the instruction set's transposing
        // packer if it has one.
        if (k_stride == 1 && PackRows<T, Acc, R>::run(s, i_stride, kc, dst)) continue;
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < R; ++i) dst[k * R + i] = load<T, Acc>(s, i * i_stride + k * k_stride);
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t i = 0; i < R; ++i)
            dst[k * R + i] = (ip + i < n) ? load<T, Acc>(s, i * i_stride + k * k_stride) : Acc(0);
      }
    }
  }

  // c_acc[row:row+MR, jp:jp+NR] (= if first, else +=) A panel ip (of the
  // packed m-block) * B panel jp
  void micro(int64_t ip, int64_t row, int64_t jp, int64_t kc, bool first) {
    Mi::run(a_pack + ip * kc, b_pack + jp * kc, kc, c_acc + row * ldc + jp, ldc, first);
  }

  void run_block(int64_t batch, int64_t m0, int64_t n0) {
    const Block<T> blk = block_of<T>(p, batch, m0, n0, mt_rows, nt_cols);
    const T *A = blk.a, *B = blk.b;
    const int64_t mt = blk.mt, nc = blk.nc;
    static_assert(kGroupK % KC == 0, "whole slices per K group");
    // The first slice of each K group stores; K = 0 stores zeros (+ bias).
    if (p.K == 0) std::fill(c_acc, c_acc + c_size, Acc(0));
    for (int64_t k0 = 0; k0 < p.K; k0 += KC) {
      const int64_t kc = std::min(KC, p.K - k0);
      const bool first = k0 % kGroupK == 0;
      // One packed B slice serves every m-block of the task.
      pack<NR>(B + k0 * p.b.row_stride + n0 * p.b.col_stride, p.b.col_stride, p.b.row_stride, nc, kc, b_pack);
      for (int64_t mb = 0; mb < mt; mb += MC) {
        const int64_t mc = std::min(MC, mt - mb);
        pack<MR>(A + (m0 + mb) * p.a.row_stride + k0 * p.a.col_stride, p.a.row_stride, p.a.col_stride, mc, kc, a_pack);
        for (int64_t ip = 0; ip < mc; ip += MR)
          for (int64_t jp = 0; jp < nc; jp += NR) micro(ip, mb + ip, jp, kc, first);
      }
      Buffers::fold_group(k0 + kc, p.K);
    }
    store_block(p, blk, Buffers::result(), ldc);
  }
};

template <typename T, typename Acc, typename Mi>
void run_with(const GemmProblem& p) {
  using Tk = Task<T, Acc, Mi>;
  run_tasks<Tk>(p, task_grid(p, Tk::MT, Tk::MC, NC, Tk::NR));
}
template <typename T, typename Acc>
void run(const GemmProblem& p) {
  static_assert(MicroFew<Acc>::NR == Micro<Acc>::NR, "one B panel width");
  if constexpr (MicroFew<Acc>::MR != Micro<Acc>::MR) {
    if (p.M <= kFewRows && round_up(p.M, MicroFew<Acc>::MR) < round_up(p.M, Micro<Acc>::MR))
      return run_with<T, Acc, MicroFew<Acc>>(p);
  }
  run_with<T, Acc, Micro<Acc>>(p);
}

void gemm_isa(const GemmProblem& p) {
  switch (p.dtype) {
    case DType::f32: return run<float, float>(p);
    case DType::f64: return run<double, double>(p);
    case DType::f16: return run<c10::Half, float>(p);
    case DType::bf16: return run<c10::BFloat16, float>(p);
  }
}

}  // namespace TILED_CPU_ISA
}  // namespace cpu
}  // namespace tiled
