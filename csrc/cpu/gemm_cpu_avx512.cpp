// The host GEMM kernel built for AVX-512 (F) + FMA, with the intrinsic
// micro-kernels of gemm_cpu_micro_avx512.h (x86-64 with GCC); on other
// targets available() is false and gemm_cpu.cpp picks a lesser build.
#include "gemm_cpu.h"
#include "gemm_cpu_blocks.h"  // before any target pragma: its inline code is generic

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
// Everything defined below (our kernel templates, not the library headers
// above) is compiled for AVX-512; it only runs after the CPU check.
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define TILED_CPU_ISA avx512
#define TILED_CPU_MICRO "gemm_cpu_micro_avx512.h"
#include "gemm_cpu_kernel.h"
#undef TILED_CPU_MICRO
#undef TILED_CPU_ISA
#pragma GCC pop_options

namespace tiled {
namespace cpu {
namespace avx512 {
bool available() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }
}  // namespace avx512
}  // namespace cpu
}  // namespace tiled

#else
namespace tiled {
namespace cpu {
namespace avx512 {
bool available() { return false; }
void gemm_isa(const GemmProblem&) {}
}  // namespace avx512
}  // namespace cpu
}  // namespace tiled
#endif
