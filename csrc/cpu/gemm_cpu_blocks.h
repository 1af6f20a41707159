// How the host GEMM cuts C into parallel tasks; shared by every build of the
// blocked kernel (gemm_cpu_kernel.h) and by the AMX kernel.
#pragma once
#include <torch/csrc/stable/ops.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../epilogue_math.h"
#include "../gemm_problem.h"

namespace tiled {
namespace cpu {

// v rounded up to a multiple of m (whole panels).
inline int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

// A task's packing and accumulator buffers: per thread and slot, kept from
// call to call and grown when a call needs more, never cleared (every user
// writes a buffer before reading it).  Fresh buffers each call cost a page
// fault and a zero fill per 4 KB, for every thread, on every call.
// Each buffer starts at a fixed place in a 4 KB page: kSlot * 1088 bytes
// past a page boundary (slots a quarter page and a line apart).  Where
// malloc put them varied from process to process (glibc takes them from
// the heap once torch has freed large tensors, at offsets that depend on
// the process's history), and with it how the slots' addresses alias one
// another modulo 4 KB and in the L1 sets; now that is the same in every
// process.
template <class T, int kSlot>
T* thread_scratch(int64_t n) {
  constexpr size_t kPage = 4096, kOffset = kSlot * 1088;
  static_assert(kOffset % sizeof(T) == 0 && kOffset < kPage, "whole elements into the page");
  thread_local std::vector<T> buf;
  const size_t need = static_cast<size_t>(n) + (kPage + kOffset) / sizeof(T);
  if (buf.size() < need) buf.resize(need);
  const uintptr_t at = (reinterpret_cast<uintptr_t>(buf.data()) + kPage - 1) / kPage * kPage + kOffset;
  return reinterpret_cast<T*>(at);
}

// Summation over K, the same in every kernel, so that the error against
// an exact product grows slowly with K (one running sum over all of K gave
// ~u sqrt(K) relative: 1.8e-5 in fp32 at K = 2^20) and the order of every
// sum is fixed by K alone, never by blocks or threads:
//   1. each K slice (256 deep) is summed in registers (tiles, for AMX)
//      from zero;
//   2. the slice sums of one K group (kGroupK deep, K positions
//      [g kGroupK, (g + 1) kGroupK)) are added, slice by slice, into the
//      task's accumulator block (the first slice of a group stores);
//   3. where K has more than one group, the group sums are added, group
//      by group, into a second block (fold_group), which is what C gets.
// Errors grow like those of running sums of 256, 16 and K / 4096 terms,
// not of K terms.  Levels 2 and 3 cost one add per 256 and per 4096
// multiply-adds of an element.
constexpr int64_t kGroupK = 4096;

// A task's buffers, in the thread's scratch: packed A (a_elems of P),
// packed B (b_elems of P) and the fp32 (or fp64) accumulator block of its
// rows x cols of C in whole row_unit x col_unit panels, ldc per row; where
// K has more than one group, a second block of the same size for the sum
// of the groups (c_sum, else null).
template <class P, class Acc>
struct TaskBuffers {
  const int64_t ldc, c_size;
  P* const a_pack;
  P* const b_pack;
  Acc* const c_acc;
  Acc* const c_sum;
  TaskBuffers(const GemmProblem& p, int64_t rows, int64_t cols, int64_t row_unit, int64_t col_unit,
              int64_t a_elems, int64_t b_elems)
      : ldc(round_up(std::min(cols, p.N), col_unit)),
        c_size(round_up(std::min(rows, p.M), row_unit) * ldc),
        a_pack(thread_scratch<P, 0>(a_elems)),
        b_pack(thread_scratch<P, 1>(b_elems)),
        c_acc(thread_scratch<Acc, 2>(c_size)),
        c_sum(p.K > kGroupK ? thread_scratch<Acc, 3>(c_size) : nullptr) {}

  // Called after the slice that ends at K position k_end: where that ends
  // a K group and K has several, adds the group's sum (c_acc) into c_sum
  // (the first group stores).
  void fold_group(int64_t k_end, int64_t K) {
    if (c_sum == nullptr || (k_end % kGroupK != 0 && k_end != K)) return;
    if (k_end <= kGroupK) {
      std::copy(c_acc, c_acc + c_size, c_sum);
    } else {
      for (int64_t i = 0; i < c_size; ++i) c_sum[i] += c_acc[i];
    }
  }
  // The block C gets: the sum of the groups, or the one group's.
  const Acc* result() const { return c_sum != nullptr ? c_sum : c_acc; }
};

// Tasks of up to `rows` x `cols` of C, one batch each.  Starting from
// max_rows x max_cols: while there would be fewer than two tasks per thread,
// fewer columns down to wide_cols first (0: none), then fewer rows (down to
// min_rows), then fewer columns (halving while a whole number of col_unit
// panels remains), so small and narrow problems still reach every thread.
// The blocks are then evened out: as many as before, each as near the same
// size as whole min_rows / col_unit steps allow (768 rows in blocks of up to
// 512 are two of 384, not 512 and 256, whose tasks would leave one thread
// half idle).  A thread takes at least ~1M multiply-adds (tens of
// microseconds, against a few to wake it), so tiny problems stay on one.
struct TaskGrid {
  int64_t rows, cols, mblocks, nblocks, tasks, grain;
};
inline TaskGrid task_grid(const GemmProblem& p, int64_t max_rows, int64_t min_rows, int64_t max_cols,
                          int64_t col_unit, int64_t wide_cols = 0) {
  TaskGrid g{max_rows, max_cols, 0, 0, 0, 1};
  const int64_t want = 2 * static_cast<int64_t>(torch::stable::get_num_threads());
  auto count = [&] { return p.batch * ((p.M + g.rows - 1) / g.rows) * ((p.N + g.cols - 1) / g.cols); };
  while (g.cols / 2 >= wide_cols && wide_cols > 0 && count() < want) g.cols /= 2;
  while (g.rows > min_rows && count() < want) g.rows /= 2;
  while (g.cols % (2 * col_unit) == 0 && count() < want) g.cols /= 2;
  g.mblocks = (p.M + g.rows - 1) / g.rows;
  g.nblocks = (p.N + g.cols - 1) / g.cols;
  g.rows = std::min(g.rows, round_up(ceil_div(p.M, g.mblocks), min_rows));
  g.cols = std::min(g.cols, round_up(ceil_div(p.N, g.nblocks), col_unit));
  g.tasks = p.batch * g.mblocks * g.nblocks;
  g.grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, g.rows * g.cols * p.K));
  return g;
}

