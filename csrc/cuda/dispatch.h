// CUDA side of the op, torch-free: the registration layer (gemm_cuda.cpp)
// builds a GemmProblem and calls gemm(); dispatch.cu is the ONE place that
// picks a kernel family and its tile config.  Every kernel family exposes a
// "can_run" predicate and a launcher with the signatures below.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <string>
#include <vector>

#include "../gemm_problem.h"

namespace tiled {
namespace cuda {

struct DeviceInfo {
  int sm_major = 0;
  int sm_minor = 0;
  int num_sms = 0;
  size_t max_smem_per_block_optin = 0;  // bytes a block may ask for after cudaFuncSetAttribute
  size_t l2_bytes = 0;
  double dram_bytes_per_s = 0;  // peak DRAM bandwidth from the memory clock and bus width; 0: unknown
  char name[128] = {};  // e.g. "NVIDIA H200" (the autotuning cache's key)
};

// Launchers return nullptr on success (the launch was enqueued; the caller
// checks cudaGetLastError), or a static string saying why they cannot take
// the problem.  They never throw and never touch torch.

// Picks the fastest kernel that can take `p` on this device and launches it.
// `workspace` must hold gemm_workspace_bytes(p, dev) bytes (256-byte
// aligned, only for this call's stream); nullptr when that is 0.
const char* gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace);
size_t gemm_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev);

// Staging: when the tensor-core kernel cannot read an operand as it is (a
// leading dimension or base pointer that breaks TMA's 16-byte rules, or an
// fp32/tf32 operand that is not K-major), a copy with an aligned leading
// dimension costs O(MK + KN) bytes against O(MNK) work.  Dispatch decides;
// the registration layer (which owns memory) makes the copies and calls
// gemm() on the problem with the staged operands.  A staged operand is
// [batch?, rows, cols] stored row-major with `ld` >= cols, or column-major
// with `ld` >= rows; 16-bit operands keep their layout (a plain, coalesced
// copy), tf32 ones become K-major (what its wgmma reads).
struct StagedOperand {
  bool on = false;
  bool row_major = true;
  int64_t ld = 0;  // elements
};
struct StagingPlan {
  StagedOperand a, b;
  bool any() const { return a.on || b.on; }
};
StagingPlan staging_plan(const GemmProblem& p, const DeviceInfo& dev);
// The description of a staged operand (rows x cols, `batched` if it has a
// batch stride), given its copy's base pointer.
Operand staged_operand(const StagedOperand& s, int64_t rows, int64_t cols, bool batched, const void* ptr);

// The staging copy itself: dst(b, r, c) = src(b, r, c) for a batch x rows x
// cols operand, both sides addressed by element strides (the source's any,
// the copy's with the staged leading dimension).  Transposing copies go
// through shared-memory tiles (stage_copy.cu).  Enqueued on `stream`;
// nullptr on success.
struct StageCopy {
  const void* src = nullptr;
  int64_t src_batch_stride = 0, src_row_stride = 0, src_col_stride = 0;
  void* dst = nullptr;
  int64_t dst_batch_stride = 0, dst_row_stride = 0, dst_col_stride = 0;
  int64_t batch = 0, rows = 0, cols = 0;
  int elem_bytes = 0;  // 2 or 4
};
const char* stage_copy(const StageCopy& c, int num_sms, cudaStream_t stream);

// The name of the kernel gemm() would pick (for tests and benchmarks).
const char* gemm_kernel_name(const GemmProblem& p, const DeviceInfo& dev);

// The general kernel: any dtype, any layout, any shape.  Always succeeds.
const char* simt_general_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream);

// The teaching ladder: step 1 (naive) .. 8 (fastest SIMT); ladder_step_name
// returns nullptr for a step that does not exist.
const char* ladder_gemm(const GemmProblem& p, int step, const DeviceInfo& dev, cudaStream_t stream);
const char* ladder_step_name(int step);

