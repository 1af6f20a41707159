// Registration: the op's schema (defined once, here), its autograd and
// autocast kernels, and the CPU implementation.  The CUDA implementation is
// registered in cuda/gemm_cuda.cpp.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "cpu/gemm_cpu.h"
#include "cuda/settings.h"
#include "error_message.h"
#include "problem_builder.h"

namespace tiled {
namespace {

at::Tensor gemm_cpu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  const cuda::EnvSnapshot env;  // the TILED_* switches, read once for this call
  PreparedGemm g = prepare_gemm(a, b, bias, "tiled.gemm");
  if (!g.done) cpu::gemm(g.problem);
  return g.out;
}

std::tuple<at::Tensor, at::Tensor> gemm_epilogue_cpu(const at::Tensor& a, const at::Tensor& b,
                                                     const std::optional<at::Tensor>& bias, c10::string_view act,
                                                     const std::optional<at::Tensor>& mul,
                                                     const std::optional<at::Tensor>& residual, bool save_pre) {
  const cuda::EnvSnapshot env;
  EpilogueArgs e;
  e.act = parse_activation(act, "tiled.gemm_epilogue");
  e.mul = mul;
  e.residual = residual;
  e.save_pre = save_pre;
  PreparedGemm g = prepare_gemm(a, b, bias, "tiled.gemm_epilogue", &e);
  if (!g.done) cpu::gemm(g.problem);
  return {g.out, save_pre ? g.pre : at::empty({0}, a.options())};
}

at::Tensor gemm_ladder_cpu(const at::Tensor& a, const at::Tensor& b, int64_t step) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_ladder");
  TILED_CHECK(false, "tiled.gemm_ladder: the kernel ladder runs on CUDA tensors only, got ", a.device());
}

std::vector<std::string> gemm_tuning_cpu(const at::Tensor& a, const at::Tensor& b) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_tuning");
  return {"cpu", "-"};
}

std::string gemm_kernel_name_cpu(const at::Tensor& a, const at::Tensor& b) {
  const cuda::EnvSnapshot env;
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_kernel_name");
  return std::string("cpu_blocked_") + cpu::isa_name(to_dtype(a.scalar_type()));
}

// ---------------------------------------------------------------------------
// Autograd: backward is the same op on transposed VIEWS (no copies):
//   grad_a = grad @ b^T,  grad_b = a^T @ grad,  grad_bias = sum(grad).
// The op is called through the dispatcher, so double backward records it
// again.

// gemm and linear share a signature: (tensor, tensor, optional bias).
using GemmLikeSig = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&);
using GemmLike = GemmLikeSig*;

c10::TypedOperatorHandle<GemmLikeSig> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<GemmLikeSig>();
}

at::Tensor call_gemm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  static const auto op = op_handle("tiled::gemm");
  return op.call(a, b, bias);
}

at::Tensor call_linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  static const auto op = op_handle("tiled::linear");
  return op.call(x, weight, bias);
}

at::Tensor as_matrix(const at::Tensor& t);

// Sums a batched gradient down to the (broadcast) 2-D operand's shape.
at::Tensor reduce_to(const at::Tensor& g, int64_t dim) { return dim == 2 && g.dim() == 3 ? g.sum(0) : g; }

class GemmFunction : public torch::autograd::Function<GemmFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            const std::optional<at::Tensor>& bias) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["has_bias"] = bias.has_value();
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_gemm(a, b, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& a = saved[0];
    const at::Tensor& b = saved[1];
    const at::Tensor& grad = grads[0];
    at::Tensor grad_a, grad_b, grad_bias;
    if (!grad.defined()) return {grad_a, grad_b, grad_bias};
    if (ctx->needs_input_grad(0)) {
      // [.., M, N] x [.., N, K]
      grad_a = reduce_to(call_gemm(grad, b.transpose(-1, -2), std::nullopt), a.dim());
    }
    if (ctx->needs_input_grad(1)) {
      if (b.dim() == 2 && a.dim() == 3 && grad.dim() == 3) {
        // Shared weight: one GEMM over all batches, [K, B*M] x [B*M, N],
        // when A and grad flatten to matrices without a copy.
        auto a2 = as_matrix(a);
        auto g2 = as_matrix(grad);
        grad_b = call_gemm(a2.transpose(0, 1), g2, std::nullopt);
      } else {
        grad_b = reduce_to(call_gemm(a.transpose(-1, -2), grad, std::nullopt), b.dim());
      }
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) {
      grad_bias = grad.dim() == 3 ? grad.sum(at::IntArrayRef{0, 1}) : grad.sum(0);
    }
    return {grad_a, grad_b, grad_bias};
  }
};

