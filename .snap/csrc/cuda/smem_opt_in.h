// Dynamic shared memory above 48 KB must be opted into per kernel (and per
// device) with cudaFuncSetAttribute before the launch.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace tiled {
namespace cuda {

// Raises `kernel`'s dynamic shared-memory limit to `bytes` on the current
// device, once per device.  `raised` remembers which devices (0..63; others
// are raised on every call) have it; it must be a static that belongs to this
// one kernel: a static inside a helper templated on the kernel pointer TYPE
// would be shared by every kernel with the same signature, and only the first
// of them would ever be raised.  Returns false if the attribute call fails.
template <class Kernel>
bool raise_smem_limit(Kernel kernel, int bytes, std::atomic<uint64_t>& raised) {
  if (bytes <= 48 * 1024) return true;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const uint64_t bit = device < 64 ? (uint64_t{1} << device) : 0;
  if (bit && (raised.load(std::memory_order_relaxed) & bit)) return true;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  raised.fetch_or(bit, std::memory_order_relaxed);
  return true;
}

}  // namespace cuda
}  // namespace tiled
