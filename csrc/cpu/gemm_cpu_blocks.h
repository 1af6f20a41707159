// How the host GEMM cuts C into parallel tasks; shared by every build of the
// blocked kernel (gemm_cpu_kernel.h) and by the AMX kernel.
#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

#include "../gemm_problem.h"

namespace tiled {
namespace cpu {

// Tasks of up to `rows` x `cols` of C, one batch each.  Starting from
// max_rows x max_cols: while there would be fewer than two tasks per thread,
// fewer rows (down to min_rows), then fewer columns (halving while a whole
// number of col_unit panels remains), so small and narrow problems still
// reach every thread.  A thread takes at least ~1M multiply-adds (tens of
// microseconds, against a few to wake it), so tiny problems stay on one.
struct TaskGrid {
  int64_t rows, cols, mblocks, nblocks, tasks, grain;
};
inline TaskGrid task_grid(const GemmProblem& p, int64_t max_rows, int64_t min_rows, int64_t max_cols,
                          int64_t col_unit) {
  TaskGrid g{max_rows, max_cols, 0, 0, 0, 1};
  const int64_t want = 2 * at::get_num_threads();
  auto count = [&] { return p.batch * ((p.M + g.rows - 1) / g.rows) * ((p.N + g.cols - 1) / g.cols); };
  while (g.rows > min_rows && count() < want) g.rows /= 2;
  while (g.cols % (2 * col_unit) == 0 && count() < want) g.cols /= 2;
  g.mblocks = (p.M + g.rows - 1) / g.rows;
  g.nblocks = (p.N + g.cols - 1) / g.cols;
  g.tasks = p.batch * g.mblocks * g.nblocks;
  g.grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, g.rows * g.cols * p.K));
  return g;
}

// Runs fn(batch, m0, n0) for every task, spread over at::parallel_for's
// threads; init() runs once per thread's chunk first (per-thread buffers,
// tile configuration), and its result is passed to fn.
template <class Init, class Fn>
void for_each_task(const TaskGrid& g, Init init, Fn fn) {
  at::parallel_for(0, g.tasks, g.grain, [&](int64_t begin, int64_t end) {
    auto state = init();
    for (int64_t t = begin; t < end; ++t) {
      const int64_t batch = t / (g.mblocks * g.nblocks);
      const int64_t rem = t % (g.mblocks * g.nblocks);
      fn(state, batch, (rem / g.nblocks) * g.rows, (rem % g.nblocks) * g.cols);
    }
  });
}

}  // namespace cpu
}  // namespace tiled
