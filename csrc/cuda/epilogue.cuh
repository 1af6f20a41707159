// The fused epilogue (gemm_problem.h's Epilogue) on the GPU: one element at
// a time, in the caller's coordinates (batch, row, col), given v = acc +
// bias in the accumulator type.  Kernels call it behind a uniform branch on
// GemmProblem::epi.any(), so the plain GEMM runs the code it always ran.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../epilogue_math.h"
#include "../gemm_problem.h"
#include "simt/numeric.cuh"

namespace tiled {
namespace cuda {

// pre := v (rounded to T) where asked; returns act(v) * mul + residual.
template <class T, Activation kAct, class Acc>
__device__ __forceinline__ Acc epilogue_element(const Epilogue& e, Acc v, int64_t b, int64_t row, int64_t col) {
  if (e.pre) static_cast<T*>(e.pre)[b * e.pre_batch_stride + row * e.pre_row_stride + col] = from_acc<T, Acc>(v);
  v = activate_as<kAct>(v);
  if (e.mul) v *= to_acc<Acc>(static_cast<const T*>(e.mul)[b * e.mul_batch_stride + row * e.mul_row_stride + col]);
  if (e.residual)
    v += to_acc<Acc>(static_cast<const T*>(e.residual)[b * e.res_batch_stride + row * e.res_row_stride + col]);
  return v;
}

// The same with the activation chosen per element at run time (for kernels
// with few elements per thread; the sm90 kernel switches once per tile).
template <class T, class Acc>
__device__ __forceinline__ Acc epilogue_element_rt(const Epilogue& e, Acc v, int64_t b, int64_t row, int64_t col) {
  if (e.pre) static_cast<T*>(e.pre)[b * e.pre_batch_stride + row * e.pre_row_stride + col] = from_acc<T, Acc>(v);
  v = activate(v, e.act);
  if (e.mul) v *= to_acc<Acc>(static_cast<const T*>(e.mul)[b * e.mul_batch_stride + row * e.mul_row_stride + col]);
  if (e.residual)
    v += to_acc<Acc>(static_cast<const T*>(e.residual)[b * e.res_batch_stride + row * e.res_row_stride + col]);
  return v;
}

// Calls f(std::integral_constant<Activation, a>{}) for the run-time `a`:
// one instantiation of f's body per activation, chosen once.
template <class F>
__device__ __forceinline__ void with_activation(Activation a, F&& f) {
  switch (a) {
    case Activation::relu: f(std::integral_constant<Activation, Activation::relu>{}); break;
    case Activation::gelu_erf: f(std::integral_constant<Activation, Activation::gelu_erf>{}); break;
    case Activation::gelu_tanh: f(std::integral_constant<Activation, Activation::gelu_tanh>{}); break;
    case Activation::silu: f(std::integral_constant<Activation, Activation::silu>{}); break;
    default: f(std::integral_constant<Activation, Activation::none>{}); break;
  }
}

// The epilogue as a pass of its own over a C that already holds acc + bias
// (epilogue.cu): for the kernels that do not fuse it yet (simt_fast, whose
// fp32 C is the accumulator itself, so the result is the fused one bit for
// bit).  Enqueued on `stream`; nullptr on success.
const char* epilogue_pass(const GemmProblem& p, cudaStream_t stream);

}  // namespace cuda
}  // namespace tiled
