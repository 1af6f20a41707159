// The launcher template behind sm80_<dtype>_<cfg>.cu: picks the kernel
// instance for the operands' layouts, raises its shared-memory limit once
// per device, launches it.
#pragma once
#include <algorithm>
#include <atomic>

#include "../smem_opt_in.h"
#include "sm80.cuh"

namespace tiled {
namespace cuda {
namespace sm80 {

template <class T, int CFG, bool AK, bool BK>
const char* launch_layout(const Launch& l, cudaStream_t stream) {
  static std::atomic<uint64_t> raised{0};
  constexpr Config kCfg = config(Traits<T>::kTf32, CFG);
  constexpr int kSmem = smem_bytes(kCfg, Traits<T>::kTf32);
  auto kernel = sm80_gemm_kernel<T, kCfg.bm, kCfg.bn, kCfg.warps_m, kCfg.warps_n, kCfg.stages, AK, BK, kCfg.ring>;
  if (!raise_smem_limit(kernel, kSmem, raised)) return "sm80: cannot raise the shared-memory limit";
  const dim3 grid(static_cast<unsigned>(l.p.tiles_m * l.p.tiles_n), static_cast<unsigned>(l.batch),
                  static_cast<unsigned>(l.splits));
  kernel<<<grid, threads(kCfg), kSmem, stream>>>(l.p);
  if (l.splits > 1) {
    const int64_t n = static_cast<int64_t>(l.batch) * l.p.M * l.p.N;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
    sm80_reduce_kernel<T><<<blocks, 256, 0, stream>>>(l.p, l.splits, l.batch);
  }
  return nullptr;
}

template <class T, int CFG>
const char* launch(const Launch& l, cudaStream_t stream) {
  if (l.a_kmajor)
    return l.b_kmajor ? launch_layout<T, CFG, true, true>(l, stream) : launch_layout<T, CFG, true, false>(l, stream);
  return l.b_kmajor ? launch_layout<T, CFG, false, true>(l, stream) : launch_layout<T, CFG, false, false>(l, stream);
}

}  // namespace sm80
}  // namespace cuda
}  // namespace tiled
