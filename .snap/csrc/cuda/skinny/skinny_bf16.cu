// bf16 instances of the small-M kernel (12 kernels: 3 block heights x 4
// layouts, + the split reduction); a file per dtype so they compile in parallel.
#include "skinny_launch.cuh"

namespace tiled {
namespace cuda {
namespace skinny {

const char* launch_bf16(const Launch& l, cudaStream_t stream) { return launch<__nv_bfloat16>(l, stream); }

}  // namespace skinny
}  // namespace cuda
}  // namespace tiled
