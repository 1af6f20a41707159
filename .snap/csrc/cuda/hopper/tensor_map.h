// Host side: building CUtensorMap descriptors for the sm_90a GEMM's TMA loads.
//
// The extension must not link libcuda (the driver library is only present at
// run time), so cuTensorMapEncodeTiled is looked up once through the runtime's
// driver-entry-point query and cached; <cuda.h> / <cudaTypedefs.h> are
// included only for the types.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tiled {
namespace cuda {
namespace sm90 {

using EncodeTiledFn = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's cuTensorMapEncodeTiled, or nullptr if the driver is too old to
// have it.  Thread-safe (function-local static), looked up once per process.
inline EncodeTiledFn tensor_map_encoder() {
  static const EncodeTiledFn fn = []() -> EncodeTiledFn {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status);
#else
    cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &status);
#endif
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // do not leave a sticky-looking error for the caller
      return nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// One GEMM operand seen as a 3-D tensor [batch][outer][inner] whose `inner`
// dimension is contiguous, read in boxes of box_inner x box_outer x 1 with the
// 128-byte swizzle that wgmma's descriptors expect.
//   outer_stride, batch_stride: in elements (>0 and 16-byte multiples, checked
//   by hopper_can_run).  batch == 1 describes a broadcast / single matrix: the
//   kernel then always asks for batch coordinate 0.
struct OperandMapSpec {
  CUtensorMapDataType dtype;
  int elem_bytes;
  const void* ptr;
  uint64_t inner, outer, batch;
  uint64_t outer_stride, batch_stride;
  uint32_t box_inner, box_outer;
};

// Returns nullptr on success, else why not.
inline const char* encode_operand_map(CUtensorMap* map, const OperandMapSpec& s) {
  EncodeTiledFn encode = tensor_map_encoder();
  if (!encode) return "sm90: cuTensorMapEncodeTiled not available from the driver";
  const uint64_t es = static_cast<uint64_t>(s.elem_bytes);
  cuuint64_t dims[3] = {s.inner, s.outer, s.batch};
  // A single-matrix operand gets the dense product as its (unused) batch
  // stride so that the strides stay increasing, whatever the driver checks.
  const uint64_t outer_bytes = s.outer_stride * es;
  const uint64_t batch_bytes = s.batch > 1 ? s.batch_stride * es : outer_bytes * s.outer;
  cuuint64_t strides[2] = {outer_bytes, batch_bytes};
  cuuint32_t box[3] = {s.box_inner, s.box_outer, 1};
  cuuint32_t elem_strides[3] = {1, 1, 1};
  CUresult r = encode(map, s.dtype, 3, const_cast<void*>(s.ptr), dims, strides, box, elem_strides,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? nullptr : "sm90: cuTensorMapEncodeTiled rejected an operand";
}

}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
