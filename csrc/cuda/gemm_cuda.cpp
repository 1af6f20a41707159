// CUDA implementation of the tiled ops on the stable ABI: checks, device
// guard, current stream, then the torch-free dispatch layer.
//
// The library needs nothing of torch's CUDA libraries at load time (the CUDA
// runtime is linked statically, setup.py), so the same binary also loads into
// a CPU-only torch, where these kernels are registered but never reached.
// The one CUDA shim used, the current stream, is looked up in libtorch_cuda
// when the first CUDA call needs it.
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../error_message.h"
#include "../linear_ops.h"
#include "../problem_builder.h"
#include "autotune.h"
#include "dispatch.h"
#include "settings.h"

namespace tiled {
namespace {

void cuda_check(cudaError_t e) {
  TILED_CHECK(e == cudaSuccess, "CUDA error: ", cudaGetErrorString(e));
}

const cuda::DeviceInfo& device_info(int device) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<cuda::DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= device) cache.resize(device + 1);
  if (!cache[device]) {
    cudaDeviceProp prop_storage;
    cuda_check(cudaGetDeviceProperties(&prop_storage, device));
    const cudaDeviceProp* prop = &prop_storage;
    auto info = std::make_unique<cuda::DeviceInfo>();
    info->sm_major = prop->major;
    info->sm_minor = prop->minor;
    info->num_sms = prop->multiProcessorCount;
    info->max_smem_per_block_optin = prop->sharedMemPerBlockOptin;
    info->l2_bytes = prop->l2CacheSize;
    int mem_khz = 0, bus_bits = 0;  // double data rate: two transfers per clock
    if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
      info->dram_bytes_per_s = 2.0 * 1000.0 * mem_khz * (bus_bits / 8.0);
    else
      (void)cudaGetLastError();
    std::snprintf(info->name, sizeof(info->name), "%s", prop->name);
    // A GPU this build has no device code for: say so here, at its first
    // call (not cached: every later call says it again), rather than let a
    // launch fail with "no kernel image is available".
    const std::string mismatch = cuda::build_mismatch(*info);
    TILED_CHECK(mismatch.empty(), "tiled: ", mismatch);
    cache[device] = std::move(info);
  }
  return *cache[device];
}


