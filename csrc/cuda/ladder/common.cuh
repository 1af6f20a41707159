// Shared device helpers for the ladder (csrc/cuda/ladder/NN_*.cuh) and for
// simt_fast.cu.  Everything a step needs that is NOT its own idea lives here:
// dtype conversion, strided operand access, 64-bit index math, the grid shape
// (tiles in grid.x, batch in grid.y with a loop), the epilogue (bias + cast),
// alignment tests, and the cp.async / named-barrier PTX wrappers.
//
// Torch-free: only the CUDA headers and gemm_problem.h.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../../gemm_problem.h"
#include "../cp_async.cuh"
#include "../dispatch.h"
#include "../smem_opt_in.h"

namespace tiled {
namespace cuda {
namespace ladder {

// ---------------------------------------------------------------------------
// dtype: storage type T, accumulator type acc_t<T> (float, or double for
// double), and the two conversions.
// ---------------------------------------------------------------------------
template <typename T> struct Cvt;
template <> struct Cvt<float> {
  using acc = float;
  __device__ __forceinline__ static float to(float v) { return v; }
  __device__ __forceinline__ static float from(float v) { return v; }
};
template <> struct Cvt<double> {
  using acc = double;
  __device__ __forceinline__ static double to(double v) { return v; }
  __device__ __forceinline__ static double from(double v) { return v; }
};
template <> struct Cvt<__half> {
  using acc = float;
  __device__ __forceinline__ static float to(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from(float v) { return __float2half_rn(v); }
};
template <> struct Cvt<__nv_bfloat16> {
  using acc = float;
  __device__ __forceinline__ static float to(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};
template <typename T> using acc_t = typename Cvt<T>::acc;

// ---------------------------------------------------------------------------
// Kernel parameters: the GemmProblem with typed pointers.  All offsets are
// int64: a tensor may have more than 2^31 elements.
// ---------------------------------------------------------------------------
template <typename T> struct Params {
  const T* __restrict__ a;
  const T* __restrict__ b;
  const T* __restrict__ bias;  // may be null
  T* __restrict__ c;
  int64_t M, N, K, batch;
  int64_t a_bs, a_rs, a_cs;  // A(b, m, k) = a[b*a_bs + m*a_rs + k*a_cs]
  int64_t b_bs, b_rs, b_cs;  // B(b, k, n) = b[b*b_bs + k*b_rs + n*b_cs]
  int64_t c_bs, c_rs;        // C(b, m, n) = c[b*c_bs + m*c_rs + n]
  bool c_vec4;               // float only: C rows may take 16-byte stores
};

template <typename T> inline Params<T> make_params(const GemmProblem& p) {
  Params<T> q;
  q.a = static_cast<const T*>(p.a.ptr);
  q.b = static_cast<const T*>(p.b.ptr);
  q.bias = static_cast<const T*>(p.bias);
  q.c = static_cast<T*>(p.c);
  q.M = p.M; q.N = p.N; q.K = p.K; q.batch = p.batch;
  q.a_bs = p.a.batch_stride; q.a_rs = p.a.row_stride; q.a_cs = p.a.col_stride;
  q.b_bs = p.b.batch_stride; q.b_rs = p.b.row_stride; q.b_cs = p.b.col_stride;
  q.c_bs = p.c_batch_stride; q.c_rs = p.c_row_stride;
  q.c_vec4 = pointer_alignment(p.c) >= 16 && p.c_row_stride % 4 == 0 &&
             (p.batch == 1 || p.c_batch_stride % 4 == 0);
  return q;
}

// ---------------------------------------------------------------------------
// Grid: output tiles in grid.x (up to 2^31-1), batch in grid.y capped at
// 65535 with a grid-stride loop over the batch inside the kernel.
// ---------------------------------------------------------------------------
inline const char* make_grid(int64_t tiles, int64_t batch, dim3* grid) {
  if (tiles > 0x7fffffffLL) return "ladder: too many output tiles for one launch";
  *grid = dim3(static_cast<unsigned>(tiles),
               static_cast<unsigned>(batch < 65535 ? batch : 65535), 1);
  return nullptr;
}

#define TILED_BATCH_LOOP(p, b) \
  for (int64_t b = blockIdx.y; b < (p).batch; b += gridDim.y)

// Row-major tile order: consecutive blocks walk along N, sharing A rows.
struct RowMajorOrder {
  static constexpr const char* name = "row-major";
  __device__ __forceinline__ static void tile(int64_t t, int64_t /*tiles_m*/,
                                              int64_t tiles_n, int /*panel*/,
                                              int64_t& tm, int64_t& tn) {
    tm = t / tiles_n;
    tn = t - tm * tiles_n;
  }
  static int panel(int64_t, int64_t) { return 0; }
};

// ---------------------------------------------------------------------------
// Epilogue.
// ---------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void store_c(const Params<T>& p, T* cb, int64_t row,
                                        int64_t col, acc_t<T> v) {
  if (p.bias != nullptr) v += Cvt<T>::to(p.bias[col]);
  cb[row * p.c_rs + col] = Cvt<T>::from(v);
}

// float only: four consecutive columns col..col+3 of one row, bounds-checked;
// one 16-byte store when C allows it and all four are inside.
__device__ __forceinline__ void store_c4(const Params<float>& p, float* cb, int64_t row,
                                         int64_t col, float v0, float v1, float v2,
                                         float v3) {
  float* dst = cb + row * p.c_rs + col;
  if (p.c_vec4 && col + 3 < p.N) {
    if (p.bias != nullptr) {
      v0 += p.bias[col]; v1 += p.bias[col + 1]; v2 += p.bias[col + 2]; v3 += p.bias[col + 3];
    }
    *reinterpret_cast<float4*>(dst) = make_float4(v0, v1, v2, v3);
  } else {
    const float v[4] = {v0, v1, v2, v3};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (col + j < p.N) dst[j] = v[j] + (p.bias != nullptr ? p.bias[col + j] : 0.0f);
  }
}

__device__ __forceinline__ int clamp_int(int64_t v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : static_cast<int>(v));
}

// ---------------------------------------------------------------------------
// k-major shared tiles (f32 steps 5..8, simt_fast).
//
// Both operands are staged "k-major": row k of the smem tile holds BX values
// along M (for A) or N (for B), so a thread's fragment for one k is one or two
// 16-byte LDS.  In global memory an operand is either
//   X-contiguous (XC): A column-major / B row-major: a smem row is a global
//                      row segment, copied straight (16 B when aligned);
//   K-contiguous (!XC): A row-major / B column-major: the tile is transposed
//                      on the way in, element by element.
// The smem row pitch is BX + 4 floats: a multiple of 4 (16-byte rows) and
// 4 mod 32 words, so the transposing stores (8 k values x 4 x values per
// warp) land on 32 different banks.
// View of one operand tile in global memory: g points at element (x0, k0),
// element (x, k) of the tile is g[x*ld + k] (!XC) or g[k*ld + x] (XC).
// ---------------------------------------------------------------------------
template <bool XC>
__device__ __forceinline__ int64_t tile_offset(int x, int k, int64_t ld) {
  return XC ? static_cast<int64_t>(k) * ld + x : static_cast<int64_t>(x) * ld + k;
}

// Base of one operand (batch offset applied, always a valid address) and its
// leading dim; at(x0, k0) is the tile origin, 64-bit throughout.
template <bool XC> struct OperandView {
  const float* base;
  int64_t ld;
  __device__ __forceinline__ const float* at(int64_t x0, int64_t k0) const {
    return base + (XC ? k0 * ld + x0 : x0 * ld + k0);
  }
};

// Host: calls f(bool_constant<AXC>, bool_constant<BXC>, bool_constant<VEC>)
// with the layout of the problem: AXC = A column-major, BXC = B row-major.
// Instantiates all 8 combinations of the three flags.
template <typename F>
const char* by_layout(bool axc, bool bxc, bool vec, F&& f) {
  using T_ = std::true_type;
  using F_ = std::false_type;
  if (axc) {
    if (bxc) return vec ? f(T_{}, T_{}, T_{}) : f(T_{}, T_{}, F_{});
    return vec ? f(T_{}, F_{}, T_{}) : f(T_{}, F_{}, F_{});
  }
  if (bxc) return vec ? f(F_{}, T_{}, T_{}) : f(F_{}, T_{}, F_{});
  return vec ? f(F_{}, F_{}, T_{}) : f(F_{}, F_{}, F_{});
}

// Host: steps 5 and 6: one block per output tile, static shared memory,
// 16-byte copies only when both operands are aligned; PICK(axc, bxc, vec)
// names the kernel instance for the problem's layout.
template <class C, class Pick>
const char* launch_by_layout_f32(const GemmProblem& pr, cudaStream_t stream, const char* f32_only_error,
                                 Pick pick) {
  if (pr.dtype != DType::f32) return f32_only_error;
  const int64_t tiles_n = ceil_div(pr.N, C::BN);
  dim3 grid;
  if (const char* e = make_grid(ceil_div(pr.M, C::BM) * tiles_n, pr.batch, &grid)) return e;
  const Params<float> params = make_params<float>(pr);
  const bool vec = operand_vec4_ok(pr.a, pr.batch) && operand_vec4_ok(pr.b, pr.batch);
  return by_layout(!pr.a.row_major(), pr.b.row_major(), vec, [&](auto axc, auto bxc, auto v) {
    (pick(axc, bxc, v))<<<grid, C::kThreads, 0, stream>>>(params, tiles_n);
    return static_cast<const char*>(nullptr);
  });
}

// Host: what every tiled f32 launcher works out before it picks a kernel
// instance (steps 7 and later): the tile grid, the raster panel, the kernel
// parameters, the layouts (axc: A column-major, bxc: B row-major) and whether
// 16-byte copies are allowed.
struct TiledLaunch {
  int64_t tiles_m = 0, tiles_n = 0;
  dim3 grid;
  int panel = 0;
  Params<float> params;
  bool axc = false, bxc = false, vec = false;

