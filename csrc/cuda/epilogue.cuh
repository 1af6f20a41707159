// The fused epilogue (gemm_problem.h's Epilogue) on the GPU: one element at
// a time, in the caller's coordinates (batch, row, col), given v = acc +
// bias in the accumulator type.  Kernels call it behind a uniform branch on
// GemmProblem::epi.any(), so the plain GEMM runs the code it always ran.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../epilogue_math.h"
#include "../gemm_problem.h"
#include "simt/numeric.cuh"

namespace tiled {
namespace cuda {

// pre := v (rounded to T) where asked; returns act(v) * mul + residual, the
// activation chosen per element at run time (a uniform branch).
template <class T, class Acc>
__device__ __forceinline__ Acc epilogue_element_rt(const Epilogue& e, Acc v, int64_t b, int64_t row, int64_t col) {
  if (e.pre) static_cast<T*>(e.pre)[b * e.pre_batch_stride + row * e.pre_row_stride + col] = from_acc<T, Acc>(v);
  v = activate(v, e.act);
  if (e.mul) v *= to_acc<Acc>(static_cast<const T*>(e.mul)[b * e.mul_batch_stride + row * e.mul_row_stride + col]);
  if (e.residual)
    v += to_acc<Acc>(static_cast<const T*>(e.residual)[b * e.res_batch_stride + row * e.res_row_stride + col]);
  return v;
}

// The epilogue as a pass of its own over a C that already holds acc + bias
// (epilogue.cu): for the families that do not fuse it yet (sm90, sm80,
// simt_fast; dispatch.cu).  Enqueued on `stream`; nullptr on success.
const char* epilogue_pass(const GemmProblem& p, cudaStream_t stream);

}  // namespace cuda
}  // namespace tiled
