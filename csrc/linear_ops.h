// The linear ops (linear, linear_act, gated_linear) on top of a backend's
// GEMM: views (the input as a matrix, the weight transposed), one or two
// GEMMs with their epilogues, the output reshaped.  Each backend (CPU in
// ops.cpp, CUDA in cuda/gemm_cuda.cpp) registers these with its own `Run`:
//   PreparedGemm Run(a, b, bias, op_name, epilogue)
// which checks, prepares and runs one GEMM.  Autograd for all of them is in
// Python (torch_tiled_gemm/ops.py).
#pragma once
#include <string>
#include <tuple>

#include "error_message.h"
#include "problem_builder.h"

namespace tiled {

using RunGemm = PreparedGemm (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, const char*,
                                 const EpilogueArgs*);

inline Tensor transposed(const Tensor& w) { return strided_view(w, {w.size(1), w.size(0)}, {w.stride(1), w.stride(0)}); }

// The [rows, out] result as x's shape with the last dim `out` (a fresh
// contiguous tensor: a view).
inline Tensor as_linear_out(const Tensor& out, const Tensor& x, int64_t out_features) {
  const std::vector<int64_t> shape = linear_out_shape(x, out_features);
  return strided_view(out, shape, contiguous_strides(shape));
}

inline std::optional<Tensor> opt_matrix(const std::optional<Tensor>& t) {
  if (!t.has_value()) return std::nullopt;
  return as_matrix(*t);
}

template <RunGemm Run>
Tensor gemm_op(Tensor a, Tensor b, std::optional<Tensor> bias) {
  return Run(a, b, bias, "tiled.gemm", nullptr).out;
}

template <RunGemm Run>
std::tuple<Tensor, Tensor> gemm_epilogue_op(Tensor a, Tensor b, std::optional<Tensor> bias, std::string act,
                                            std::optional<Tensor> mul, std::optional<Tensor> residual,
                                            bool save_pre) {
  EpilogueArgs e;
  e.act = parse_activation(act, "tiled.gemm_epilogue");
  e.mul = mul;
  e.residual = residual;
  e.save_pre = save_pre;
  PreparedGemm g = Run(a, b, bias, "tiled.gemm_epilogue", &e);
  return {g.out, save_pre ? g.pre : empty_like_dev({0}, a)};
}

template <RunGemm Run>
Tensor linear_op(Tensor x, Tensor weight, std::optional<Tensor> bias) {
  check_linear_args(x, weight, "tiled.linear");
  check_bias(bias, weight.size(0), x, "tiled.linear");
  const Tensor out = Run(as_matrix(x), transposed(weight), bias, "tiled.linear", nullptr).out;
  return as_linear_out(out, x, weight.size(0));
}

inline void check_residual(const std::optional<Tensor>& residual, const Tensor& x, const Tensor& weight,
                           const char* op) {
  if (!residual.has_value()) return;
  const std::vector<int64_t> shape = linear_out_shape(x, weight.size(0));
  const IntArrayRef got = residual->sizes();
  TILED_CHECK(std::vector<int64_t>(got.begin(), got.end()) == shape, op,
              ": residual must have the output's shape, got ", got);
}

// act(x @ weight^T + bias) + residual.
template <RunGemm Run>
Tensor linear_act_op(Tensor x, Tensor weight, std::optional<Tensor> bias, std::string act,
                     std::optional<Tensor> residual) {
  const char* op = "tiled.linear_act";
  check_linear_args(x, weight, op);
  check_bias(bias, weight.size(0), x, op);
  check_residual(residual, x, weight, op);
  EpilogueArgs e;
  e.act = parse_activation(act, op);
  e.residual = opt_matrix(residual);
  const Tensor out = Run(as_matrix(x), transposed(weight), bias, op, &e).out;
  return as_linear_out(out, x, weight.size(0));
}

inline void check_gated_args(const Tensor& x, const Tensor& w_gate, const Tensor& w_up,
                             const std::optional<Tensor>& b_gate, const std::optional<Tensor>& b_up) {
  const char* op = "tiled.gated_linear";
  check_linear_args(x, w_gate, op);
  check_linear_args(x, w_up, op);
  TILED_CHECK(w_gate.size(0) == w_up.size(0), op, ": w_gate and w_up must have the same number of rows, got ",
              w_gate.sizes(), " and ", w_up.sizes());
  check_bias(b_gate, w_gate.size(0), x, op);
  check_bias(b_up, w_up.size(0), x, op);
}

// act(x @ w_gate^T + b_gate) * (x @ w_up^T + b_up) as two GEMMs: the first
// applies act in its epilogue, the second multiplies by the first's output
// in its own (so `up` is never written).
template <RunGemm Run>
Tensor gated_linear_op(Tensor x, Tensor w_gate, Tensor w_up, std::string act, std::optional<Tensor> b_gate,
                       std::optional<Tensor> b_up) {
  const char* op = "tiled.gated_linear";
  check_gated_args(x, w_gate, w_up, b_gate, b_up);
  const Tensor x2 = as_matrix(x);
  EpilogueArgs gate;
  gate.act = parse_activation(act, op);
  const Tensor h = Run(x2, transposed(w_gate), b_gate, op, &gate).out;
  EpilogueArgs up;
  up.mul = h;
  const Tensor out = Run(x2, transposed(w_up), b_up, op, &up).out;
  return as_linear_out(out, x, w_gate.size(0));
}

}  // namespace tiled