at::Tensor gemm_autograd(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  return GemmFunction::apply(a, b, bias);
}

// ---------------------------------------------------------------------------
// linear(x, weight, bias) = x @ weight^T + bias over x's last dim.  Its own
// autograd node so the weight gradient comes out in the weight's own layout:
// grad_weight = grad^T @ x is a row-major [out, in] GEMM on transposed views,
// where gemm's generic formula would give a transposed [in, out] result that
// AccumulateGrad then copies.

// SymInt-only: the Autograd kernel runs these checks on symbolic sizes under
// torch.compile, and reading a plain int size would specialise every dim.
void check_linear_args(const at::Tensor& x, const at::Tensor& weight, const char* op = "tiled.linear") {
  TILED_CHECK(weight.dim() == 2, op, ": weight must be 2-D [out_features, in_features], got shape ",
              weight.sym_sizes());
  TILED_CHECK(x.dim() >= 1, op, ": input must be at least 1-D");
  // nn.Linear's words for an input of another dtype than the module's
  // (before the bias check, which would otherwise report the bias).
  TILED_CHECK(x.scalar_type() == weight.scalar_type(), op, ": mat1 and mat2 must have the same dtype, but got ",
              x.scalar_type(), " and ", weight.scalar_type());
  TILED_SYM_CHECK(x.sym_size(-1).sym_eq(weight.sym_size(1)),
                  op, ": mat1 and mat2 shapes cannot be multiplied (input ", x.sym_sizes(), " and weight^T ",
                  weight.sym_size(1), "x", weight.sym_size(0), ")");
}

// Shapes go through the SymInt APIs: under torch.compile these functions
// run on symbolic sizes, and reading a plain int would specialise them.
std::vector<c10::SymInt> linear_out_shape(const at::Tensor& x, const at::Tensor& weight) {
  auto shape = x.sym_sizes().vec();
  shape.back() = weight.sym_size(0);
  return shape;
}

// [..., n] -> [rows, n] with rows the product of the leading dims, spelled
// out: reshape(-1, n) cannot infer the -1 of a tensor with no elements
// (n == 0, or any leading dim 0).
at::Tensor as_matrix(const at::Tensor& t) {
  c10::SymInt rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows = rows * t.sym_size(d);
  return t.reshape_symint({rows, t.sym_size(-1)});
}

at::Tensor linear_impl(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_linear_args(x, weight);
  return call_gemm(as_matrix(x), weight.t(), bias).reshape_symint(linear_out_shape(x, weight));
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_linear(x, weight, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    at::Tensor grad_x, grad_w, grad_b;
    if (!grads[0].defined()) return {grad_x, grad_w, grad_b};
    const at::Tensor g = as_matrix(grads[0]);  // [tokens, out]
    if (ctx->needs_input_grad(0)) grad_x = call_gemm(g, weight, std::nullopt).reshape_symint(x.sym_sizes());
    if (ctx->needs_input_grad(1)) grad_w = call_gemm(g.t(), as_matrix(x), std::nullopt);  // [out, in]
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) grad_b = g.sum(0);
    return {grad_x, grad_w, grad_b};
  }

};

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  // Reject bad arguments before any autograd state exists.
  check_linear_args(x, weight);
  check_bias(bias, weight.sym_size(0), x, "tiled.linear");
  return LinearFunction::apply(x, weight, bias);
}

// ---------------------------------------------------------------------------
// Fused epilogues (docs/fused.md).  gemm_epilogue is the backend op (CPU and
// CUDA kernels, no autograd of its own); linear_act and gated_linear are
// built on it, with their own autograd nodes.

using GemmEpilogueSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                           const std::optional<at::Tensor>&, c10::string_view,
                                                           const std::optional<at::Tensor>&,
                                                           const std::optional<at::Tensor>&, bool);

std::tuple<at::Tensor, at::Tensor> call_gemm_epilogue(const at::Tensor& a, const at::Tensor& b,
                                                      const std::optional<at::Tensor>& bias, c10::string_view act,
                                                      const std::optional<at::Tensor>& mul,
                                                      const std::optional<at::Tensor>& residual, bool save_pre) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tiled::gemm_epilogue", "").typed<GemmEpilogueSig>();
  return op.call(a, b, bias, act, mul, residual, save_pre);
}

