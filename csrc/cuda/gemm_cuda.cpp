// CUDA implementation of the tiled ops: checks, device guard, current
// stream, then the torch-free dispatch layer.
// Only c10/cuda headers: ATen/cuda/CUDAContext.h would pull in the cuBLAS and
// cuSPARSE headers, which a bare CUDA toolkit need not have.
#include <ATen/Context.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../error_message.h"
#include "../problem_builder.h"
#include "autotune.h"
#include "dispatch.h"
#include "settings.h"

namespace tiled {
namespace {

const cuda::DeviceInfo& device_info(int device) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<cuda::DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= device) cache.resize(device + 1);
  if (!cache[device]) {
    cudaDeviceProp prop_storage;
    C10_CUDA_CHECK(cudaGetDeviceProperties(&prop_storage, device));
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


bool allow_tf32() { return at::globalContext().allowTF32CuBLAS(); }

// The operand `o` of `storage` as a [batch, rows, cols] view (batch 1 when
// it is broadcast).
at::Tensor operand_view(const at::Tensor& storage, const Operand& o, int64_t batch, int64_t rows,
                        int64_t cols) {
  const int64_t nb = o.batch_stride != 0 ? batch : 1;
  return storage.as_strided({nb, rows, cols}, {o.batch_stride, o.row_stride, o.col_stride}, storage.storage_offset());
}

// Copies with aligned leading dimensions, as dispatch's staging plan asks
// (see StagingPlan in dispatch.h).  The copies only have to live until the
// kernel is enqueued: the caching allocator keeps them valid for the stream.
at::Tensor stage_one(const at::Tensor& src, const cuda::StagedOperand& s, const cuda::DeviceInfo& dev) {
  const int64_t nb = src.size(0), rows = src.size(1), cols = src.size(2);
  at::Tensor dst = at::empty({nb, s.row_major ? rows : cols, s.ld}, src.options());
  at::Tensor view = s.row_major ? dst.narrow(2, 0, cols) : dst.narrow(2, 0, rows).transpose(1, 2);
  cuda::StageCopy c;
  c.src = src.data_ptr();
  c.src_batch_stride = src.stride(0), c.src_row_stride = src.stride(1), c.src_col_stride = src.stride(2);
  c.dst = dst.data_ptr();
  c.dst_batch_stride = view.stride(0), c.dst_row_stride = view.stride(1), c.dst_col_stride = view.stride(2);
  c.batch = nb, c.rows = rows, c.cols = cols;
  c.elem_bytes = static_cast<int>(src.element_size());
  const char* err = cuda::stage_copy(c, dev.num_sms, c10::cuda::getCurrentCUDAStream());
  TILED_CHECK(err == nullptr, "tiled.gemm: ", err);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dst;
}

void stage_operands(PreparedGemm& g, const cuda::DeviceInfo& dev) {
  GemmProblem& p = g.problem;
  const cuda::StagingPlan plan = cuda::staging_plan(p, dev);
  if (plan.a.on) {
    g.a_storage = stage_one(operand_view(g.a_storage, p.a, p.batch, p.M, p.K), plan.a, dev);
    p.a = cuda::staged_operand(plan.a, p.M, p.K, p.a.batch_stride != 0, g.a_storage.data_ptr());
  }
  if (plan.b.on) {
    g.b_storage = stage_one(operand_view(g.b_storage, p.b, p.batch, p.K, p.N), plan.b, dev);
    p.b = cuda::staged_operand(plan.b, p.K, p.N, p.b.batch_stride != 0, g.b_storage.data_ptr());
  }
}

PreparedGemm run_gemm(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                      const char* op_name, const EpilogueArgs* epi) {
  const cuda::EnvSnapshot env;  // the TILED_* switches, read once for this call
  c10::cuda::CUDAGuard guard(a.device());
  PreparedGemm g = prepare_gemm(a, b, bias, op_name, epi);
  if (g.done) return g;
  g.problem.allow_tf32 = g.problem.dtype == DType::f32 && allow_tf32();
  const cuda::DeviceInfo& dev = device_info(a.get_device());
  stage_operands(g, dev);
  // Scratch a kernel may need (split-K partials), from the caching
  // allocator: stream-ordered, and captured into graphs like any tensor.
  const size_t ws_bytes = cuda::gemm_workspace_bytes(g.problem, dev);
  at::Tensor ws;
  if (ws_bytes > 0) ws = at::empty({static_cast<int64_t>(ws_bytes)}, a.options().dtype(at::kByte));
  const char* err =
      cuda::gemm(g.problem, dev, c10::cuda::getCurrentCUDAStream(), ws_bytes > 0 ? ws.data_ptr() : nullptr);
  TILED_CHECK(err == nullptr, op_name, ": ", err);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return g;
}

at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias) {
  return run_gemm(a, b, bias, "tiled.gemm", nullptr).out;
}

std::tuple<at::Tensor, at::Tensor> gemm_epilogue_cuda(const at::Tensor& a, const at::Tensor& b,
                                                      const std::optional<at::Tensor>& bias, c10::string_view act,
                                                      const std::optional<at::Tensor>& mul,
                                                      const std::optional<at::Tensor>& residual, bool save_pre) {
  EpilogueArgs e;
  e.act = parse_activation(act, "tiled.gemm_epilogue");
  e.mul = mul;
  e.residual = residual;
  e.save_pre = save_pre;
  PreparedGemm g = run_gemm(a, b, bias, "tiled.gemm_epilogue", &e);
  return {g.out, save_pre ? g.pre : at::empty({0}, a.options())};
}

at::Tensor gemm_ladder_cuda(const at::Tensor& a, const at::Tensor& b, int64_t step) {
  const cuda::EnvSnapshot env;
  c10::cuda::CUDAGuard guard(a.device());
  PreparedGemm g = prepare_gemm(a, b, std::nullopt, "tiled.gemm_ladder");
  TILED_CHECK(cuda::ladder_step_name(static_cast<int>(step)) != nullptr, "tiled.gemm_ladder: no ladder step ",
              step);
  if (g.done) return g.out;
  const char* err = cuda::ladder_gemm(g.problem, static_cast<int>(step), device_info(a.get_device()),
                                      c10::cuda::getCurrentCUDAStream());
  TILED_CHECK(err == nullptr, "tiled.gemm_ladder(step=", step, "): ", err);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
NamedProblem named_problem(const at::Tensor& a, const at::Tensor& b, const char* op) {
  PreparedGemm g = prepare_gemm(a, b, std::nullopt, op);
  NamedProblem n;
  n.done = g.done;
  if (g.done) return n;
  g.problem.allow_tf32 = g.problem.dtype == DType::f32 && allow_tf32();
  const cuda::DeviceInfo& dev = device_info(a.get_device());
  n.plan = cuda::staging_plan(g.problem, dev);
  const void* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  n.p = g.problem;
  GemmProblem& p = n.p;
  if (n.plan.a.on) p.a = cuda::staged_operand(n.plan.a, p.M, p.K, p.a.batch_stride != 0, aligned);
  if (n.plan.b.on) p.b = cuda::staged_operand(n.plan.b, p.K, p.N, p.b.batch_stride != 0, aligned);
  return n;
}

std::string gemm_kernel_name_cuda(const at::Tensor& a, const at::Tensor& b) {
  const cuda::EnvSnapshot env;
  c10::cuda::CUDAGuard guard(a.device());
  const NamedProblem n = named_problem(a, b, "tiled.gemm_kernel_name");
  if (n.done) return "none";
  std::string name = cuda::gemm_kernel_name(n.p, device_info(a.get_device()));
  if (n.plan.any())
    name = std::string(n.plan.a.on && n.plan.b.on ? "staged_ab+" : n.plan.a.on ? "staged_a+" : "staged_b+") + name;
  return name;
}

// For the offline tuner (torch_tiled_gemm/tune.py): the problem's class in
// the autotuning cache and the dispatch table, then the settings worth
// timing for it ("-": the rules' own choice), as the table's lines spell them.
std::vector<std::string> gemm_tuning_cuda(const at::Tensor& a, const at::Tensor& b) {
  const cuda::EnvSnapshot env;
  c10::cuda::CUDAGuard guard(a.device());
  const NamedProblem n = named_problem(a, b, "tiled.gemm_tuning");
  if (n.done) return {"none"};
  std::vector<std::string> out{cuda::autotune::class_key(n.p, device_info(a.get_device()))};
  for (const cuda::Settings& s : cuda::autotune::candidates(n.p)) out.push_back(cuda::format_settings(s));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(tiled, CUDA, m) {
  m.impl("gemm", &gemm_cuda);
  m.impl("gemm_epilogue", &gemm_epilogue_cuda);
  m.impl("gemm_ladder", &gemm_ladder_cuda);
  m.impl("gemm_kernel_name", &gemm_kernel_name_cuda);
  m.impl("gemm_tuning", &gemm_tuning_cuda);
}

}  // namespace tiled
