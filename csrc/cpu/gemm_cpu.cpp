// Host GEMM entry point: the kernel (gemm_cpu_kernel.h) is built for the
// baseline instruction set here, for AVX2 + FMA in gemm_cpu_avx2.cpp and for
// AVX-512 in gemm_cpu_avx512.cpp, and bf16 has an AMX kernel
// (gemm_cpu_amx.cpp); the best one the CPU has runs.  Its configurations
// are these instruction sets, by name (cpu_blocked_baseline / _avx2 /
// _avx512 / _amx, as ttg.kernel_name reports them, or the set alone):
// TILED_CONFIG forces one where the CPU has it (read per call), and
// TILED_DISABLE_KERNELS=amx / avx512 / avx2 takes sets out (read once).
// Builds give the same bits for the same inputs only within one build
// (FMA contracts multiply-adds; AVX-512 has its own register blocking), so
// the results of a process depend on those switches, never on the thread
// count.
#include "gemm_cpu.h"
#include "gemm_cpu_blocks.h"  // before any target pragma: its inline code is generic

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <string>
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
  static const bool avx512_on = !cuda::kernel_disabled("avx512") && avx512::available();
  static const bool avx2_on = !cuda::kernel_disabled("avx2") && avx2::available();
  // AMX is asked of the OS (amx::available) only when it may be used.
  const auto usable = [&](Isa isa) {
    switch (isa) {
      case Isa::amx: return dtype == DType::bf16 && avx512_on && !cuda::kernel_disabled("amx") && amx::available();
      case Isa::avx512: return avx512_on;
      case Isa::avx2: return avx2_on;
      case Isa::baseline: break;
    }
    return true;
  };
  Isa forced = Isa::baseline;
  const bool named = cuda::any_config_item(cuda::forced_config(), [&](std::string name) {
    if (name.rfind("cpu_blocked_", 0) == 0) name = name.substr(12);
    for (int i = 0; i < 4; ++i)
      if (name == kIsaNames[i] && usable(static_cast<Isa>(i))) {
        forced = static_cast<Isa>(i);
        return true;
      }
    return false;
  });
  if (named) return forced;
  return usable(Isa::amx) ? Isa::amx : avx512_on ? Isa::avx512 : avx2_on ? Isa::avx2 : Isa::baseline;
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
