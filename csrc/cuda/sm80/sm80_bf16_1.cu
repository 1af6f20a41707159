// bf16 instances of the sm80 family, configuration 1 of sm80.h's list (4
// layouts); a file per dtype and configuration so they compile in parallel.
#include "sm80_launch.cuh"

namespace tiled {
namespace cuda {
namespace sm80 {

const char* launch_bf16_1(const Launch& l, cudaStream_t stream) { return launch<__nv_bfloat16, 1>(l, stream); }

}  // namespace sm80
}  // namespace cuda
}  // namespace tiled
