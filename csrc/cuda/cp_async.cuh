// cp.async group bookkeeping (sm_80+), shared by the SIMT ladder and the
// skinny kernel: close the copies issued so far into a group, and wait until
// at most N groups are still in flight.  No-ops on older GPUs (whose copies
// are synchronous fallbacks).  Also the L2 policy of streamed operands, used
// by the skinny and Hopper kernels' copies.
#pragma once
#include <cstdint>

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

// An L2 cache policy for an operand read once (each element by one CTA, e.g.
// B of a GEMM with one tile row): evict_first.  After a kernel that wrote
// more than L2 holds (the benchmark's flush, or any large producer), L2 is
// full of dirty lines; a plain streamed read evicts them one for one and
// pays their write-back, while evict_first lines are the first victims of
// the next misses, so the stream mostly replaces its own clean lines.  A
// 32 MB read on an H100 after a 400 MB write: 21.9 -> 17.9 us
// (benchmarks/research/micro/l2_evict_first.cu; docs/skinny.md).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

}  // namespace cuda
}  // namespace tiled
