// Element conversions shared by the SIMT kernels: storage type <-> accumulator.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tiled {
namespace cuda {

template <typename T> struct AccumFor { using type = float; };
template <> struct AccumFor<double> { using type = double; };

template <typename Acc, typename T> __device__ __forceinline__ Acc to_acc(T v) { return static_cast<Acc>(v); }
template <> __device__ __forceinline__ float to_acc<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T, typename Acc> __device__ __forceinline__ T from_acc(Acc v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_acc<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

}  // namespace cuda
}  // namespace tiled
