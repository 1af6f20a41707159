// Registration: the op's schema (defined once, here), its autograd and
// autocast kernels, and the CPU implementation.  The CUDA implementation is
// registered in cuda/gemm_cuda.cpp.
#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "cpu/gemm_cpu.h"
#include "problem_builder.h"

namespace tiled {
namespace {

at::Tensor gemm_cpu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  PreparedGemm g = prepare_gemm(a, b, bias, "tiled.gemm");
  if (!g.done) cpu::gemm(g.problem);
  return g.out;
}

at::Tensor gemm_ladder_cpu(const at::Tensor& a, const at::Tensor& b, int64_t step) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_ladder");
  TORCH_CHECK(false, "tiled.gemm_ladder: the kernel ladder runs on CUDA tensors only, got ", a.device());
}

std::string gemm_kernel_name_cpu(const at::Tensor& a, const at::Tensor& b) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_kernel_name");
  return "cpu_blocked";
}

// ---------------------------------------------------------------------------
// Autograd: backward is the same op on transposed VIEWS (no copies):
//   grad_a = grad @ b^T,  grad_b = a^T @ grad,  grad_bias = sum(grad).
// The op is called through the dispatcher, so double backward records it
// again.

at::Tensor call_gemm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("tiled::gemm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&)>();
  return op.call(a, b, bias);
}

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
        auto a2 = a.reshape({-1, a.size(-1)});
        auto g2 = grad.reshape({-1, grad.size(-1)});
        grad_b = call_gemm(a2.transpose(0, 1), g2, std::nullopt);
      } else {
        grad_b = reduce_to(call_gemm(a.transpose(-1, -2), grad, std::nullopt), b.dim());
      }
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) {
      grad_bias = grad.dim() == 3 ? grad.sum({0, 1}) : grad.sum(0);
    }
    return {grad_a, grad_b, grad_bias};
  }
};

at::Tensor gemm_autograd(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  return GemmFunction::apply(a, b, bias);
}

// ---------------------------------------------------------------------------
// Autocast: like aten::mm, run in the autocast dtype (a "lower precision
// fp" op).

template <c10::DispatchKey Key, c10::DeviceType Dev>
at::Tensor gemm_autocast(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(Key);
  const auto dtype = at::autocast::get_autocast_dtype(Dev);
  auto cast = [&](const at::Tensor& t) {
    return at::autocast::is_eligible(t, Dev) && t.scalar_type() != at::kDouble ? t.to(dtype) : t;
  };
  std::optional<at::Tensor> bias_cast;
  if (bias.has_value()) bias_cast = cast(*bias);
  return call_gemm(cast(a), cast(b), bias_cast);
}

}  // namespace

TORCH_LIBRARY(tiled, m) {
  m.def("gemm(Tensor a, Tensor b, Tensor? bias=None) -> Tensor");
  m.def("gemm_ladder(Tensor a, Tensor b, int step) -> Tensor");
  m.def("gemm_kernel_name(Tensor a, Tensor b) -> str");
}

TORCH_LIBRARY_IMPL(tiled, CPU, m) {
  m.impl("gemm", &gemm_cpu);
  m.impl("gemm_ladder", &gemm_ladder_cpu);
  m.impl("gemm_kernel_name", &gemm_kernel_name_cpu);
}

TORCH_LIBRARY_IMPL(tiled, Autograd, m) { m.impl("gemm", &gemm_autograd); }

TORCH_LIBRARY_IMPL(tiled, Autocast, m) {
  m.impl("gemm", &gemm_autocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(tiled, AutocastCPU, m) {
  m.impl("gemm", &gemm_autocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
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
