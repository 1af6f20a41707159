// Turns the op's tensors into a torch-free GemmProblem: argument checks with
// aten-style messages, layout normalisation (no copies unless an operand has
// no unit stride in its matrix dims), output allocation.  Shared by the CPU
// and CUDA implementations so both accept and reject exactly the same inputs.
#pragma once
#include <ATen/ATen.h>

#include <optional>

#include "gemm_problem.h"

namespace tiled {

// The epilogue's tensors and activation (gemm_problem.h's Epilogue): mul and
// residual of the output's shape and dtype; save_pre allocates `pre`, the
// pre-activation acc + bias, beside the output.
struct EpilogueArgs {
  Activation act = Activation::none;
  std::optional<at::Tensor> mul, residual;
  bool save_pre = false;
};

struct PreparedGemm {
  GemmProblem problem;
  at::Tensor out;
  at::Tensor pre;  // defined only with EpilogueArgs::save_pre
  // Keep-alive for operands that had to be copied (no unit stride).
  at::Tensor a_storage, b_storage, bias_storage, mul_storage, res_storage;
  // True when there is nothing for a kernel to do (empty output or K == 0);
  // `out` already holds the answer then.
  bool done = false;
};

// bias must be a 1-D [N] tensor of `like`'s dtype and device.
void check_bias(const std::optional<at::Tensor>& bias, const c10::SymInt& N, const at::Tensor& like,
                const char* op_name);

// Checks a/b/bias ("a and b shapes cannot be multiplied (3x2 and 3x2)", ...)
// and returns the output shape; throws c10::Error (RuntimeError in Python).
std::vector<int64_t> check_gemm_args(const at::Tensor& a, const at::Tensor& b,
                                     const std::optional<at::Tensor>& bias,
                                     const char* op_name);

PreparedGemm prepare_gemm(const at::Tensor& a, const at::Tensor& b,
                          const std::optional<at::Tensor>& bias, const char* op_name,
                          const EpilogueArgs* epi = nullptr);

// "none", "relu", "gelu_erf", "gelu_tanh", "silu" -> Activation (throws on
// anything else, naming the choices).
Activation parse_activation(c10::string_view name, const char* op_name);

// act(x) with torch's own ops (the reference, and the K == 0 case).
at::Tensor activation_torch(const at::Tensor& x, Activation act);

DType to_dtype(at::ScalarType t);

}  // namespace tiled
