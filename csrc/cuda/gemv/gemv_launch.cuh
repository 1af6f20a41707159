// The launcher template behind gemv_bf16.cu / gemv_f16.cu: picks the kernel
// instance for (rows of A, B's layout), raises its shared-memory limit once
// per device, and launches it (as clusters of the K slices when S > 1).
#pragma once
#include <atomic>

#include "../cluster_launch.h"
#include "../smem_opt_in.h"
#include "gemv.cuh"

namespace tiled {
namespace cuda {
namespace gemv {

template <class T, int MR, bool BK>
const char* launch_instance(const Launch& l, cudaStream_t stream) {
  static std::atomic<uint64_t> raised{0};
  auto kernel = gemv_kernel<T, MR, BK>;
  // The largest slice gemv.cu makes, once; a launch asks for what it uses.
  if (!raise_smem_limit(kernel, smem_bytes(MR, BK, kMaxSliceBytes / (2 * MR)), raised))
    return "gemv: cannot raise the shared-memory limit";
  const Params& p = l.p;
  const int smem = smem_bytes(MR, BK, p.k_slice);
  const dim3 grid(static_cast<unsigned>(((p.N + tile_n(MR, BK) - 1) / tile_n(MR, BK)) * p.splits),
                  static_cast<unsigned>(l.batch), 1);
  if (p.splits == 1) {
    kernel<<<grid, kThreads, smem, stream>>>(p);
    return nullptr;
  }
  ClusterLaunch cluster(static_cast<unsigned>(p.splits), dim3(kThreads, 1, 1), smem, stream);
  return cluster.launch(grid, kernel, "gemv: cluster launch failed", p);
}

template <class T, int MR>
const char* launch_rows(const Launch& l, cudaStream_t stream) {
  return l.b_kmajor ? launch_instance<T, MR, true>(l, stream) : launch_instance<T, MR, false>(l, stream);
}

template <class T>
const char* launch(const Launch& l, cudaStream_t stream) {
  switch (l.mr) {
    case 1: return launch_rows<T, 1>(l, stream);
    case 2: return launch_rows<T, 2>(l, stream);
    case 4: return launch_rows<T, 4>(l, stream);
    case 8: return launch_rows<T, 8>(l, stream);
  }
  return "gemv: no such row count";
}

}  // namespace gemv
}  // namespace cuda
}  // namespace tiled
