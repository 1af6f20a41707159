// The one description of a GEMM that every kernel understands.
//
//   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]  (+ bias[n])
//
// optionally followed by an epilogue (GemmProblem::epi), in this order:
//   pre  = acc + bias                 (stored to epi.pre when asked: the
//                                      pre-activation a backward needs)
//   C    = act(pre) * mul + residual  (each part only where present)
// All of it is applied to the fp32 (fp64) accumulator before the one
// rounding to the output dtype; it is a runtime argument (no kernel
// instantiation depends on it).
//
// Torch-free on purpose: kernels (CPU and CUDA) include only this header, so
// each can be read, tested and reused without ATen.  All strides are in
// elements, not bytes.  The registration layer guarantees, before any kernel
// runs:
//   * every operand has a unit stride in one of its two matrix dims
//     (a_col == 1: A row-major, "N";  a_row == 1: A column-major, "T";
//      same for B), so kernels pick a layout from strides, never copy;
//   * when a dim has size <= 1 its stride is normalised so that the layout
//     test above is unambiguous (row-major wins);
//   * C is a fresh row-major tensor: c_col == 1 implicitly, c_row >= N;
//   * batch strides may be 0 (a broadcast operand);
//   * bias, if not null, is a contiguous [N] vector of the operands' dtype;
//   * M, N, K, batch >= 0; a kernel is never called with M*N*batch == 0, and
//     K == 0 is handled by the caller (zeros + bias).
#pragma once
#include <cstdint>

// Small helpers callable from host and device code (the header is compiled
// by both compilers).
#if defined(__CUDACC__)
#define TILED_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TILED_HOST_DEVICE inline
#endif

namespace tiled {

enum class DType : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

inline int dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
  }
  return 0;
}

// Strided view of one operand: element (b, r, c) lives at
// ptr + b*batch_stride + r*row_stride + c*col_stride.
struct Operand {
  const void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 1;

  // Row-major ("N"): the column index is the contiguous one.
  bool row_major() const { return col_stride == 1; }
};

// Elementwise activations of the epilogue (numbering shared with the ops'
// string argument, see csrc/epilogue_math.h for the formulas).
enum class Activation : int { none = 0, relu = 1, gelu_erf = 2, gelu_tanh = 3, silu = 4 };

// The optional epilogue.  mul, residual and pre are [batch, M, N] tensors of
// the operands' dtype in the CALLER's orientation (a kernel that runs the
// problem swapped, C^T = B^T A^T, indexes them transposed, as it does C),
// each with a unit column stride and its own row and batch strides (batch
// stride 0: broadcast over the batch).  pre is written (acc + bias, rounded
// once); mul and residual are read.
struct Epilogue {
  Activation act = Activation::none;
  const void* mul = nullptr;  // C = act(pre) * mul (+ residual): the gated-MLP product
  int64_t mul_batch_stride = 0, mul_row_stride = 0;
  const void* residual = nullptr;
  int64_t res_batch_stride = 0, res_row_stride = 0;
  void* pre = nullptr;
  int64_t pre_batch_stride = 0, pre_row_stride = 0;
  TILED_HOST_DEVICE bool any() const { return act != Activation::none || mul != nullptr || residual != nullptr || pre != nullptr; }
};

struct GemmProblem {
  int64_t M = 0, N = 0, K = 0, batch = 1;
  DType dtype = DType::f32;
  Operand a;  // [batch, M, K]
  Operand b;  // [batch, K, N]
  const void* bias = nullptr;  // [N] or null
  void* c = nullptr;           // [batch, M, N], row-major
  int64_t c_batch_stride = 0;
  int64_t c_row_stride = 0;
  // float32 only: the user allowed TF32 tensor-core math (PyTorch's
  // allow_tf32 / float32_matmul_precision != "highest").
  bool allow_tf32 = false;
  // act / mul / residual / pre (see Epilogue); epi.any() false: plain GEMM.
  Epilogue epi;

  // fp32 operands computed in TF32 on tensor cores.
  bool tf32() const { return dtype == DType::f32 && allow_tf32; }
};

// Tiles of size b that cover a (host code: grid and tile counts).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Alignment of a pointer in bytes (the largest power of two dividing it, capped).
inline int pointer_alignment(const void* p, int cap = 16) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < cap && (v % (2 * a)) == 0) a *= 2;
  return a;
}

// True when a float operand can be read with 16-byte vectors along its
// contiguous dim: base pointer 16-byte aligned, leading dim (the non-unit
// stride) and batch stride multiples of 4 elements.  Tiles start at multiples
// of 4 in every dim, so every vector of every tile is then aligned.
inline bool operand_vec4_ok(const Operand& o, int64_t batch) {
  const int64_t ld = o.row_major() ? o.row_stride : o.col_stride;
  return pointer_alignment(o.ptr) >= 16 && ld % 4 == 0 && (batch == 1 || o.batch_stride % 4 == 0);
}

}  // namespace tiled
