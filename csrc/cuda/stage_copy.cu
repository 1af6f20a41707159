// The staging copy (dispatch.h, StagingPlan): an operand copied into storage
// whose leading dimension suits the tensor-core kernel, in the same layout or
// transposed (tf32 operands are made K-major).  A copy that reads along one
// dimension and writes along the other goes through a 32x32 shared-memory
// tile, so that both the loads and the stores of a warp are contiguous;
// a plain strided copy would leave one side of a transposing copy reading or
// writing 4 bytes per 32-byte sector.  Element bits are moved as they are
// (2- or 4-byte types).  A copy that keeps the layout needs no tile: it
// moves 16-byte vectors along the rows (stage_rows_kernel).  Torch-free.
#include <cuda_runtime.h>

#include <algorithm>
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

// A copy that keeps the layout (both sides contiguous along the same
// dimension) moves whole 16-byte vectors: each lane stores one aligned
// vector of a destination row and builds it from the two aligned 16-byte
// chunks of the source that cover it (its own, and its neighbour's through a
// shuffle), so that a source row starting anywhere is still read 16 bytes at
// a time.  A row is cut into segments of `kWidth` lanes (a power of two up to
// 32, launch_rows picks it), several segments to a warp when they are
// narrow; the warps take (row, segment) tasks kUnroll at a time, so that
// each lane has that many loads in flight.
struct RowCopy {
  const char* src = nullptr;
  char* dst = nullptr;
  int64_t src_b = 0, src_o = 0, dst_b = 0, dst_o = 0;  // byte strides of a batch and of a row
  int64_t outer = 0;                                   // rows per batch
  int64_t inner = 0;                                   // bytes per row
  int64_t segments = 0;                                // per row
  int64_t tasks = 0;                                   // batch * outer * segments
};

constexpr int kUnroll = 2;

// The 16 bytes at byte offset 4 * kQ (+ 2 when `half`) of the 32 in w.
template <int kQ>
__device__ __forceinline__ uint4 extract(const uint32_t (&w)[8], bool half) {
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = half ? __byte_perm(w[kQ + i], w[kQ + i + 1], 0x5432) : w[kQ + i];
  return make_uint4(o[0], o[1], o[2], o[3]);
}

__device__ __forceinline__ uint4 shifted(const uint4& lo, const uint4& hi, int off) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const bool half = (off & 2) != 0;
  switch (off >> 2) {
    case 0: return extract<0>(w, half);
    case 1: return extract<1>(w, half);
    case 2: return extract<2>(w, half);
    default: return extract<3>(w, half);
  }
}

// q / d and its remainder, in 32 bits where both fit (the common case).
__device__ __forceinline__ int64_t div_rem(int64_t q, int64_t d, int64_t* rem) {
  if ((q | d) <= 0xffffffffLL) {
    const uint32_t a = static_cast<uint32_t>(q), b = static_cast<uint32_t>(d), r = a / b;
    *rem = a - r * b;
    return r;
  }
  const int64_t r = q / d;
  *rem = q - r * d;
  return r;
}

template <int kWidth>
__global__ void __launch_bounds__(256) stage_rows_kernel(RowCopy c) {
  constexpr int kTasksPerWarp = 32 / kWidth;
  const int lane = threadIdx.x & 31, j = lane % kWidth;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  // Every lane runs the same iterations: the shuffles take the whole warp.
  for (int64_t base = warp * kTasksPerWarp * kUnroll; base < c.tasks; base += warps * kTasksPerWarp * kUnroll) {
    uint4 lo[kUnroll], hi[kUnroll];
    int64_t x[kUnroll];
    char* out[kUnroll];
    int off[kUnroll];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t t = base + u * kTasksPerWarp + lane / kWidth;
      live[u] = t < c.tasks;
      int64_t seg = 0, o = 0;
      const int64_t r = live[u] ? (c.segments > 1 ? div_rem(t, c.segments, &seg) : t) : 0;  // batch * outer + row
      const int64_t b = div_rem(r, c.outer, &o);
      const char* row = c.src + b * c.src_b + o * c.src_o;
      out[u] = c.dst + b * c.dst_b + o * c.dst_o;
      x[u] = (seg * kWidth + j) * 16;  // this lane's vector in the row, in bytes
      off[u] = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
      const uintptr_t chunk = (reinterpret_cast<uintptr_t>(row) + x[u]) & ~uintptr_t{15};
      const uintptr_t last = reinterpret_cast<uintptr_t>(row) + c.inner - 1;
      lo[u] = live[u] && chunk <= last ? *reinterpret_cast<const uint4*>(chunk) : make_uint4(0, 0, 0, 0);
      // The segment's last lane reads the chunk after its own.
      hi[u] = j == kWidth - 1 && live[u] && off[u] != 0 && chunk + 16 <= last
                  ? *reinterpret_cast<const uint4*>(chunk + 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint4 next = make_uint4(__shfl_down_sync(0xffffffffu, lo[u].x, 1, kWidth),
                                    __shfl_down_sync(0xffffffffu, lo[u].y, 1, kWidth),
                                    __shfl_down_sync(0xffffffffu, lo[u].z, 1, kWidth),
                                    __shfl_down_sync(0xffffffffu, lo[u].w, 1, kWidth));
      if (j != kWidth - 1) hi[u] = next;
      if (!live[u] || x[u] >= c.inner) continue;
      uint4 v = shifted(lo[u], hi[u], off[u]);
      // Past the row's end (up to the vector's): zeros, not the next row.
      const int64_t valid = c.inner - x[u];
      if (valid < 16) {
        uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t bytes = valid - 4 * i;
          if (bytes <= 0) w[i] = 0;
          else if (bytes < 4) w[i] &= 0xffffu;  // the word's low element is the row's last
        }
        v = make_uint4(w[0], w[1], w[2], w[3]);
      }
      *reinterpret_cast<uint4*>(out[u] + x[u]) = v;
    }
  }
}

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