// d act(z) / dz * g, with torch's own backward ops (differentiable, so a
// double backward works).
at::Tensor activation_backward(const at::Tensor& g, const at::Tensor& z, Activation act) {
  switch (act) {
    case Activation::relu: return at::threshold_backward(g, z, 0);
    case Activation::gelu_erf: return at::gelu_backward(g, z);
    case Activation::gelu_tanh: return at::gelu_backward(g, z, "tanh");
    case Activation::silu: return at::silu_backward(g, z);
    default: return g;
  }
}

std::optional<at::Tensor> opt_matrix(const std::optional<at::Tensor>& t) {
  if (!t.has_value()) return std::nullopt;
  return as_matrix(*t);
}

void check_residual(const std::optional<at::Tensor>& residual, const at::Tensor& x, const at::Tensor& weight,
                    const char* op) {
  if (!residual.has_value()) return;
  const auto shape = linear_out_shape(x, weight);
  bool same = residual->dim() == static_cast<int64_t>(shape.size());
  for (size_t d = 0; same && d < shape.size(); ++d) same = residual->sym_size(d).sym_eq(shape[d]).guard_bool(__FILE__, __LINE__);
  TILED_CHECK(same, op, ": residual must have the output's shape, got ", residual->sym_sizes());
}

// linear_act(x, weight, bias, act, residual) = act(x @ weight^T + bias) + residual.
at::Tensor linear_act_impl(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::string_view act, const std::optional<at::Tensor>& residual) {
  check_linear_args(x, weight, "tiled.linear_act");
  check_residual(residual, x, weight, "tiled.linear_act");
  auto out = std::get<0>(call_gemm_epilogue(as_matrix(x), weight.t(), bias, act, std::nullopt, opt_matrix(residual),
                                            false));
  return out.reshape_symint(linear_out_shape(x, weight));
}

bool any_requires_grad(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

// Backward keeps the pre-activation z = x W^T + b that the forward's
// epilogue stored beside the output (one tensor of the output's size, what
// torch's own Linear + activation saves too), instead of recomputing it
// with a second GEMM.
class LinearActFunction : public torch::autograd::Function<LinearActFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, c10::string_view act,
                            const std::optional<at::Tensor>& residual) {
    const Activation a = parse_activation(act, "tiled.linear_act");
    const at::Tensor none;
    const bool need_pre = a != Activation::none &&
                          any_requires_grad({&x, &weight, bias.has_value() ? &*bias : &none});
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, pre] =
        call_gemm_epilogue(as_matrix(x), weight.t(), bias, act, std::nullopt, opt_matrix(residual), need_pre);
    ctx->save_for_backward({x, weight, need_pre ? pre : at::Tensor()});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["has_residual"] = residual.has_value();
    ctx->saved_data["act"] = static_cast<int64_t>(a);
    return out.reshape_symint(linear_out_shape(x, weight));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& pre = saved[2];
    const auto act = static_cast<Activation>(ctx->saved_data["act"].toInt());
    at::Tensor grad_x, grad_w, grad_b, grad_r;
    if (!grads[0].defined()) return {grad_x, grad_w, grad_b, at::Tensor(), grad_r};
    // needs_input_grad counts tensor arguments only (an absent optional is none).
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    if (ctx->saved_data["has_residual"].toBool() && ctx->needs_input_grad(has_bias ? 3 : 2)) grad_r = grads[0];
    const at::Tensor g = as_matrix(grads[0]);
    const at::Tensor dz = act == Activation::none || !pre.defined() ? g : activation_backward(g, pre, act);
    if (ctx->needs_input_grad(0)) grad_x = call_gemm(dz, weight, std::nullopt).reshape_symint(x.sym_sizes());
    if (ctx->needs_input_grad(1)) grad_w = call_gemm(dz.t(), as_matrix(x), std::nullopt);
    if (has_bias && ctx->needs_input_grad(2)) grad_b = dz.sum(0);
    return {grad_x, grad_w, grad_b, at::Tensor(), grad_r};
  }
};

at::Tensor linear_act_autograd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               c10::string_view act, const std::optional<at::Tensor>& residual) {
  check_linear_args(x, weight, "tiled.linear_act");
  check_bias(bias, weight.sym_size(0), x, "tiled.linear_act");
  check_residual(residual, x, weight, "tiled.linear_act");
  parse_activation(act, "tiled.linear_act");
  return LinearActFunction::apply(x, weight, bias, act, residual);
}

