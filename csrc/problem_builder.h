// Turns the op's tensors into a torch-free GemmProblem: argument checks with
// aten-style messages, layout normalisation (no copies unless an operand has
// no unit stride in its matrix dims), output allocation.  Shared by the CPU
// and CUDA implementations so both accept and reject exactly the same inputs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "gemm_problem.h"
#include "torch_stable.h"

namespace tiled {

// The epilogue's tensors and activation (gemm_problem.h's Epilogue): mul and
// residual of the output's shape and dtype; save_pre allocates `pre`, the
// pre-activation acc + bias, beside the output.
struct EpilogueArgs {
  Activation act = Activation::none;
  std::optional<Tensor> mul, residual;
  bool save_pre = false;
};

struct PreparedGemm {
  GemmProblem problem;
  Tensor out;
  Tensor pre;  // defined only with EpilogueArgs::save_pre
  // Keep-alive for operands that had to be copied (no unit stride).
  Tensor a_storage, b_storage, bias_storage, mul_storage, res_storage;
  // True when there is nothing for a kernel to do (empty output or K == 0);
  // `out` already holds the answer then.
  bool done = false;
};

// bias must be a 1-D [N] tensor of `like`'s dtype and device.
void check_bias(const std::optional<Tensor>& bias, int64_t N, const Tensor& like, const char* op_name);

// Checks a/b/bias ("a and b shapes cannot be multiplied (3x2 and 3x2)", ...)
// and returns the output shape; throws (RuntimeError in Python).
std::vector<int64_t> check_gemm_args(const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias,
                                     const char* op_name);

PreparedGemm prepare_gemm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias, const char* op_name,
                          const EpilogueArgs* epi = nullptr);

// "none", "relu", "gelu_erf", "gelu_tanh", "silu" -> Activation (throws on
// anything else, naming the choices).
Activation parse_activation(const std::string& name, const char* op_name);

DType to_dtype(ScalarType t);

// The linear ops' input as a matrix: [..., n] -> [rows, n], rows the product
// of the leading dims (spelled out: reshape(-1, n) cannot infer the -1 of a
// tensor with no elements).
Tensor as_matrix(const Tensor& t);

// x's shape with the last dim replaced by `out_features`.
std::vector<int64_t> linear_out_shape(const Tensor& x, int64_t out_features);

// The linear ops' argument checks (nn.Linear's words).
void check_linear_args(const Tensor& x, const Tensor& weight, const char* op);

}  // namespace tiled
