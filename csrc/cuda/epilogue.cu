// The epilogue as a separate elementwise pass (epilogue.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dispatch.h"
#include "epilogue.cuh"

namespace tiled {
namespace cuda {
namespace {

constexpr int kPassThreads = 256;

// Blocks for `units` units of work, one per block up to 65536 (the kernels
// loop over the rest).
unsigned grid_for(int64_t units) { return static_cast<unsigned>(units < 65536 ? units : 65536); }

// out[b, r, c..] = epilogue(src[b, r, c..]), V columns per thread (16-byte
// vectors where V > 1).  Units of work are (row, chunk of kPassThreads * V
// columns): one 64-bit division per unit, none per element.
template <class T, int V>
__global__ void __launch_bounds__(kPassThreads)
    epilogue_pass_kernel(GemmProblem p, const T* src, int64_t src_bs, int64_t src_rs) {
  constexpr int64_t kChunk = static_cast<int64_t>(kPassThreads) * V;
  const int64_t chunks = (p.N + kChunk - 1) / kChunk;
  const int64_t units = p.M * p.batch * chunks;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t row = u / chunks;
    const int64_t col = (u - row * chunks) * kChunk + static_cast<int64_t>(threadIdx.x) * V;
    if (col >= p.N) continue;
    const int64_t b = row / p.M, r = row - b * p.M;
    const Pack<T, V> in = load_pack<T, V>(src + b * src_bs + r * src_rs + col);
    store_pack<T, V>(static_cast<T*>(p.c) + b * p.c_batch_stride + r * p.c_row_stride + col,
                     epilogue_pack<T, V>(p.epi, in, b, r, col));
  }
}

template <class T>
void launch_pass(const GemmProblem& p, const void* src, int64_t src_bs, int64_t src_rs, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = epilogue_vectors_ok(p, src, src_bs, src_rs, V);
  const int64_t chunk = static_cast<int64_t>(kPassThreads) * (vec ? V : 1);
  const unsigned blocks = grid_for(p.M * p.batch * ((p.N + chunk - 1) / chunk));
  const T* s = static_cast<const T*>(src);
  if (vec)
    epilogue_pass_kernel<T, V><<<blocks, kPassThreads, 0, stream>>>(p, s, src_bs, src_rs);
  else
    epilogue_pass_kernel<T, 1><<<blocks, kPassThreads, 0, stream>>>(p, s, src_bs, src_rs);
}

template <class T, int V, Activation kAct>
__device__ __forceinline__ void gated_backward_run(const T* g, const T* z, const T* up, T* d_gate, T* d_up,
                                                   int64_t n) {
  using Acc = typename AccumFor<T>::type;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x * V;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += step) {
    const Pack<T, V> gv = load_pack<T, V>(g + i), zv = load_pack<T, V>(z + i), uv = load_pack<T, V>(up + i);
    Pack<T, V> dg, du;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const Acc x = to_acc<Acc>(zv.v[j]), gj = to_acc<Acc>(gv.v[j]);
      du.v[j] = from_acc<T, Acc>(gj * activate_as<kAct>(x));
      dg.v[j] = from_acc<T, Acc>(gj * to_acc<Acc>(uv.v[j]) * activate_grad_as<kAct>(x));
    }
    store_pack<T, V>(d_gate + i, dg);
    store_pack<T, V>(d_up + i, du);
  }
}

template <class T, int V>
__global__ void __launch_bounds__(kPassThreads)
    gated_backward_kernel(const T* g, const T* z, const T* up, T* d_gate, T* d_up, int64_t n, Activation act) {
  switch (act) {
    case Activation::relu: return gated_backward_run<T, V, Activation::relu>(g, z, up, d_gate, d_up, n);
    case Activation::gelu_erf: return gated_backward_run<T, V, Activation::gelu_erf>(g, z, up, d_gate, d_up, n);
    case Activation::gelu_tanh: return gated_backward_run<T, V, Activation::gelu_tanh>(g, z, up, d_gate, d_up, n);
    case Activation::silu: return gated_backward_run<T, V, Activation::silu>(g, z, up, d_gate, d_up, n);
    default: return gated_backward_run<T, V, Activation::none>(g, z, up, d_gate, d_up, n);
  }
}

template <class T>
void launch_gated_backward(const void* g, const void* z, const void* up, void* d_gate, void* d_up, int64_t n,
                           Activation act, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  bool vec = n % V == 0;
  for (const void* ptr : {g, z, up, static_cast<const void*>(d_gate), static_cast<const void*>(d_up)})
    vec = vec && pointer_alignment(ptr) >= 16;
  const int64_t per_block = static_cast<int64_t>(kPassThreads) * (vec ? V : 1);
  const unsigned blocks = grid_for((n + per_block - 1) / per_block);
  const auto* gt = static_cast<const T*>(g);
  const auto* zt = static_cast<const T*>(z);
  const auto* ut = static_cast<const T*>(up);
  if (vec)
    gated_backward_kernel<T, V><<<blocks, kPassThreads, 0, stream>>>(gt, zt, ut, static_cast<T*>(d_gate),
                                                                     static_cast<T*>(d_up), n, act);
  else
    gated_backward_kernel<T, 1><<<blocks, kPassThreads, 0, stream>>>(gt, zt, ut, static_cast<T*>(d_gate),
                                                                     static_cast<T*>(d_up), n, act);
}

}  // namespace

const char* gated_backward(DType dtype, const void* g, const void* z, const void* up, void* d_gate, void* d_up,
                           int64_t n, Activation act, cudaStream_t stream) {
  if (n == 0) return nullptr;
  switch (dtype) {
    case DType::f32: launch_gated_backward<float>(g, z, up, d_gate, d_up, n, act, stream); break;
    case DType::f64: launch_gated_backward<double>(g, z, up, d_gate, d_up, n, act, stream); break;
    case DType::f16: launch_gated_backward<__half>(g, z, up, d_gate, d_up, n, act, stream); break;
    case DType::bf16: launch_gated_backward<__nv_bfloat16>(g, z, up, d_gate, d_up, n, act, stream); break;
  }
  return nullptr;
}

const char* epilogue_pass(const GemmProblem& p, const void* src, int64_t src_batch_stride, int64_t src_row_stride,
                          cudaStream_t stream) {
  if (p.M * p.N * p.batch == 0 || (!p.epi.any() && src == p.c)) return nullptr;
  switch (p.dtype) {
    case DType::f32: launch_pass<float>(p, src, src_batch_stride, src_row_stride, stream); break;
    case DType::f64: launch_pass<double>(p, src, src_batch_stride, src_row_stride, stream); break;
    case DType::f16: launch_pass<__half>(p, src, src_batch_stride, src_row_stride, stream); break;
    case DType::bf16: launch_pass<__nv_bfloat16>(p, src, src_batch_stride, src_row_stride, stream); break;
  }
  return nullptr;
}

}  // namespace cuda
}  // namespace tiled
