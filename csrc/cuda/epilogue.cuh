// The fused epilogue (gemm_problem.h's Epilogue) on the GPU, in the caller's
// coordinates (batch, row, col), given v = acc + bias.  Kernels call it
// behind a uniform branch on GemmProblem::epi.any(), so the plain GEMM runs
// the code it always ran.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "../epilogue_math.h"
#include "../gemm_problem.h"
#include "simt/numeric.cuh"

namespace tiled {
namespace cuda {

// One element, v in the accumulator type: pre := v (rounded to T) where
// asked; returns act(v) * mul + residual, the activation chosen at run time
// (a uniform branch).
template <class T, class Acc>
__device__ __forceinline__ Acc epilogue_element_rt(const Epilogue& e, Acc v, int64_t b, int64_t row, int64_t col) {
  if (e.pre) static_cast<T*>(e.pre)[b * e.pre_batch_stride + row * e.pre_row_stride + col] = from_acc<T, Acc>(v);
  v = activate(v, e.act);
  if (e.mul) v *= to_acc<Acc>(static_cast<const T*>(e.mul)[b * e.mul_batch_stride + row * e.mul_row_stride + col]);
  if (e.residual)
    v += to_acc<Acc>(static_cast<const T*>(e.residual)[b * e.res_batch_stride + row * e.res_row_stride + col]);
  return v;
}

// V consecutive elements of a row; 16 bytes, 16-byte aligned, where V > 1.
template <class T, int V>
struct alignas(V > 1 ? 16 : alignof(T)) Pack {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <class T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& x) {
  *reinterpret_cast<Pack<T, V>*>(p) = x;
}

template <Activation kAct, class Acc, int V>
__device__ __forceinline__ void activate_all(Acc (&v)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = activate_as<kAct>(v[j]);
}

// The epilogue over V consecutive elements (b, row, col .. col + V - 1) of a
// C that holds pre = acc + bias already rounded to T (the elementwise pass,
// and the sm90 kernel's shared-memory boxes): pre is stored where asked (as
// the same V values), and act(pre) * mul + residual returned.  Every tensor
// of `e` takes V-element vectors there (epilogue_vectors_ok).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> epilogue_pack(const Epilogue& e, const Pack<T, V>& in, int64_t b, int64_t row,
                                                    int64_t col) {
  using Acc = typename AccumFor<T>::type;
  if (e.pre) store_pack<T, V>(static_cast<T*>(e.pre) + b * e.pre_batch_stride + row * e.pre_row_stride + col, in);
  Acc v[V];
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = to_acc<Acc>(in.v[j]);
  switch (e.act) {  // uniform; one unrolled loop per activation, no branch per element
    case Activation::relu: activate_all<Activation::relu>(v); break;
    case Activation::gelu_erf: activate_all<Activation::gelu_erf>(v); break;
    case Activation::gelu_tanh: activate_all<Activation::gelu_tanh>(v); break;
    case Activation::silu: activate_all<Activation::silu>(v); break;
    default: break;
  }
  if (e.mul) {
    const Pack<T, V> m =
        load_pack<T, V>(static_cast<const T*>(e.mul) + b * e.mul_batch_stride + row * e.mul_row_stride + col);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] *= to_acc<Acc>(m.v[j]);
  }
  if (e.residual) {
    const Pack<T, V> s =
        load_pack<T, V>(static_cast<const T*>(e.residual) + b * e.res_batch_stride + row * e.res_row_stride + col);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] += to_acc<Acc>(s.v[j]);
  }
  Pack<T, V> out;
#pragma unroll
  for (int j = 0; j < V; ++j) out.v[j] = from_acc<T, Acc>(v[j]);
  return out;
}

// Whether C (`src` where the pass reads another tensor), pre, mul and
// residual all take 16-byte vectors of v elements: N, their row and batch
// strides multiples of v, their bases 16-byte aligned.
inline bool epilogue_vectors_ok(const GemmProblem& p, const void* src, int64_t src_bs, int64_t src_rs, int v) {
  if (p.N % v != 0) return false;
  const auto ok = [&](const void* ptr, int64_t bs, int64_t rs) {
    return ptr == nullptr || (pointer_alignment(ptr) >= 16 && rs % v == 0 && (p.batch == 1 || bs % v == 0));
  };
  const Epilogue& e = p.epi;
  return ok(src, src_bs, src_rs) && ok(p.c, p.c_batch_stride, p.c_row_stride) &&
         ok(e.pre, e.pre_batch_stride, e.pre_row_stride) && ok(e.mul, e.mul_batch_stride, e.mul_row_stride) &&
         ok(e.residual, e.res_batch_stride, e.res_row_stride);
}

// The epilogue as a pass of its own (epilogue.cu), for the families that do
// not fuse it (sm80, simt_fast; sm90 where its TMA-stored boxes cannot take
// it; dispatch.cu): C := act(src) * mul + residual, where src (same shape
// as C, unit column stride) holds acc + bias as the GEMM stored it: C
// itself, or epi.pre when the caller keeps the pre-activation (the GEMM then
// stores into pre, and the pass leaves pre as it is when src is pre).
// Enqueued on `stream`; nullptr on success.
const char* epilogue_pass(const GemmProblem& p, const void* src, int64_t src_batch_stride, int64_t src_row_stride,
                          cudaStream_t stream);

}  // namespace cuda
}  // namespace tiled
