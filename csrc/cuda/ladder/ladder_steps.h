// Internal to the ladder: one launcher per step, split across translation
// units so they compile in parallel (ladder_basic.cu: steps 1-4, every
// dtype; ladder_fast.cu: steps 5-8, f32; simt_fast*.cu: step 9's configs).
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
// simt_fast (step 9), its configs alone:
// Step 109 (simt_fast_large.cu, compiled with ptxas -O1: setup.py): the large
// config, 128 x 256 x 16 lean pipeline, FFMAs in 2x2 quads.
const char* run_simt_large(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Step 109 with stream-K over its first sk_tiles tiles on `grid` CTAs (ws:
// stream_k_workspace_bytes(grid, 256) bytes; batch 1).
const char* run_simt_large_streamk(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s, void* ws,
                                   int64_t sk_tiles, int grid);
// Step 101 (simt_fast.cu): the lean pipeline on a 128 x 128 x 16 block of 4
// warps, for GPUs without the large config's 75 KB of shared memory.
const char* run_simt_lean_128x128(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
// Steps 96, 97 (simt_fast_sliced.cu): sliced-K 64 x 64 / 32 x 32 tiles, for
// problems with few 128 x 128 tiles.
const char* run_simt_sliced_mid(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
const char* run_simt_sliced_small(const GemmProblem& p, const DeviceInfo& dev, cudaStream_t s);
size_t simt_sliced_smem_bytes();  // the larger of the two configs' needs

constexpr const char* kF32Only = "this ladder step supports float32 only";

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
