// The launcher template behind skinny_bf16.cu / skinny_f16.cu / skinny_tf32.cu: picks the
// kernel instance for (block height, layouts), raises its shared-memory
// limit once per device, launches it, then the split reduction.
#pragma once
#include <atomic>

#include "../cluster_launch.h"
#include "../smem_opt_in.h"
#include "skinny.cuh"

namespace tiled {
namespace cuda {
namespace skinny {

template <class T, int BM, bool AK, bool BK, bool DEEP>
const char* launch_tile(const Launch& l, cudaStream_t stream) {
  static std::atomic<uint64_t> raised{0};
  constexpr int kSmem = smem_bytes(BM, DEEP);
  auto kernel = skinny_kernel<T, BM, stages_for(BM, DEEP), AK, BK>;
  if (!raise_smem_limit(kernel, kSmem, raised)) return "skinny: cannot raise the shared-memory limit";
  const Params& p = l.p;
  const dim3 grid(((p.M + BM - 1) / BM) * p.splits, (p.N + kBN - 1) / kBN, l.batch);
  if (!p.cluster_reduce) {
    kernel<<<grid, kThreads, kSmem, stream>>>(p);
    return nullptr;
  }
  ClusterLaunch cluster(static_cast<unsigned>(p.splits), dim3(kThreads, 1, 1), kSmem, stream);
  return cluster.launch(grid, kernel, "skinny: cluster launch failed", p);
}

template <class T, int BM, bool DEEP>
const char* launch_depth(const Launch& l, cudaStream_t stream) {
  if (l.a_kmajor)
    return l.b_kmajor ? launch_tile<T, BM, true, true, DEEP>(l, stream)
                      : launch_tile<T, BM, true, false, DEEP>(l, stream);
  return l.b_kmajor ? launch_tile<T, BM, false, true, DEEP>(l, stream)
                    : launch_tile<T, BM, false, false, DEEP>(l, stream);
}

// (tf32 has no deep instances: skinny.cu declines them.)
template <class T, int BM>
const char* launch_bm(const Launch& l, cudaStream_t stream) {
  if constexpr (sizeof(T) == 4) {
    return l.deep ? "skinny: no deep tf32 kernels" : launch_depth<T, BM, false>(l, stream);
  } else {
    return l.deep ? launch_depth<T, BM, true>(l, stream) : launch_depth<T, BM, false>(l, stream);
  }
}

template <class T>
const char* launch(const Launch& l, cudaStream_t stream) {
  const char* err = l.bm == 16   ? launch_bm<T, 16>(l, stream)
                    : l.bm == 32 ? launch_bm<T, 32>(l, stream)
                    : l.bm == 64 ? launch_bm<T, 64>(l, stream)
                                 : "skinny: no such block height";
  if (err || l.p.splits == 1 || l.p.cluster_reduce) return err;
  const int64_t mn = static_cast<int64_t>(l.p.M) * l.p.N;
  const int64_t blocks = (mn + 255) / 256;
  const dim3 grid(static_cast<unsigned>(blocks < 2048 ? blocks : 2048), l.batch);
  skinny_reduce_kernel<T><<<grid, 256, 0, stream>>>(l.p);
  return nullptr;
}

}  // namespace skinny
}  // namespace cuda
}  // namespace tiled