void check_gated_args(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                      const std::optional<at::Tensor>& b_gate, const std::optional<at::Tensor>& b_up) {
  check_linear_args(x, w_gate, "tiled.gated_linear");
  check_linear_args(x, w_up, "tiled.gated_linear");
  TILED_SYM_CHECK(w_gate.sym_size(0).sym_eq(w_up.sym_size(0)),
                  "tiled.gated_linear: w_gate and w_up must have the same number of rows, got ", w_gate.sym_sizes(),
                  " and ", w_up.sym_sizes());
  check_bias(b_gate, w_gate.sym_size(0), x, "tiled.gated_linear");
  check_bias(b_up, w_up.sym_size(0), x, "tiled.gated_linear");
}

// gated_linear(x, w_gate, w_up, act, b_gate, b_up)
//   = act(x @ w_gate^T + b_gate) * (x @ w_up^T + b_up)
// as two GEMMs: the first applies act in its epilogue, the second multiplies
// by the first's output in its own epilogue (so `up` is never written
// unless the backward needs it).
at::Tensor gated_linear_impl(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                             c10::string_view act, const std::optional<at::Tensor>& b_gate,
                             const std::optional<at::Tensor>& b_up) {
  check_gated_args(x, w_gate, w_up, b_gate, b_up);
  const at::Tensor x2 = as_matrix(x);
  const at::Tensor h = std::get<0>(call_gemm_epilogue(x2, w_gate.t(), b_gate, act, std::nullopt, std::nullopt, false));
  const at::Tensor out = std::get<0>(call_gemm_epilogue(x2, w_up.t(), b_up, "none", h, std::nullopt, false));
  return out.reshape_symint(linear_out_shape(x, w_gate));
}

// Saves the gate's pre-activation and `up` (two [tokens, hidden] tensors;
// torch's unfused chain saves three: gate, act(gate), up); act(gate) is
// recomputed elementwise in the backward.
class GatedLinearFunction : public torch::autograd::Function<GatedLinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w_gate,
                            const at::Tensor& w_up, c10::string_view act, const std::optional<at::Tensor>& b_gate,
                            const std::optional<at::Tensor>& b_up) {
    const Activation a = parse_activation(act, "tiled.gated_linear");
    const at::Tensor none;
    const bool need = any_requires_grad({&x, &w_gate, &w_up, b_gate.has_value() ? &*b_gate : &none,
                                         b_up.has_value() ? &*b_up : &none});
    at::AutoDispatchBelowADInplaceOrView guard;
    const at::Tensor x2 = as_matrix(x);
    auto [h, zg] = call_gemm_epilogue(x2, w_gate.t(), b_gate, act, std::nullopt, std::nullopt, need);
    auto [out, up] = call_gemm_epilogue(x2, w_up.t(), b_up, "none", h, std::nullopt, need);
    ctx->save_for_backward({x, w_gate, w_up, need ? zg : at::Tensor(), need ? up : at::Tensor()});
    ctx->saved_data["has_b_gate"] = b_gate.has_value();
    ctx->saved_data["has_b_up"] = b_up.has_value();
    ctx->saved_data["act"] = static_cast<int64_t>(a);
    return out.reshape_symint(linear_out_shape(x, w_gate));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w_gate = saved[1];
    const at::Tensor& w_up = saved[2];
    const at::Tensor& zg = saved[3];
    const at::Tensor& up = saved[4];
    const auto act = static_cast<Activation>(ctx->saved_data["act"].toInt());
    at::Tensor grad_x, grad_wg, grad_wu, grad_bg, grad_bu;
    if (!grads[0].defined()) return {grad_x, grad_wg, grad_wu, at::Tensor(), grad_bg, grad_bu};
    const at::Tensor g = as_matrix(grads[0]);  // [tokens, hidden]
    const at::Tensor h = activation_torch(zg, act);
    const at::Tensor d_up = g * h;
    const at::Tensor d_gate = activation_backward(g * up, zg, act);
    const at::Tensor x2 = as_matrix(x);
    if (ctx->needs_input_grad(0)) {
      // dx = d_gate W_gate + d_up W_up: the second GEMM adds the first's
      // result in its epilogue (residual).
      const at::Tensor part = call_gemm(d_gate, w_gate, std::nullopt);
      grad_x = std::get<0>(call_gemm_epilogue(d_up, w_up, std::nullopt, "none", std::nullopt, part, false))
                   .reshape_symint(x.sym_sizes());
    }
    if (ctx->needs_input_grad(1)) grad_wg = call_gemm(d_gate.t(), x2, std::nullopt);
    if (ctx->needs_input_grad(2)) grad_wu = call_gemm(d_up.t(), x2, std::nullopt);
    // needs_input_grad counts tensor arguments only (an absent optional is none).
    const bool has_bg = ctx->saved_data["has_b_gate"].toBool();
    if (has_bg && ctx->needs_input_grad(3)) grad_bg = d_gate.sum(0);
    if (ctx->saved_data["has_b_up"].toBool() && ctx->needs_input_grad(has_bg ? 4 : 3)) grad_bu = d_up.sum(0);
    return {grad_x, grad_wg, grad_wu, at::Tensor(), grad_bg, grad_bu};
  }
};

