// The one place that picks a kernel for a problem.  Order of preference:
//   1. Hopper tensor cores (sm_90a): bf16, fp16, fp32 with allow_tf32;
//   2. the fast strict-fp32 SIMT kernel (the ladder's last step);
//   3. the general SIMT kernel, which takes anything.
#include "dispatch.h"
#include "hopper/hopper.h"

#include <cstdlib>
#include <string>

namespace tiled {
namespace cuda {

void simt_general_f32(const GemmProblem& p, cudaStream_t stream);
void simt_general_f64(const GemmProblem& p, cudaStream_t stream);
void simt_general_f16(const GemmProblem& p, cudaStream_t stream);
void simt_general_bf16(const GemmProblem& p, cudaStream_t stream);

const char* simt_general_gemm(const GemmProblem& p, const DeviceInfo&, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f32: simt_general_f32(p, stream); break;
    case DType::f64: simt_general_f64(p, stream); break;
    case DType::f16: simt_general_f16(p, stream); break;
    case DType::bf16: simt_general_bf16(p, stream); break;
  }
  return nullptr;
}

namespace {

// TILED_DISABLE_KERNELS=hopper,simt_fast (read once) takes families out of
// the choice: a way to bisect a suspected kernel bug, or to compare against
// the fallback, without rebuilding.
bool disabled(const char* family) {
  static const std::string list = [] {
    const char* v = std::getenv("TILED_DISABLE_KERNELS");
    return std::string(",") + (v ? v : "") + ",";
  }();
  return list.find(std::string(",") + family + ",") != std::string::npos;
}

enum class Family { hopper, simt_fast, simt_general };

Family choose(const GemmProblem& p, const DeviceInfo& dev) {
  if (!disabled("hopper") && hopper_can_run(p, dev)) return Family::hopper;
  if (p.dtype == DType::f32 && !p.allow_tf32 && !disabled("simt_fast") && simt_fast_can_run(p, dev))
    return Family::simt_fast;
  return Family::simt_general;
}

}  // namespace

const char* gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream) {
  switch (choose(p, dev)) {
    case Family::hopper: return hopper_gemm(p, dev, stream);
    case Family::simt_fast: return simt_fast_gemm(p, dev, stream);
    case Family::simt_general: break;
  }
  return simt_general_gemm(p, dev, stream);
}

const char* gemm_kernel_name(const GemmProblem& p, const DeviceInfo& dev) {
  switch (choose(p, dev)) {
    case Family::hopper: return hopper_config_name(p, dev);
    case Family::simt_fast: return "simt_fast";
    case Family::simt_general: break;
  }
  return "simt_general";
}

}  // namespace cuda
}  // namespace tiled
