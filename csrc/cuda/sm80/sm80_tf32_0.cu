// tf32 instances of the sm80 family, configuration 0 of sm80.h's list (4
// layouts); a file per dtype and configuration so they compile in parallel.
#include "sm80_launch.cuh"

namespace tiled {
namespace cuda {
namespace sm80 {

const char* launch_tf32_0(const Launch& l, cudaStream_t stream) { return launch<float, 0>(l, stream); }

}  // namespace sm80
}  // namespace cuda
}  // namespace tiled
