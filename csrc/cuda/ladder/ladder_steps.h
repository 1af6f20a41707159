// Internal to the ladder: one launcher per step, split across translation
// units so the two halves of the ladder compile in parallel
// (ladder_basic.cu: steps 1-4, every dtype; ladder_fast.cu: steps 5-8, f32).
// ladder.cu maps step numbers onto these.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "../../gemm_problem.h"
#include "../dispatch.h"

namespace tiled {
namespace cuda {
namespace ladder {

const char* run_naive(const GemmProblem& p, cudaStream_t stream);             // step 1
const char* run_smem_tiled(const GemmProblem& p, int tile, cudaStream_t s);   // step 2 (32), 20 (16)
const char* run_thread_tiled(const GemmProblem& p, cudaStream_t stream);      // step 3
const char* run_two_level(const GemmProblem& p, cudaStream_t stream);         // step 4
const char* run_vectorized(const GemmProblem& p, cudaStream_t stream);        // step 5
const char* run_warp_tiled(const GemmProblem& p, cudaStream_t stream);        // step 6
const char* run_cp_async(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);  // step 7
const char* run_hilbert(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);   // step 8
// Tuning candidates for simt_fast (steps 91..), defined in simt_fast.cu.
const char* run_simt_candidate(int which, const GemmProblem& p, const DeviceInfo& dev,
                               cudaStream_t s);
const char* simt_candidate_name(int which);
constexpr int kSimtCandidates = 3;
// Steps 94, 95 (simt_tuning.cu): large-problem candidates, every layout.
const char* run_simt_warps16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_bk16(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 98 (simt_tuning.cu): step 95 with 16-byte copies + staged transposition
// for K-contiguous operands (falls back to step 95 when not 16-byte aligned).
const char* run_simt_bk16_staged(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Steps 100-102 (simt_tuning2.cu): step 95's tile with a lean main loop
// (interior fast-path copies, one __syncthreads per k-tile); 101 adds fragment
// prefetch across k-tiles; 102 is 101 with BK 32.
const char* run_simt_lean(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_lean_prefetch(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_lean_bk32(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Steps 103-105 (simt_tuning3.cu): 101 with the K-contiguous operand kept
// along k in shared memory (16-byte copies, no transposition); 101 on a
// 128 x 256 block of 8 warps; both.
const char* run_simt_kc(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_lean_wide(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_kc_wide(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 106 (simt_tuning3.cu): 104 with the copies spread into the next k-tile.
const char* run_simt_lean_wide_spread(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 107 (simt_tuning3.cu): 106 with BK 8 and 4 stages.
const char* run_simt_lean_wide_k8(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 108 (simt_tuning3.cu): 106 with the FFMAs column by column.
const char* run_simt_lean_wide_cols(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 109 (simt_quads.cu, compiled with ptxas -O1: setup.py): 106 with the
// FFMAs of each k in 2x2 quads; simt_fast's large config.
const char* run_simt_quads(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 109 with stream-K over its first sk_tiles tiles on `grid` CTAs (ws:
// stream_k_workspace_bytes(grid, 256) bytes; batch 1).
const char* run_simt_quads_streamk(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s, void* ws,
                                   int64_t sk_tiles, int grid);
// Steps 96, 97 (simt_small.cu): sliced-K 64 x 64 / 32 x 32 tiles, every
// layout; simt_fast_gemm uses them for problems with few 128 x 128 tiles.
const char* run_simt_sliced_mid(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_sliced_small(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
size_t simt_sliced_smem_bytes();  // the larger of the two configs' needs
// simt_fast's 128 x 128 config alone, without the size dispatch (step 90).
const char* run_simt_base(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);

constexpr const char* kF32Only = "this ladder step supports float32 only";

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
