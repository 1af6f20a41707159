// Host GEMM entry point: the kernel (gemm_cpu_kernel.h) is built for the
// baseline instruction set here and for AVX2 + FMA in gemm_cpu_avx2.cpp; the
// CPU we run on picks.  Both give the same bits for the same inputs only
// within one build target (FMA contracts multiply-adds), so a process always
// uses one of them.
#include "gemm_cpu.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <vector>

#define TILED_CPU_ISA baseline
#include "gemm_cpu_kernel.h"
#undef TILED_CPU_ISA

namespace tiled {
namespace cpu {

namespace avx2 {
bool available();
void gemm_isa(const GemmProblem& p);
}  // namespace avx2

void gemm(const GemmProblem& p) {
  static const bool use_avx2 = avx2::available();
  if (use_avx2) return avx2::gemm_isa(p);
  baseline::gemm_isa(p);
}

}  // namespace cpu
}  // namespace tiled
