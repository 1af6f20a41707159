// The epilogue as a separate elementwise pass (epilogue.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "epilogue.cuh"

namespace tiled {
namespace cuda {
namespace {

template <class T>
__global__ void __launch_bounds__(256) epilogue_pass_kernel(GemmProblem p) {
  using Acc = typename AccumFor<T>::type;
  const int64_t mn = p.M * p.N;
  const int64_t total = mn * p.batch;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / mn, r = (i % mn) / p.N, c = i % p.N;
    T* out = static_cast<T*>(p.c) + b * p.c_batch_stride + r * p.c_row_stride + c;
    *out = from_acc<T, Acc>(epilogue_element_rt<T, Acc>(p.epi, to_acc<Acc>(*out), b, r, c));
  }
}

}  // namespace

const char* epilogue_pass(const GemmProblem& p, cudaStream_t stream) {
  const int64_t total = p.M * p.N * p.batch;
  if (total == 0 || !p.epi.any()) return nullptr;
  const int64_t blocks64 = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 65536 ? blocks64 : 65536);
  switch (p.dtype) {
    case DType::f32: epilogue_pass_kernel<float><<<blocks, 256, 0, stream>>>(p); break;
    case DType::f64: epilogue_pass_kernel<double><<<blocks, 256, 0, stream>>>(p); break;
    case DType::f16: epilogue_pass_kernel<__half><<<blocks, 256, 0, stream>>>(p); break;
    case DType::bf16: epilogue_pass_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(p); break;
  }
  return nullptr;
}

}  // namespace cuda
}  // namespace tiled