// The current stream of `device` (torch's own: CUDA graphs, user streams),
// from the C shim aoti_torch_get_current_cuda_stream in libtorch_cuda, which
// a CUDA torch has loaded by the time a CUDA tensor exists.
cudaStream_t current_stream(int device) {
  using Fn = AOTITorchError (*)(int32_t, void**);
  static const Fn fn = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_NOLOAD | RTLD_LAZY);
    return lib ? reinterpret_cast<Fn>(dlsym(lib, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  TILED_CHECK(fn != nullptr, "tiled: this torch has no CUDA support loaded (libtorch_cuda)");
  void* stream = nullptr;
  TILED_CHECK(fn(device, &stream) == AOTI_TORCH_SUCCESS, "tiled: no current CUDA stream for device ", device);
  return static_cast<cudaStream_t>(stream);
}

// Whether torch allows TF32 for float32 matmuls now (allow_tf32, or
// float32_matmul_precision "high" / "medium").  The stable ABI has no call
// for it, so it is asked of torch's Python API: the function behind
// `torch.backends.cuda.matmul.allow_tf32` (torch._C._get_cublas_allow_tf32,
// a builtin: ~0.1 us where the attribute's Python __getattr__ costs ~1 us),
// once per float32 call.  Without a Python interpreter (a C++-only program)
// the answer is no: strict float32, torch's default.
bool allow_tf32() {
  if (!Py_IsInitialized()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  static PyObject* getter = [] {
    PyObject* m = PyImport_ImportModule("torch._C");
    PyObject* f = m ? PyObject_GetAttrString(m, "_get_cublas_allow_tf32") : nullptr;
    Py_XDECREF(m);
    if (PyErr_Occurred()) PyErr_Clear();
    return f;  // kept for the life of the process
  }();
  bool allowed = false;
  if (getter != nullptr) {
    PyObject* v = PyObject_CallNoArgs(getter);
    allowed = v != nullptr && PyObject_IsTrue(v) == 1;
    Py_XDECREF(v);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return allowed;
}

// Copies with aligned leading dimensions, as dispatch's staging plan asks
// (see StagingPlan in dispatch.h), of the operand `o` ([batch, rows, cols],
// batch 1 when it is broadcast).  The copies only have to live until the
// kernel is enqueued: the caching allocator keeps them valid for the stream.
Tensor stage_one(const Tensor& like, const Operand& o, int64_t batch, int64_t rows, int64_t cols,
                 const cuda::StagedOperand& s, const cuda::DeviceInfo& dev, cudaStream_t stream) {
  const int64_t nb = o.batch_stride != 0 ? batch : 1;
  Tensor dst = empty_like_dev({nb, s.row_major ? rows : cols, s.ld}, like);
  cuda::StageCopy c;
  c.src = o.ptr;
  c.src_batch_stride = o.batch_stride, c.src_row_stride = o.row_stride, c.src_col_stride = o.col_stride;
  c.dst = dst.data_ptr();
  // The copy's [nb, rows, cols] view of dst: row-major rows of length ld, or
  // their transpose.
  const int64_t plane = (s.row_major ? rows : cols) * s.ld;
  c.dst_batch_stride = plane;
  c.dst_row_stride = s.row_major ? s.ld : 1;
  c.dst_col_stride = s.row_major ? 1 : s.ld;
  c.batch = nb, c.rows = rows, c.cols = cols;
  c.elem_bytes = static_cast<int>(like.element_size());
  const char* err = cuda::stage_copy(c, dev.num_sms, stream);
  TILED_CHECK(err == nullptr, "tiled.gemm: ", err);
  cuda_check(cudaGetLastError());
  return dst;
}

void stage_operands(PreparedGemm& g, const Tensor& like, const cuda::DeviceInfo& dev, cudaStream_t stream) {
  GemmProblem& p = g.problem;
  const cuda::StagingPlan plan = cuda::staging_plan(p, dev);
  if (plan.a.on) {
    g.a_storage = stage_one(like, p.a, p.batch, p.M, p.K, plan.a, dev, stream);
    p.a = cuda::staged_operand(plan.a, p.M, p.K, p.a.batch_stride != 0, g.a_storage.data_ptr());
  }
  if (plan.b.on) {
    g.b_storage = stage_one(like, p.b, p.batch, p.K, p.N, plan.b, dev, stream);
    p.b = cuda::staged_operand(plan.b, p.K, p.N, p.b.batch_stride != 0, g.b_storage.data_ptr());
  }
}

PreparedGemm run_gemm(const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias, const char* op_name,
                      const EpilogueArgs* epi) {
  const cuda::EnvSnapshot env;  // the TILED_* switches, read once for this call
  const int device = a.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  PreparedGemm g = prepare_gemm(a, b, bias, op_name, epi);
  if (g.done) return g;
  g.problem.allow_tf32 = g.problem.dtype == DType::f32 && allow_tf32();
  const cuda::DeviceInfo& dev = device_info(device);
  const cudaStream_t stream = current_stream(device);
  stage_operands(g, a, dev, stream);
  // Scratch a kernel may need (split-K partials), from the caching
  // allocator: stream-ordered, and captured into graphs like any tensor.
  const size_t ws_bytes = cuda::gemm_workspace_bytes(g.problem, dev);
  Tensor ws;
  if (ws_bytes > 0) ws = empty_like_dev({static_cast<int64_t>(ws_bytes)}, a, /*bytes=*/true);
  const char* err = cuda::gemm(g.problem, dev, stream, ws_bytes > 0 ? ws.data_ptr() : nullptr);
  TILED_CHECK(err == nullptr, op_name, ": ", err);
  cuda_check(cudaGetLastError());
  return g;
}

Tensor gemm_ladder_cuda(Tensor a, Tensor b, int64_t step) {
  const cuda::EnvSnapshot env;
  const int device = a.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  PreparedGemm g = prepare_gemm(a, b, std::nullopt, "tiled.gemm_ladder");
  TILED_CHECK(cuda::ladder_step_name(static_cast<int>(step)) != nullptr, "tiled.gemm_ladder: no ladder step ",
              step);
  if (g.done) return g.out;
  const char* err =
      cuda::ladder_gemm(g.problem, static_cast<int>(step), device_info(device), current_stream(device));
  TILED_CHECK(err == nullptr, "tiled.gemm_ladder(step=", step, "): ", err);
  cuda_check(cudaGetLastError());
  return g.out;
}

// The problem cuda::gemm would be called with for a @ b (staged operands
// described, not copied: a dummy aligned pointer), and the staging plan; for
// naming and tuning.  `done`: the output needs no kernel (empty).
struct NamedProblem {
  bool done = false;
  GemmProblem p;
  cuda::StagingPlan plan;
};
NamedProblem named_problem(const Tensor& a, const Tensor& b, const char* op) {
  PreparedGemm g = prepare_gemm(a, b, std::nullopt, op);
  NamedProblem n;
  n.done = g.done;
  if (g.done) return n;
  g.problem.allow_tf32 = g.problem.dtype == DType::f32 && allow_tf32();
  const cuda::DeviceInfo& dev = device_info(a.get_device_index());
  n.plan = cuda::staging_plan(g.problem, dev);
  const void* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  n.p = g.problem;
  GemmProblem& p = n.p;
  if (n.plan.a.on) p.a = cuda::staged_operand(n.plan.a, p.M, p.K, p.a.batch_stride != 0, aligned);
  if (n.plan.b.on) p.b = cuda::staged_operand(n.plan.b, p.K, p.N, p.b.batch_stride != 0, aligned);
  return n;
}

std::string gemm_kernel_name_cuda(Tensor a, Tensor b) {
  const cuda::EnvSnapshot env;
  torch::stable::accelerator::DeviceGuard guard(a.get_device_index());
  const NamedProblem n = named_problem(a, b, "tiled.gemm_kernel_name");
  if (n.done) return "none";
  std::string name = cuda::gemm_kernel_name(n.p, device_info(a.get_device_index()));
  if (n.plan.any())
    name = std::string(n.plan.a.on && n.plan.b.on ? "staged_ab+" : n.plan.a.on ? "staged_a+" : "staged_b+") + name;
  return name;
}

// For the offline tuner (torch_tiled_gemm/tune.py): the problem's class in
// the autotuning cache and the dispatch table, then the settings worth
// timing for it ("-": the rules' own choice), as the table's lines spell them.
std::vector<std::string> gemm_tuning_cuda(Tensor a, Tensor b) {
  const cuda::EnvSnapshot env;
  torch::stable::accelerator::DeviceGuard guard(a.get_device_index());
  const NamedProblem n = named_problem(a, b, "tiled.gemm_tuning");
  if (n.done) return {"none"};
  const cuda::DeviceInfo& dev = device_info(a.get_device_index());
  std::vector<std::string> out{cuda::autotune::class_key(n.p, dev)};
  // Those that run as named on this GPU, one per kernel (the run-time
  // autotuner's list).
  for (const cuda::Settings& s : cuda::autotune::candidates(n.p, dev)) out.push_back(cuda::format_settings(s));
  return out;
}

// The gated MLP's elementwise backward (torch_tiled_gemm/ops.py's
// _GatedLinearFn): d_gate = grad * up * act'(gate), d_up = grad * act(gate),
// written to d_gate / d_up, which may be gate / up themselves (each element
// is read before it is written, by the same thread).
void gated_backward_into(const Tensor& grad, const Tensor& gate, const Tensor& up, const std::string& act,
                         const Tensor& d_gate, const Tensor& d_up, const char* op) {
  const Activation a = parse_activation(act, op);
  const IntArrayRef shape = grad.sizes();
  for (const Tensor* t : {&gate, &up}) {
    TILED_CHECK(std::vector<int64_t>(t->sizes().begin(), t->sizes().end()) ==
                    std::vector<int64_t>(shape.begin(), shape.end()),
                op, ": gate and up must have grad's shape ", shape, ", got ", t->sizes());
    TILED_CHECK(t->scalar_type() == grad.scalar_type(), op, ": gate and up must have grad's dtype ",
                grad.scalar_type(), ", got ", t->scalar_type());
    TILED_CHECK(t->device() == grad.device(), op, ": gate and up must be on grad's device ", grad.device(),
                ", got ", t->device());
  }
  const DType dtype = to_dtype(grad.scalar_type());
  const int device = grad.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const auto dense = [](const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); };
  const Tensor g = dense(grad), z = dense(gate), u = dense(up);
  const char* err = cuda::gated_backward(dtype, g.data_ptr(), z.data_ptr(), u.data_ptr(), d_gate.data_ptr(),
                                         d_up.data_ptr(), grad.numel(), a, current_stream(device));
  TILED_CHECK(err == nullptr, op, ": ", err);
  cuda_check(cudaGetLastError());
}

std::tuple<Tensor, Tensor> gated_act_backward_cuda(Tensor grad, Tensor gate, Tensor up, std::string act) {
  Tensor d_gate = empty_like_dev(grad.sizes(), grad), d_up = empty_like_dev(grad.sizes(), grad);
  gated_backward_into(grad, gate, up, act, d_gate, d_up, "tiled.gated_act_backward");
  return {d_gate, d_up};
}

// The same, its results written over gate and up (the backward's saved
// tensors, when the graph is not kept: two [tokens, hidden] tensors fewer
// alive at the block's peak).
void gated_act_backward_inplace_cuda(Tensor grad, Tensor gate, Tensor up, std::string act) {
  const char* op = "tiled.gated_act_backward_";
  TILED_CHECK(gate.is_contiguous() && up.is_contiguous(), op,
              ": gate and up must be contiguous (the results are written into them)");
  gated_backward_into(grad, gate, up, act, gate, up, op);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(tiled, CUDA, m) {
  m.impl("gemm", TORCH_BOX(&gemm_op<run_gemm>));
  m.impl("gemm_epilogue", TORCH_BOX(&gemm_epilogue_op<run_gemm>));
  m.impl("linear", TORCH_BOX(&linear_op<run_gemm>));
  m.impl("linear_act", TORCH_BOX(&linear_act_op<run_gemm>));
  m.impl("gated_linear", TORCH_BOX(&gated_linear_op<run_gemm>));
  m.impl("gemm_ladder", TORCH_BOX(&gemm_ladder_cuda));
  m.impl("gemm_kernel_name", TORCH_BOX(&gemm_kernel_name_cuda));
  m.impl("gemm_tuning", TORCH_BOX(&gemm_tuning_cuda));
  m.impl("gated_act_backward", TORCH_BOX(&gated_act_backward_cuda));
  m.impl("gated_act_backward_", TORCH_BOX(&gated_act_backward_inplace_cuda));
}

}  // namespace tiled
