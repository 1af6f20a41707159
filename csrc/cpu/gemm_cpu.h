#pragma once
#include "../gemm_problem.h"

namespace tiled {
namespace cpu {

// Cache-blocked, multi-threaded GEMM on the host for every DType.
// Accumulates in float (double for f64), over K in three levels (256-deep
// slices, 4096-deep groups, then the groups: gemm_cpu_blocks.h);
// deterministic (fixed summation order, independent of the thread count).
void gemm(const GemmProblem& p);

// The instruction set gemm() uses for `dtype` on this thread now:
// "baseline", "avx2", "avx512" or (bf16 only) "amx" (the best the CPU has,
// capped by TILED_CPU_ISA).
const char* isa_name(DType dtype);

}  // namespace cpu
}  // namespace tiled
