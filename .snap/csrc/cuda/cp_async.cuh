// cp.async group bookkeeping (sm_80+), shared by the SIMT ladder and the
// skinny kernel: close the copies issued so far into a group, and wait until
// at most N groups are still in flight.  No-ops on older GPUs (whose copies
// are synchronous fallbacks).
#pragma once

namespace tiled {
namespace cuda {

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace cuda
}  // namespace tiled