at::Tensor gated_linear_autograd(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                                 c10::string_view act, const std::optional<at::Tensor>& b_gate,
                                 const std::optional<at::Tensor>& b_up) {
  check_gated_args(x, w_gate, w_up, b_gate, b_up);
  parse_activation(act, "tiled.gated_linear");
  return GatedLinearFunction::apply(x, w_gate, w_up, act, b_gate, b_up);
}

// ---------------------------------------------------------------------------
// Autocast: like aten::mm, run in the autocast dtype (a "lower precision
// fp" op).

template <c10::DispatchKey Key, c10::DeviceType Dev, GemmLike Op>
at::Tensor autocast_lower(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(Key);
  const auto dtype = at::autocast::get_autocast_dtype(Dev);
  auto cast = [&](const at::Tensor& t) {
    return at::autocast::is_eligible(t, Dev) && t.scalar_type() != at::kDouble ? t.to(dtype) : t;
  };
  std::optional<at::Tensor> bias_cast;
  if (bias.has_value()) bias_cast = cast(*bias);
  return Op(cast(a), cast(b), bias_cast);
}

}  // namespace

TORCH_LIBRARY(tiled, m) {
  m.def("gemm(Tensor a, Tensor b, Tensor? bias=None) -> Tensor");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor");
  m.def("gemm_ladder(Tensor a, Tensor b, int step) -> Tensor");
  m.def(
      "gemm_epilogue(Tensor a, Tensor b, Tensor? bias=None, str act=\"none\", Tensor? mul=None, "
      "Tensor? residual=None, bool save_pre=False) -> (Tensor, Tensor)");
  m.def("linear_act(Tensor x, Tensor weight, Tensor? bias=None, str act=\"none\", Tensor? residual=None) -> Tensor");
  m.def(
      "gated_linear(Tensor x, Tensor w_gate, Tensor w_up, str act=\"silu\", Tensor? b_gate=None, "
      "Tensor? b_up=None) -> Tensor");
  m.def("gemm_kernel_name(Tensor a, Tensor b) -> str");
  // The dispatch class of a @ b, then the settings the tuner times for it
  // (torch_tiled_gemm/tune.py); the CPU has one kernel: ["cpu", "-"].
  m.def("gemm_tuning(Tensor a, Tensor b) -> str[]");
}

TORCH_LIBRARY_IMPL(tiled, CPU, m) {
  m.impl("gemm", &gemm_cpu);
  m.impl("gemm_ladder", &gemm_ladder_cpu);
  m.impl("gemm_epilogue", &gemm_epilogue_cpu);
  m.impl("gemm_kernel_name", &gemm_kernel_name_cpu);
  m.impl("gemm_tuning", &gemm_tuning_cpu);
}

// linear's backend kernel is the same for every device: reshape + gemm.
TORCH_LIBRARY_IMPL(tiled, CompositeExplicitAutograd, m) {
  m.impl("linear", &linear_impl);
  m.impl("linear_act", &linear_act_impl);
  m.impl("gated_linear", &gated_linear_impl);
}

TORCH_LIBRARY_IMPL(tiled, Autograd, m) {
  m.impl("gemm", &gemm_autograd);
  m.impl("linear", &linear_autograd);
  m.impl("linear_act", &linear_act_autograd);
  m.impl("gated_linear", &gated_linear_autograd);
}

TORCH_LIBRARY_IMPL(tiled, Autocast, m) {
  m.impl("gemm", &autocast_lower<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA, call_gemm>);
  m.impl("linear", &autocast_lower<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA, call_linear>);
}

TORCH_LIBRARY_IMPL(tiled, AutocastCPU, m) {
  m.impl("gemm", &autocast_lower<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU, call_gemm>);
  m.impl("linear", &autocast_lower<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU, call_linear>);
}

}  // namespace tiled

// The compiled library is importable as torch_tiled_gemm._C; importing it runs
// the registrations above.  No Python bindings: everything goes through
// torch.ops.tiled.
#include <Python.h>
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
