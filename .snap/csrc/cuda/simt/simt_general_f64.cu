// One dtype per file so the instantiations compile in parallel.
#include "simt_general.cuh"

namespace tiled {
namespace cuda {
void simt_general_f64(const GemmProblem& p, cudaStream_t stream) { simt_general::launch<double>(p, stream); }
}  // namespace cuda
}  // namespace tiled