// The row copy's launch, or false where it does not apply: both sides
// contiguous along the same dimension (the copy keeps the layout), every
// destination row 16-byte aligned.
bool launch_rows(const void* src, Strides3 ss, void* dst, Strides3 ds, int64_t batch, int64_t rows, int64_t cols,
                 int elem, int num_sms, cudaStream_t stream) {
  const bool along_c = ss.c == 1 && ds.c == 1, along_r = ss.r == 1 && ds.r == 1;
  if (!along_c && !along_r) return false;
  RowCopy c;
  c.src = static_cast<const char*>(src);
  c.dst = static_cast<char*>(dst);
  c.src_b = ss.b * elem, c.dst_b = ds.b * elem;
  c.src_o = (along_c ? ss.r : ss.c) * elem, c.dst_o = (along_c ? ds.r : ds.c) * elem;
  c.outer = along_c ? rows : cols;
  c.inner = (along_c ? cols : rows) * elem;
  const auto aligned = [](int64_t v) { return v % 16 == 0; };
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % elem != 0) return false;
  if ((c.outer > 1 && !aligned(c.dst_o)) || (batch > 1 && !aligned(c.dst_b))) return false;
  // The width that leaves the fewest lanes idle (the widest of equals): a
  // row of up to 32 vectors in one segment, a longer one in segments of 8,
  // 16 or 32 lanes (33 vectors: 5 x 8 lanes, not 2 x 32).
  const int64_t vectors = (c.inner + 15) / 16;
  int width = 1;
  while (width < 32 && width < vectors) width *= 2;
  if (vectors > 32) {
    const auto lanes = [&](int w) { return (vectors + w - 1) / w * w; };
    for (int w : {16, 8})
      if (lanes(w) < lanes(width)) width = w;
  }
  c.segments = (vectors + width - 1) / width;
  c.tasks = c.outer * batch * c.segments;
  const int64_t threads = (c.tasks + kUnroll - 1) / kUnroll * width;
  const int64_t cap = static_cast<int64_t>(num_sms > 0 ? num_sms : 1) * 8;  // 8 blocks of 256 per SM, then loop
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(cap, (threads + 255) / 256))), block(256);
  switch (width) {
    case 1: stage_rows_kernel<1><<<grid, block, 0, stream>>>(c); break;
    case 2: stage_rows_kernel<2><<<grid, block, 0, stream>>>(c); break;
    case 4: stage_rows_kernel<4><<<grid, block, 0, stream>>>(c); break;
    case 8: stage_rows_kernel<8><<<grid, block, 0, stream>>>(c); break;
    case 16: stage_rows_kernel<16><<<grid, block, 0, stream>>>(c); break;
    default: stage_rows_kernel<32><<<grid, block, 0, stream>>>(c); break;
  }
  return true;
}

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
  if (c.elem_bytes != 2 && c.elem_bytes != 4) return "stage_copy: element size must be 2 or 4 bytes";
  if (launch_rows(c.src, ss, c.dst, ds, c.batch, c.rows, c.cols, c.elem_bytes, num_sms, stream)) return nullptr;
  return c.elem_bytes == 2 ? launch<uint16_t>(c.src, ss, c.dst, ds, c.batch, c.rows, c.cols, num_sms, stream)
                           : launch<uint32_t>(c.src, ss, c.dst, ds, c.batch, c.rows, c.cols, num_sms, stream);
}

}  // namespace cuda
}  // namespace tiled
