// The sm90 family's launchers as no-ops, for the host drivers that compile
// the dispatch choice without any kernel (one translation unit each).
#pragma once
#include "cuda/hopper/hopper.h"

namespace tiled {
namespace cuda {
namespace sm90 {
const char* launch_bf16(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
const char* launch_f16(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
const char* launch_tf32(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
