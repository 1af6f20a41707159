#pragma once
#include "../gemm_problem.h"

namespace tiled {
namespace cpu {

// Cache-blocked, multi-threaded GEMM on the host for every DType.
// Accumulates in float (double for f64); deterministic (fixed summation
// order, independent of the thread count).
void gemm(const GemmProblem& p);

}  // namespace cpu
}  // namespace tiled