// Fast strict-fp32 SIMT kernel (the ladder's last step, tuned for Hopper).
bool simt_fast_can_run(const GemmProblem& p, const DeviceInfo& dev);
// `workspace`: simt_fast_workspace_bytes(p, dev) bytes (null: neither
// split-K nor stream-K).
const char* simt_fast_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace);
size_t simt_fast_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev);
// What simt_fast runs for `p` given a workspace: "simt_fast_splitk" (K split
// over the SMs), "simt_fast_streamk" (stream-K over the last wave) or
// "simt_fast".
const char* simt_fast_config_name(const GemmProblem& p, const DeviceInfo& dev);
// Configurations by name (docs/dispatch.md): each family's list for p's
// dtype and layout, as X_config_name reports them (empty where the family
// has none for that dtype), and whether the forced configuration list
// (settings.h's forced_config: TILED_CONFIG, or the table's or the
// autotuner's choice) names one of the family's that takes `p` as named.
std::vector<std::string> simt_fast_config_list(const GemmProblem& p);
bool simt_fast_config_forced(const GemmProblem& p, const DeviceInfo& dev);
std::vector<std::string> skinny_config_list(const GemmProblem& p);
bool skinny_config_forced(const GemmProblem& p, const DeviceInfo& dev);
std::vector<std::string> sm80_config_list(const GemmProblem& p);
bool sm80_config_forced(const GemmProblem& p, const DeviceInfo& dev);
// Every family's list for p's dtype and layout, in dispatch order (sm90,
// skinny, sm80, simt_fast, simt_general).
std::vector<std::string> config_list(const GemmProblem& p);

// Whether simt_fast takes `p` with its large (128-row block) config rather
// than a sliced-K one for few tiles.
bool simt_fast_runs_large(const GemmProblem& p, const DeviceInfo& dev);

// Small M or small N (1..64), bf16/fp16 on sm_80+: mma.sync tiles of
// BM x 128 with K split over the SMs and a deterministic reduction of the
// slices' fp32 partials in a workspace (skinny/).
bool skinny_can_run(const GemmProblem& p, const DeviceInfo& dev);
size_t skinny_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev);
const char* skinny_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace);
const char* skinny_config_name(const GemmProblem& p, const DeviceInfo& dev);

// Ampere-style tensor-core kernels (sm80/): mma.sync, ldmatrix, a cp.async
// pipeline; bf16, fp16, and fp32 with allow_tf32, on sm_80 and later, for
// 16-byte aligned operands.  `workspace`: sm80_workspace_bytes(p, dev)
// bytes, the fp32 partial sums of a grid split over K (null: no split).
bool sm80_can_run(const GemmProblem& p, const DeviceInfo& dev);
size_t sm80_workspace_bytes(const GemmProblem& p, const DeviceInfo& dev);
const char* sm80_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace);
// Name of the configuration sm80_gemm would run (starts with "sm80").
const char* sm80_config_name(const GemmProblem& p, const DeviceInfo& dev);

// Empty when this build's device code runs on `dev`, else an error naming the
// GPU, its compute capability and the build's architectures (build_archs.h).
std::string build_mismatch(const DeviceInfo& dev);

// Hopper (sm_90a) tensor-core kernels: bf16, fp16, and fp32 with allow_tf32.
bool hopper_can_run(const GemmProblem& p, const DeviceInfo& dev);
// `workspace`: hopper_workspace_bytes(p, dev) bytes (hopper/hopper.h), 256-byte aligned, null when 0.
const char* hopper_gemm(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t stream, void* workspace);
// Name of the tile config hopper_gemm would run (starts with "sm90").
const char* hopper_config_name(const GemmProblem& p, const DeviceInfo& dev);

// The gated MLP's elementwise backward, `n` contiguous elements of one
// dtype: given the output gradient g, the gate's pre-activation z and up,
//   d_up = g * act(z),   d_gate = g * up * act'(z)
// in one pass (torch's chain takes four: act, two products, act's backward),
// in the accumulator type, each output rounded once (epilogue.cu).
// nullptr on success.
const char* gated_backward(DType dtype, const void* g, const void* z, const void* up, void* d_gate, void* d_up,
                           int64_t n, Activation act, cudaStream_t stream);

}  // namespace cuda
}  // namespace tiled
