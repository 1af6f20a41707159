// Launches whose blocks form thread-block clusters along x (sm_90): the
// cudaLaunchKernelEx configuration every clustered launcher needs.  Host
// only, torch-free.
#pragma once
#include <cuda_runtime.h>

namespace tiled {
namespace cuda {

class ClusterLaunch {
 public:
  ClusterLaunch(unsigned cluster_x, dim3 block, size_t smem_bytes, cudaStream_t stream) {
    attr_[0].id = cudaLaunchAttributeClusterDimension;
    attr_[0].val.clusterDim.x = cluster_x;
    attr_[0].val.clusterDim.y = 1;
    attr_[0].val.clusterDim.z = 1;
    cfg_.attrs = attr_;  // points into this object: not copyable
    cfg_.numAttrs = 1;
    cfg_.blockDim = block;
    cfg_.dynamicSmemBytes = smem_bytes;
    cfg_.stream = stream;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;

  // How many such clusters of `kernel` can be resident at once on a grid of
  // `grid` blocks; 0 when the runtime cannot say.
  template <class Kernel>
  int max_active_clusters(Kernel kernel, dim3 grid) {
    cfg_.gridDim = grid;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg_) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }

  // nullptr on success, else `failed` (the launch error is cleared).
  template <class Kernel, class... Args>
  const char* launch(dim3 grid, Kernel kernel, const char* failed, const Args&... args) {
    cfg_.gridDim = grid;
    if (cudaLaunchKernelEx(&cfg_, kernel, args...) != cudaSuccess) {
      (void)cudaGetLastError();
      return failed;
    }
    return nullptr;
  }

 private:
  cudaLaunchConfig_t cfg_{};
  cudaLaunchAttribute attr_[1];
};

}  // namespace cuda
}  // namespace tiled