// Runs every task of the grid over torch's intra-op threads (torch::stable::parallel_for): each
// thread's chunk builds one TaskT(p, rows, cols) (its buffers; for AMX, its
// tile configuration) and calls run_block(batch, m0, n0) for each task.
template <class TaskT>
void run_tasks(const GemmProblem& p, const TaskGrid& g) {
  torch::stable::parallel_for(0, g.tasks, g.grain, [&](int64_t begin, int64_t end) {
    TaskT task(p, g.rows, g.cols);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t batch = t / (g.mblocks * g.nblocks);
      const int64_t rem = t % (g.mblocks * g.nblocks);
      task.run_block(batch, (rem / g.nblocks) * g.rows, (rem % g.nblocks) * g.cols);
    }
  });
}

// One task's block of C: [m0, m0 + mt) x [n0, n0 + nc) of batch `batch`,
// and that batch's operands.
template <class T>
struct Block {
  const T* a;
  const T* b;
  T* c;
  const T* bias;
  int64_t m0, n0, mt, nc;
  int64_t batch;
};
template <class T>
Block<T> block_of(const GemmProblem& p, int64_t batch, int64_t m0, int64_t n0, int64_t rows, int64_t cols) {
  return {static_cast<const T*>(p.a.ptr) + batch * p.a.batch_stride,
          static_cast<const T*>(p.b.ptr) + batch * p.b.batch_stride,
          static_cast<T*>(p.c) + batch * p.c_batch_stride,
          static_cast<const T*>(p.bias),
          m0,
          n0,
          std::min(rows, p.M - m0),
          std::min(cols, p.N - n0),
          batch};
}

// The block's C = acc (ldacc per row) + bias, rounded once to T; with an
// epilogue (p.epi), pre = acc + bias is stored where asked, then
// C = act(pre) * mul + residual, rounded once.
template <class T, class Acc, Activation kAct>
void store_block_epilogue(const GemmProblem& p, const Block<T>& blk, const Acc* acc, int64_t ldacc, int64_t batch) {
  const Epilogue& e = p.epi;
  for (int64_t i = 0; i < blk.mt; ++i) {
    const int64_t row = blk.m0 + i;
    T* crow = blk.c + row * p.c_row_stride + blk.n0;
    T* pre = e.pre ? static_cast<T*>(e.pre) + batch * e.pre_batch_stride + row * e.pre_row_stride + blk.n0 : nullptr;
    const T* mul =
        e.mul ? static_cast<const T*>(e.mul) + batch * e.mul_batch_stride + row * e.mul_row_stride + blk.n0 : nullptr;
    const T* res = e.residual ? static_cast<const T*>(e.residual) + batch * e.res_batch_stride +
                                    row * e.res_row_stride + blk.n0
                              : nullptr;
    for (int64_t j = 0; j < blk.nc; ++j) {
      Acc v = acc[i * ldacc + j];
      if (blk.bias) v += static_cast<Acc>(blk.bias[blk.n0 + j]);
      if (pre) pre[j] = static_cast<T>(v);
      v = activate_as<kAct>(v);
      if (mul) v *= static_cast<Acc>(mul[j]);
      if (res) v += static_cast<Acc>(res[j]);
      crow[j] = static_cast<T>(v);
    }
  }
}

template <class T, class Acc>
void store_block(const GemmProblem& p, const Block<T>& blk, const Acc* acc, int64_t ldacc) {
  if (p.epi.any()) {
    const int64_t batch = blk.batch;
    switch (p.epi.act) {
      case Activation::relu: return store_block_epilogue<T, Acc, Activation::relu>(p, blk, acc, ldacc, batch);
      case Activation::gelu_erf: return store_block_epilogue<T, Acc, Activation::gelu_erf>(p, blk, acc, ldacc, batch);
      case Activation::gelu_tanh:
        return store_block_epilogue<T, Acc, Activation::gelu_tanh>(p, blk, acc, ldacc, batch);
      case Activation::silu: return store_block_epilogue<T, Acc, Activation::silu>(p, blk, acc, ldacc, batch);
      default: return store_block_epilogue<T, Acc, Activation::none>(p, blk, acc, ldacc, batch);
    }
  }
  for (int64_t i = 0; i < blk.mt; ++i) {
    T* crow = blk.c + (blk.m0 + i) * p.c_row_stride + blk.n0;
    for (int64_t j = 0; j < blk.nc; ++j) {
      Acc v = acc[i * ldacc + j];
      if (blk.bias) v += static_cast<Acc>(blk.bias[blk.n0 + j]);
      crow[j] = static_cast<T>(v);
    }
  }
}

}  // namespace cpu
}  // namespace tiled
