// What the host drivers (one translation unit each) share: the sm90
// family's launchers as no-ops, so the dispatch choice compiles without any
// kernel, and the TILED_CONFIG setting a driver line asks for.
#pragma once
#include <cstdlib>
#include <cstring>

#include "cuda/hopper/hopper.h"

// "-": unset; anything else: TILED_CONFIG=config.
inline void force_config(const char* config) {
  if (std::strcmp(config, "-") == 0)
    unsetenv("TILED_CONFIG");
  else
    setenv("TILED_CONFIG", config, 1);
}

namespace tiled {
namespace cuda {
namespace sm90 {
const char* launch_bf16(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
const char* launch_f16(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
const char* launch_tf32(const GemmProblem&, const DeviceInfo&, cudaStream_t, Choice, void*) { return nullptr; }
}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
