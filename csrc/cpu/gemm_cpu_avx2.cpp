// The host GEMM kernel built for AVX2 + FMA (x86-64 with GCC or Clang); on
// other targets available() is false and gemm_cpu.cpp keeps the baseline.
#include "gemm_cpu.h"
#include "gemm_cpu_blocks.h"  // before any target pragma: its inline code is generic

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// Everything defined below (our kernel templates, not the library headers
// above) is compiled for AVX2 + FMA; it only runs after the CPU check.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TILED_CPU_ISA avx2
#include "gemm_cpu_kernel.h"
#undef TILED_CPU_ISA
#pragma GCC pop_options

namespace tiled {
namespace cpu {
namespace avx2 {
bool available() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
}  // namespace avx2
}  // namespace cpu
}  // namespace tiled

#else
namespace tiled {
namespace cpu {
namespace avx2 {
bool available() { return false; }
void gemm_isa(const GemmProblem&) {}
}  // namespace avx2
}  // namespace cpu
}  // namespace tiled
#endif
