// The staging copy (dispatch.h, StagingPlan): an operand copied into storage
// whose leading dimension suits the tensor-core kernel, in the same layout or
// transposed (tf32 operands are made K-major).  A copy that reads along one
// dimension and writes along the other goes through a 32x32 shared-memory
// tile, so that both the loads and the stores of a warp are contiguous;
// a plain strided copy would leave one side of a transposing copy reading or
// writing 4 bytes per 32-byte sector.  Element bits are moved as they are
// (2- or 4-byte types).  Torch-free.
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.h"

namespace tiled {
namespace cuda {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // block of 32 x 8 threads, 4 passes per tile

// Element (b, r, c) sits at b * s.b + r * s.r + c * s.c (elements).
struct Strides3 {
  int64_t b, r, c;
};

// kSrcAlongR / kDstAlongR: a warp's 32 lanes walk r (else c) when loading /
// storing, the dimension along which that side is contiguous.
template <class Bits, bool kSrcAlongR, bool kDstAlongR>
__global__ void __launch_bounds__(kTile* kRowsPerPass)
    stage_copy_kernel(const Bits* __restrict__ src, Strides3 ss, Bits* __restrict__ dst, Strides3 ds, int64_t batch,
                      int64_t rows, int64_t cols) {
  __shared__ Bits tile[kTile][kTile + 1];  // [r][c] within the tile; +1 staggers banks
  const int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  const int64_t total = tiles_r * tiles_c * batch;
  const int lane = threadIdx.x, pass = threadIdx.y;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_c);
    const int64_t rc = t - b * tiles_r * tiles_c;
    const int64_t r0 = (rc / tiles_c) * kTile, c0 = (rc % tiles_c) * kTile;
#pragma unroll
    for (int i = 0; i < kTile / kRowsPerPass; ++i) {
      const int fast = lane, slow = pass + kRowsPerPass * i;
      const int dr = kSrcAlongR ? fast : slow, dc = kSrcAlongR ? slow : fast;
      if (r0 + dr < rows && c0 + dc < cols) tile[dr][dc] = src[b * ss.b + (r0 + dr) * ss.r + (c0 + dc) * ss.c];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile / kRowsPerPass; ++i) {
      const int fast = lane, slow = pass + kRowsPerPass * i;
      const int dr = kDstAlongR ? fast : slow, dc = kDstAlongR ? slow : fast;
      if (r0 + dr < rows && c0 + dc < cols) dst[b * ds.b + (r0 + dr) * ds.r + (c0 + dc) * ds.c] = tile[dr][dc];
    }
    __syncthreads();  // the tile is rewritten by the next iteration
  }
}

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

template <class Bits>
const char* launch(const void* src, Strides3 ss, void* dst, Strides3 ds, int64_t batch, int64_t rows, int64_t cols,
                   int num_sms, cudaStream_t stream) {
  // Walk r on the side whose r stride is the smaller (1 for a contiguous dimension).
  const bool src_r = abs64(ss.r) < abs64(ss.c), dst_r = abs64(ds.r) < abs64(ds.c);
  const int64_t tiles = ceil_div(rows, kTile) * ceil_div(cols, kTile) * batch;
  const int64_t cap = static_cast<int64_t>(num_sms > 0 ? num_sms : 1) * 16;  // a few resident waves, then loop
  const dim3 grid(static_cast<unsigned>(tiles < cap ? tiles : cap)), block(kTile, kRowsPerPass);
  const auto* s = static_cast<const Bits*>(src);
  auto* d = static_cast<Bits*>(dst);
  if (src_r && dst_r) stage_copy_kernel<Bits, true, true><<<grid, block, 0, stream>>>(s, ss, d, ds, batch, rows, cols);
  else if (src_r) stage_copy_kernel<Bits, true, false><<<grid, block, 0, stream>>>(s, ss, d, ds, batch, rows, cols);
  else if (dst_r) stage_copy_kernel<Bits, false, true><<<grid, block, 0, stream>>>(s, ss, d, ds, batch, rows, cols);
  else stage_copy_kernel<Bits, false, false><<<grid, block, 0, stream>>>(s, ss, d, ds, batch, rows, cols);
  return nullptr;
}

}  // namespace

const char* stage_copy(const StageCopy& c, int num_sms, cudaStream_t stream) {
  if (c.batch <= 0 || c.rows <= 0 || c.cols <= 0) return nullptr;
  const Strides3 ss{c.src_batch_stride, c.src_row_stride, c.src_col_stride};
  const Strides3 ds{c.dst_batch_stride, c.dst_row_stride, c.dst_col_stride};
  switch (c.elem_bytes) {
    case 2: return launch<uint16_t>(c.src, ss, c.dst, ds, c.batch, c.rows, c.cols, num_sms, stream);
    case 4: return launch<uint32_t>(c.src, ss, c.dst, ds, c.batch, c.rows, c.cols, num_sms, stream);
    default: return "stage_copy: element size must be 2 or 4 bytes";
  }
}

}  // namespace cuda
}  // namespace tiled
