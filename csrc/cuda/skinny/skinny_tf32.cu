// tf32 instances of the small-M kernel (fp32 operands with TF32 allowed; 12
// kernels: 3 block heights x 4 layouts, no deep pipeline, + the split
// reduction); a file per dtype so they compile in parallel.
#include "skinny_launch.cuh"

namespace tiled {
namespace cuda {
namespace skinny {

const char* launch_tf32(const Launch& l, cudaStream_t stream) { return launch<float>(l, stream); }

}  // namespace skinny
}  // namespace cuda
}  // namespace tiled
