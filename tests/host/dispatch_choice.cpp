// Host-only driver of the kernel choice across every family (dispatch.cu,
// hopper.cu, skinny.cu, sm80.cu, simt_fast.cu, autotune.cpp): reads lines
// "M N K batch dtype layout config" (dtype bf16 / f16 / f32 / tf32, layout
// nn / nt / tn / tt with BLAS letters, 'n' row-major; config a name that
// TILED_CONFIG is set to for that problem, "-" for none) and prints the name
// gemm_kernel_name gives on a 132-SM sm_90 device with 227 KB of opt-in
// shared memory (--sm80: an sm_80 device, 108 SMs, 163 KB), dense aligned
// operands.  With --list it prints instead every configuration name of
// every family for the line's dtype and layout, space-separated; with
// --candidates the autotuner's candidates for the problem; with
// --workspace the name and the workspace bytes the problem asks for.  The launchers
// are stubs: nothing runs on a GPU.  Built and driven by
// tests/test_configs_host.py.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/autotune.h"
#include "cuda/dispatch.h"
#include "cuda/hopper/hopper.h"
#include "host_driver.h"
#include "cuda/skinny/skinny.h"
#include "cuda/ladder/ladder_steps.h"
#include "cuda/sm80/sm80.h"

namespace tiled {
namespace cuda {
namespace skinny {
const char* launch_bf16(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_f16(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_tf32(const Launch&, cudaStream_t) { return nullptr; }
}  // namespace skinny
namespace sm80 {
const char* launch_bf16_0(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_bf16_1(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_f16_0(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_f16_1(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_tf32_0(const Launch&, cudaStream_t) { return nullptr; }
const char* launch_tf32_1(const Launch&, cudaStream_t) { return nullptr; }
}  // namespace sm80
namespace ladder {
const char* run_simt_large(const GemmProblem&, const DeviceInfo&, cudaStream_t) { return nullptr; }
const char* run_simt_large_streamk(const GemmProblem&, const DeviceInfo&, cudaStream_t, void*, int64_t, int) {
  return nullptr;
}
const char* run_simt_sliced_small(const GemmProblem&, const DeviceInfo&, cudaStream_t) { return nullptr; }
const char* run_simt_sliced_mid(const GemmProblem&, const DeviceInfo&, cudaStream_t) { return nullptr; }
size_t simt_sliced_smem_bytes() { return 100 * 1024; }
}  // namespace ladder
void simt_general_f32(const GemmProblem&, cudaStream_t) {}
void simt_general_f64(const GemmProblem&, cudaStream_t) {}
void simt_general_f16(const GemmProblem&, cudaStream_t) {}
void simt_general_bf16(const GemmProblem&, cudaStream_t) {}
const char* epilogue_pass(const GemmProblem&, const void*, int64_t, int64_t, cudaStream_t) { return nullptr; }
}  // namespace cuda
}  // namespace tiled

int main(int argc, char** argv) {
  const char* mode = "";
  bool sm80 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sm80") == 0)
      sm80 = true;
    else
      mode = argv[i];
  }
  using namespace tiled;
  cuda::DeviceInfo dev;
  dev.sm_major = sm80 ? 8 : 9;
  dev.sm_minor = 0;
  dev.num_sms = sm80 ? 108 : 132;
  dev.max_smem_per_block_optin = sm80 ? 166912 : 232448;
  dev.dram_bytes_per_s = sm80 ? 2.0e12 : 3.35e12;
  std::strcpy(dev.name, sm80 ? "host A100" : "host H100");
  alignas(256) static char buf[256];
  long long M, N, K, batch;
  char dt[16], layout[8], config[160];
  while (std::scanf("%lld %lld %lld %lld %15s %7s %159s", &M, &N, &K, &batch, dt, layout, config) == 7) {
    force_config(config);
    GemmProblem p;
    p.M = M, p.N = N, p.K = K, p.batch = batch;
    const std::string d(dt);
    p.dtype = d == "bf16" ? DType::bf16 : d == "f16" ? DType::f16 : DType::f32;
    p.allow_tf32 = d == "tf32";
    const bool a_row = layout[0] == 'n', b_row = layout[1] == 'n';
    p.a.ptr = buf, p.b.ptr = buf, p.c = buf;
    if (a_row) p.a.row_stride = K, p.a.col_stride = 1;
    else p.a.row_stride = 1, p.a.col_stride = M;
    if (b_row) p.b.row_stride = N, p.b.col_stride = 1;
    else p.b.row_stride = 1, p.b.col_stride = K;
    p.a.batch_stride = M * K, p.b.batch_stride = N * K;
    p.c_row_stride = N, p.c_batch_stride = M * N;
    if (std::strcmp(mode, "--list") == 0 || std::strcmp(mode, "--candidates") == 0) {
      std::string out;
      if (std::strcmp(mode, "--list") == 0) {
        for (const std::string& n : cuda::config_list(p)) out += n + " ";
      } else {
        for (const cuda::Settings& s : cuda::autotune::candidates(p, dev)) out += cuda::format_settings(s) + " ";
      }
      std::printf("%s\n", out.c_str());
      continue;
    }
    const char* name = cuda::gemm_kernel_name(p, dev);
    if (std::strcmp(mode, "--workspace") == 0)
      std::printf("%s %zu\n", name ? name : "none", cuda::gemm_workspace_bytes(p, dev));
    else
      std::printf("%s\n", name ? name : "none");
  }
  return 0;
}
