// Host GEMM entry point: the kernel (gemm_cpu_kernel.h) is built for the
// baseline instruction set here, for AVX2 + FMA in gemm_cpu_avx2.cpp and for
// AVX-512 in gemm_cpu_avx512.cpp, and bf16 has an AMX kernel
// (gemm_cpu_amx.cpp); the best one the CPU has runs, or a lesser one where
// TILED_CPU_ISA (baseline / avx2 / avx512 / amx, read per call) caps it.
// Builds give the same bits for the same inputs only within one build
// (FMA contracts multiply-adds; AVX-512 has its own register blocking), so
// the results of a process depend on its setting, never on the thread count.
#include "gemm_cpu.h"
#include "gemm_cpu_blocks.h"  // before any target pragma: its inline code is generic

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

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
namespace amx {
bool available();
void gemm_bf16(const GemmProblem& p);
}  // namespace amx

namespace {
// amx: bf16 on AMX tiles, every other dtype on the AVX-512 build.
enum class Isa { baseline, avx2, avx512, amx };
constexpr const char* kIsaNames[] = {"baseline", "avx2", "avx512", "amx"};

Isa isa_for_call(DType dtype) {
  static const Isa best = avx512::available() ? Isa::avx512 : avx2::available() ? Isa::avx2 : Isa::baseline;
  Isa cap = Isa::amx;
  const char* name = cuda::setting("TILED_CPU_ISA");
  if (name != nullptr && *name != '\0') {
    int i = 0;
    while (i < 4 && std::strcmp(name, kIsaNames[i]) != 0) ++i;
    STD_TORCH_CHECK(i < 4, "TILED_CPU_ISA must be baseline, avx2, avx512 or amx, got '", name, "'");
    cap = static_cast<Isa>(i);
  }
  // AMX is asked of the OS (amx::available) only when it may be used.
  if (dtype == DType::bf16 && cap == Isa::amx && best == Isa::avx512 && amx::available()) return Isa::amx;
  return std::min(best, std::min(cap, Isa::avx512));
}
}  // namespace

const char* isa_name(DType dtype) { return kIsaNames[static_cast<int>(isa_for_call(dtype))]; }

void gemm(const GemmProblem& p) {
  switch (isa_for_call(p.dtype)) {
    case Isa::amx: return amx::gemm_bf16(p);
    case Isa::avx512: return avx512::gemm_isa(p);
    case Isa::avx2: return avx2::gemm_isa(p);
    case Isa::baseline: return baseline::gemm_isa(p);
  }
}

}  // namespace cpu
}  // namespace tiled