  // Raises `kern`'s shared-memory limit once per device (`raised` must belong
  // to this one kernel, see smem_opt_in.h) and launches it; `extra` follows
  // the four common kernel arguments.
  template <class Kernel, class... Extra>
  const char* launch(Kernel kern, int threads, int smem, std::atomic<uint64_t>& raised,
                     cudaStream_t stream, const char* raise_failed, Extra... extra) const {
    if (!raise_smem_limit(kern, smem, raised)) return raise_failed;
    kern<<<grid, threads, smem, stream>>>(params, tiles_m, tiles_n, panel, extra...);
    return nullptr;
  }
};

// vec_all: 16-byte copies need both operands aligned; otherwise only the
// X-contiguous operands, the only ones copied 16 bytes at a time.
template <class Order>
const char* plan_tiled_launch(const GemmProblem& pr, int64_t bm, int64_t bn, bool vec_all,
                              TiledLaunch* l) {
  l->tiles_m = ceil_div(pr.M, bm);
  l->tiles_n = ceil_div(pr.N, bn);
  if (const char* e = make_grid(l->tiles_m * l->tiles_n, pr.batch, &l->grid)) return e;
  l->panel = Order::panel(l->tiles_m, l->tiles_n);
  l->params = make_params<float>(pr);
  l->axc = !pr.a.row_major();
  l->bxc = pr.b.row_major();
  const bool a_ok = operand_vec4_ok(pr.a, pr.batch), b_ok = operand_vec4_ok(pr.b, pr.batch);
  l->vec = vec_all ? (a_ok && b_ok) : ((!l->axc || a_ok) && (!l->bxc || b_ok));
  return nullptr;
}

// Host: the launcher of the tiled f32 kernels whose instances differ only
// by layout (steps 7, 9, 11): the kernel PICK(axc, bxc, vec) returns for the
// problem's layout (bool_constant arguments; vec only where an X-contiguous
// operand takes 16-byte copies: NT has none), with C's block and shared
// memory.  Errors: the dtype, the device's shared memory, the opt-in.
// blocks > 0: a grid of that many blocks instead of one per tile (batch 1
// only); `extra`: kernel arguments after the common four.
struct TiledErrors {
  const char* f32_only;
  const char* no_smem;
  const char* raise_failed;
};
template <class C, class Order, class Pick, class... Extra>
const char* launch_tiled_f32(const GemmProblem& pr, const DeviceInfo& dev, cudaStream_t stream,
                             const TiledErrors& err, Pick pick, int64_t blocks = 0, Extra... extra) {
  if (pr.dtype != DType::f32) return err.f32_only;
  if (static_cast<size_t>(C::kSmemBytes) > dev.max_smem_per_block_optin) return err.no_smem;
  TiledLaunch l;
  if (const char* e = plan_tiled_launch<Order>(pr, C::BM, C::BN, /*vec_all=*/false, &l)) return e;
  if (blocks > 0) {
    if (pr.batch != 1 || blocks > 0x7fffffff) return "tiled f32 launch: a block count needs batch 1 and < 2^31 blocks";
    l.grid = dim3(static_cast<unsigned>(blocks), 1, 1);
  }
  return by_layout(l.axc, l.bxc, l.vec, [&](auto axc_c, auto bxc_c, auto vec_c) -> const char* {
    constexpr bool kA = decltype(axc_c)::value, kB = decltype(bxc_c)::value;
    constexpr bool kV = decltype(vec_c)::value && (kA || kB);
    static std::atomic<uint64_t> raised{0};  // one per instantiation of this lambda = per kernel
    return l.launch(pick(std::bool_constant<kA>{}, std::bool_constant<kB>{}, std::bool_constant<kV>{}),
                    C::kThreads, C::kSmemBytes, raised, stream, err.raise_failed, extra...);
  });
}

// ---------------------------------------------------------------------------
// PTX wrappers: cp.async (sm_80+) with zero fill, and named barriers.
// Below sm_80 the copies degrade to synchronous loads, so the code still
// builds (and stays correct) for older targets.
// ---------------------------------------------------------------------------
// Copies src_bytes (0..16) from src and zero-fills the rest of 16 bytes.
__device__ __forceinline__ void cp_async_16(float* dst, const float* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
               "r"(src_bytes));
#else
#pragma unroll
  for (int j = 0; j < 4; ++j) dst[j] = (4 * j < src_bytes) ? src[j] : 0.0f;
#endif
}
// Copies 4 bytes when valid, else writes zero.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
               "r"(valid ? 4 : 0));
#else
  *dst = valid ? *src : 0.0f;
#endif
}
// bar.sync on named barrier `id` (1 <= id < kIds) shared by `count` threads
// (a multiple of 32); id 0 is __syncthreads'.  The id is dispatched to an
// immediate so ptxas reserves only kIds barriers (a register id reserves all
// 16, which can cost occupancy).  id is warp-uniform: no divergence.
template <int kIds>
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  static_assert(kIds <= 16, "16 hardware barriers per block");
#define TILED_BAR_CASE(n)                                                          \
  case n:                                                                          \
    if constexpr (n < kIds) asm volatile("bar.sync " #n ", %0;\n" ::"r"(count) : "memory"); \
    break;
  switch (id) {
    TILED_BAR_CASE(1) TILED_BAR_CASE(2) TILED_BAR_CASE(3) TILED_BAR_CASE(4) TILED_BAR_CASE(5)
    TILED_BAR_CASE(6) TILED_BAR_CASE(7) TILED_BAR_CASE(8) TILED_BAR_CASE(9) TILED_BAR_CASE(10)
    TILED_BAR_CASE(11) TILED_BAR_CASE(12) TILED_BAR_CASE(13) TILED_BAR_CASE(14)
    TILED_BAR_CASE(15)
    default: break;
  }
#undef TILED_BAR_CASE
}

}  // namespace ladder
}  // namespace cuda
}  // namespace tiled
