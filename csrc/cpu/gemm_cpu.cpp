// Host GEMM entry point: the kernel (gemm_cpu_kernel.h) is built for the
// baseline instruction set here, for AVX2 + FMA in gemm_cpu_avx2.cpp and for
// AVX-512 in gemm_cpu_avx512.cpp; the best one the CPU has runs, or a lesser
// one where TILED_CPU_ISA (baseline / avx2 / avx512, read per call) caps it.
// Builds give the same bits for the same inputs only within one build
// (FMA contracts multiply-adds; AVX-512 has its own register blocking), so
// the results of a process depend on its setting, never on the thread count.
#include "gemm_cpu.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../cuda/settings.h"

#define TILED_CPU_ISA baseline
#include "gemm_cpu_kernel.h"
#undef TILED_CPU_ISA

namespace tiled {
namespace cpu {

namespace avx2 {
bool available();
void gemm_isa(const GemmProblem& p);
}  // namespace avx2
namespace avx512 {
bool available();
void gemm_isa(const GemmProblem& p);
}  // namespace avx512

namespace {
enum class Isa { baseline, avx2, avx512 };
constexpr const char* kIsaNames[] = {"baseline", "avx2", "avx512"};

Isa isa_for_call() {
  static const Isa best = avx512::available() ? Isa::avx512 : avx2::available() ? Isa::avx2 : Isa::baseline;
  const char* cap = cuda::setting("TILED_CPU_ISA");
  if (cap == nullptr || *cap == '\0') return best;
  for (int i = 0; i < 3; ++i)
    if (std::strcmp(cap, kIsaNames[i]) == 0) return std::min(best, static_cast<Isa>(i));
  TORCH_CHECK(false, "TILED_CPU_ISA must be baseline, avx2 or avx512, got '", cap, "'");
}
}  // namespace

const char* isa_name() { return kIsaNames[static_cast<int>(isa_for_call())]; }

void gemm(const GemmProblem& p) {
  switch (isa_for_call()) {
    case Isa::avx512: return avx512::gemm_isa(p);
    case Isa::avx2: return avx2::gemm_isa(p);
    case Isa::baseline: return baseline::gemm_isa(p);
  }
}

}  // namespace cpu
}  // namespace tiled
