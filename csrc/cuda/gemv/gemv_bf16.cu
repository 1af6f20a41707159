// bf16 instances of the few-row kernel (8 kernels: 4 row counts x 2 layouts
// of B); a file per dtype so they compile in parallel.
#include "gemv_launch.cuh"

namespace tiled {
namespace cuda {
namespace gemv {

const char* launch_bf16(const Launch& l, cudaStream_t stream) { return launch<__nv_bfloat16>(l, stream); }

}  // namespace gemv
}  // namespace cuda
}  // namespace tiled
