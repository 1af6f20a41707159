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
void check_linear_args(const at::Tensor& x, const at::Tensor& weight) {
  TILED_CHECK(weight.dim() == 2, "tiled.linear: weight must be 2-D [out_features, in_features], got shape ",
              weight.sym_sizes());
  TILED_CHECK(x.dim() >= 1, "tiled.linear: input must be at least 1-D");
  // nn.Linear's words for an input of another dtype than the module's
  // (before the bias check, which would otherwise report the bias).
  TILED_CHECK(x.scalar_type() == weight.scalar_type(), "tiled.linear: mat1 and mat2 must have the same dtype, but got ",
              x.scalar_type(), " and ", weight.scalar_type());
  TILED_SYM_CHECK(x.sym_size(-1).sym_eq(weight.sym_size(1)),
                  "tiled.linear: mat1 and mat2 shapes cannot be multiplied (input ", x.sym_sizes(), " and weight^T ",
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
  m.def("gemm_kernel_name(Tensor a, Tensor b) -> str");
  // The dispatch class of a @ b, then the settings the tuner times for it
  // (torch_tiled_gemm/tune.py); the CPU has one kernel: ["cpu", "-"].
  m.def("gemm_tuning(Tensor a, Tensor b) -> str[]");
}

TORCH_LIBRARY_IMPL(tiled, CPU, m) {
  m.impl("gemm", &gemm_cpu);
  m.impl("gemm_ladder", &gemm_ladder_cpu);
  m.impl("gemm_kernel_name", &gemm_kernel_name_cpu);
  m.impl("gemm_tuning", &gemm_tuning_cpu);
}

// linear's backend kernel is the same for every device: reshape + gemm.
TORCH_LIBRARY_IMPL(tiled, CompositeExplicitAutograd, m) { m.impl("linear", &linear_impl); }

TORCH_LIBRARY_IMPL(tiled, Autograd, m) {
  m.impl("gemm", &gemm_autograd);
  m.impl("linear", &linear_autograd);
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
