// Registration on the stable ABI: the ops' schemas (defined once, here) and
// the CPU implementations.  The CUDA implementations are registered in
// cuda/gemm_cuda.cpp; autograd, autocast and the fake (meta) kernels in
// Python (torch_tiled_gemm/ops.py).
#include "cpu/gemm_cpu.h"
#include "cuda/settings.h"
#include "error_message.h"
#include "linear_ops.h"
#include "problem_builder.h"

namespace tiled {
namespace {

PreparedGemm run_cpu(const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias, const char* op_name,
                     const EpilogueArgs* epi) {
  const cuda::EnvSnapshot env;  // the TILED_* switches, read once for this call
  PreparedGemm g = prepare_gemm(a, b, bias, op_name, epi);
  if (!g.done) cpu::gemm(g.problem);
  return g;
}

Tensor gemm_ladder_cpu(Tensor a, Tensor b, int64_t step) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_ladder");
  TILED_CHECK(false, "tiled.gemm_ladder: the kernel ladder runs on CUDA tensors only, got ", a.device());
  return a;
}

std::vector<std::string> gemm_tuning_cpu(Tensor a, Tensor b) {
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_tuning");
  return {"cpu", "-"};
}

std::string gemm_kernel_name_cpu(Tensor a, Tensor b) {
  const cuda::EnvSnapshot env;
  check_gemm_args(a, b, std::nullopt, "tiled.gemm_kernel_name");
  return std::string("cpu_blocked_") + cpu::isa_name(to_dtype(a.scalar_type()));
}

// The gated backward's elementwise ops are CUDA only: the CPU backward uses
// torch's ops (torch_tiled_gemm/ops.py).
void refuse_cpu(const char* op, const Tensor& t) {
  TILED_CHECK(false, op, ": runs on CUDA tensors only (the CPU backward uses torch's ops), got ", t.device());
}

std::tuple<Tensor, Tensor> gated_act_backward_cpu(Tensor grad, Tensor gate, Tensor up, std::string act) {
  refuse_cpu("tiled.gated_act_backward", grad);
  return {grad, grad};
}

void gated_act_backward_inplace_cpu(Tensor grad, Tensor gate, Tensor up, std::string act) {
  refuse_cpu("tiled.gated_act_backward_", grad);
}

}  // namespace

STABLE_TORCH_LIBRARY(tiled, m) {
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
  // The gated MLP's elementwise backward in one pass (CUDA): (d_gate, d_up).
  m.def("gated_act_backward(Tensor grad, Tensor gate, Tensor up, str act) -> (Tensor, Tensor)");
  // The same, (d_gate, d_up) written over (gate, up).
  m.def("gated_act_backward_(Tensor grad, Tensor(a!) gate, Tensor(b!) up, str act) -> ()");
  m.def("gemm_kernel_name(Tensor a, Tensor b) -> str");
  // The dispatch class of a @ b, then the settings the tuner times for it
  // (torch_tiled_gemm/tune.py); the CPU has one kernel: ["cpu", "-"].
  m.def("gemm_tuning(Tensor a, Tensor b) -> str[]");
}

STABLE_TORCH_LIBRARY_IMPL(tiled, CPU, m) {
  m.impl("gemm", TORCH_BOX(&gemm_op<run_cpu>));
  m.impl("gemm_epilogue", TORCH_BOX(&gemm_epilogue_op<run_cpu>));
  m.impl("linear", TORCH_BOX(&linear_op<run_cpu>));
  m.impl("linear_act", TORCH_BOX(&linear_act_op<run_cpu>));
  m.impl("gated_linear", TORCH_BOX(&gated_linear_op<run_cpu>));
  m.impl("gemm_ladder", TORCH_BOX(&gemm_ladder_cpu));
  m.impl("gemm_kernel_name", TORCH_BOX(&gemm_kernel_name_cpu));
  m.impl("gemm_tuning", TORCH_BOX(&gemm_tuning_cpu));
  m.impl("gated_act_backward", TORCH_BOX(&gated_act_backward_cpu));
  m.impl("gated_act_backward_", TORCH_BOX(&gated_act_backward_inplace_cpu));
}

}  // namespace tiled

// The compiled library is importable as torch_tiled_gemm._C; importing it runs
// the registrations above.  No Python bindings: everything goes through
// torch.ops.tiled.  Python's limited API only (one abi3 binary for every
// Python from 3.10 on).
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
