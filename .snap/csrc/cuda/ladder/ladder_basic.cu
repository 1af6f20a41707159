// Ladder steps 1-4, instantiated for every dtype (float, double, half,
// bfloat16).  Layouts are handled by runtime strides (these steps read A(r,c)
// as ptr[r*row_stride + c*col_stride]), so one instantiation per dtype.
#include "04_two_level_tiling.cuh"
#include "ladder_steps.h"

namespace tiled {
namespace cuda {
namespace ladder {
namespace {

// Calls F<T>::run(p, args...) for the problem's dtype.
template <template <typename> class F, typename... Args>
const char* by_dtype(const GemmProblem& p, Args... args) {
  switch (p.dtype) {
    case DType::f32: return F<float>::run(p, args...);
    case DType::f64: return F<double>::run(p, args...);
    case DType::f16: return F<__half>::run(p, args...);
    case DType::bf16: return F<__nv_bfloat16>::run(p, args...);
  }
  return "ladder: unknown dtype";
}

template <typename T> struct Naive {
  static const char* run(const GemmProblem& p, cudaStream_t s) { return launch_naive<T>(p, s); }
};
template <typename T> struct SmemTiled {
  static const char* run(const GemmProblem& p, int tile, cudaStream_t s) {
    return tile == 16 ? launch_smem_tiled<T, 16>(p, s) : launch_smem_tiled<T, 32>(p, s);
  }
};
template <typename T> struct ThreadTiled {
  static const char* run(const GemmProblem& p, cudaStream_t s) { return launch_thread_tiled<T>(p, s); }
};
template <typename T> struct TwoLevel {
  static const char* run(const GemmProblem& p, cudaStream_t s) { return launch_two_level<T>(p, s); }
};

}  // namespace

const char* run_naive(const GemmProblem& p, cudaStream_t s) { return by_dtype<Naive>(p, s); }
const char* run_smem_tiled(const GemmProblem& p, int tile, cudaStream_t s) {
  return by_dtype<SmemTiled>(p, tile, s);
}
const char* run_thread_tiled(const GemmProblem& p, cudaStream_t s) { return by_dtype<ThreadTiled>(p, s); }
const char* run_two_level(const GemmProblem& p, cudaStream_t s) { return by_dtype<TwoLevel>(p, s); }

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
