// Named inline-PTX helpers for the sm_90a GEMM (gemm_sm90.cuh), one instruction
// (or one tiny idiom) each, so the kernel reads like the algorithm.
//
// Everything here needs sm_90a (wgmma, setmaxnreg) or sm_90 (TMA, mbarrier
// tx-count).  Callers compile it only under
//   #if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// and this header guards its device bodies the same way, so a multi-arch
// build (e.g. sm_80 + sm_90a) still parses it for the other targets.
//
// Shared-memory operands are 32-bit shared-window addresses (what
// __cvta_generic_to_shared gives), never generic pointers.
//
// PTX references: PTX ISA 8.x/9.0, sections "mbarrier", "cp.async.bulk.tensor",
// "wgmma.mma_async" (9.7.15) and "Matrix Descriptor Format" (9.7.15.5.1.2.2).
#pragma once
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tiled {
namespace cuda {
namespace sm90 {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarrier
// A 64-bit shared-memory barrier with a phase bit and a transaction (byte)
// count.  A phase completes when `count` arrivals AND all expected bytes
// have landed; waiters name the parity of the phase they wait for.

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes the barrier initialisation visible to the async proxy (TMA) and to
// other threads before anyone uses it; follow with __syncthreads().
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` more bytes for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Returns once the phase with parity `parity` has completed.  A freshly
// initialised barrier is in phase 0, so waiting for parity 1 passes at once
// (the "previous" phase counts as complete): producers use that to start
// with every stage free.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---------------------------------------------------------------- TMA
// Bulk tensor copy global -> shared (tile mode), completing on `bar` with
// complete_tx of the box's full byte count (out-of-bounds elements are
// zero-filled and still counted).  `tmap` is the generic address of a
// __grid_constant__ CUtensorMap kernel parameter.  A CTA's own shared::cta
// address is a valid shared::cluster address, so no cluster is needed.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, uint32_t bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Same; with `hint`, under the L2 cache policy `policy` (cp_async.cuh's
// l2_evict_first_policy).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1, int c2,
                                            bool hint, uint64_t policy) {
  if (!hint) return tma_load_3d(dst, tmap, bar, c0, c1, c2);
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}

// TMA store of one box from this CTA's shared memory at `src` to global
// coordinates (c0, c1, c2); out-of-bounds rows/columns are not written.
// Completion is tracked per thread in bulk groups: commit after issuing,
// then wait_read<N> (the shared memory of all but the N newest groups may be
// reused) or wait<N> (their global writes are done).
__device__ __forceinline__ void tma_store_3d(const void* tmap, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(tmap)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int kN>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kN) : "memory");
}
template <int kN>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kN) : "memory");
}

// Same, but the box lands at the same offset in the shared memory of every
// CTA of the cluster named in `cta_mask`, and complete_tx goes to the barrier
// at `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const void* tmap, uint32_t bar, int c0,
                                                      int c1, int c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}

// Same; with `hint`, under the L2 cache policy `policy`.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const void* tmap, uint32_t bar, int c0,
                                                      int c1, int c2, uint16_t cta_mask, bool hint,
                                                      uint64_t policy) {
  if (!hint) return tma_load_3d_multicast(dst, tmap, bar, c0, c1, c2, cta_mask);
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      ".L2::cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6, %7;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask), "l"(policy)
      : "memory");
}

// ---------------------------------------------------------------- clusters
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t num_clusters_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
// Every thread of every CTA in the cluster; release/acquire orders shared-
// memory (barrier init) and makes the peers' shared memory safe to touch.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
// 16 bytes from the shared memory of cluster CTA `rank`, at the same offset
// as `addr` in this CTA (distributed shared memory).
__device__ __forceinline__ float4 ld_shared_cluster_v4(uint32_t addr, uint32_t rank) {
  float4 v;
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %4, %5;\n"
      "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [remote];\n}\n"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(addr), "r"(rank)
      : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ void st_shared_b16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(v) : "memory");
}
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint4 ld_shared_v4_b32(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_v4_b32(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// One arrival on the mbarrier at the same offset as `bar` in cluster CTA `rank`.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// Named CTA barriers (ids 1..15; 0 is __syncthreads).  `count` threads in
// all, a multiple of 32; whole warps execute these.  arrive does not wait.
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later
// async-proxy (TMA store / wgmma) reads of the same bytes.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------- registers
// Warpgroup-wide register re-allocation; needs a register cap at kernel entry
// (__launch_bounds__(threads, 1)) and all 128 threads of the warpgroup.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---------------------------------------------------------------- wgmma
// Shared-memory matrix descriptor (PTX "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4      (address & 0x3FFFF)
//   bits 16-29  leading-dim byte offset >> 4
//   bits 32-45  stride-dim byte offset >> 4
//   bits 49-51  base offset (0: every tile starts on a 1024-byte boundary)
//   bits 62-63  swizzle: 1 = 128-byte
// For 128B swizzle:
//   K-major  : LBO unused (encode 1); SBO = bytes between 8-row groups (1024
//              for dense 128-byte rows).  Stepping K inside the 128-byte row
//              is a plain start-address add (32 bytes per 16 bf16 / 8 tf32).
//   MN-major : LBO = bytes between 64-element MN chunks (each chunk a dense
//              [k][128 bytes] slab); SBO = bytes between 8-row K groups (1024).
//              Stepping K is a start-address add of 16 rows * 128 bytes.
__device__ __forceinline__ uint64_t make_smem_desc_sw128(uint32_t addr, uint32_t lbo_bytes,
                                                         uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

// Must precede the first wgmma that touches accumulator registers after any
// other instruction wrote or read them (start of each k-block batch).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most kPending committed groups of this warpgroup are still
// in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving reads/writes of accumulator registers across
// wgmma issue/wait points (the asm above does not name them).
template <int kN>
__device__ __forceinline__ void fence_accumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma.mma_async, D(f32) (+)= A(smem desc) * B(smem desc), one per element
// type and N (the accumulator has N/2 registers per thread).  `accumulate`
// == 0 overwrites D (first k-step of a tile).  kTA/kTB: 0 = K-major, 1 =
// MN-major (bf16/f16 only; tf32 is K-major only).  The long operand lists
// are spelled once, below, growing from 4 accumulator registers (m64n8)
// to 128 (m64n256).
#define TILED_WGMMA_REGS4 "%0, %1, %2, %3"
#define TILED_WGMMA_REGS8 TILED_WGMMA_REGS4 ", " "%4, %5, %6, %7"
#define TILED_WGMMA_REGS12 TILED_WGMMA_REGS8 ", " "%8, %9, %10, %11"
#define TILED_WGMMA_REGS16 TILED_WGMMA_REGS12 ", " "%12, %13, %14, %15"
#define TILED_WGMMA_REGS20 TILED_WGMMA_REGS16 ", " "%16, %17, %18, %19"
#define TILED_WGMMA_REGS24 TILED_WGMMA_REGS20 ", " "%20, %21, %22, %23"
#define TILED_WGMMA_REGS28 TILED_WGMMA_REGS24 ", " "%24, %25, %26, %27"
#define TILED_WGMMA_REGS32 TILED_WGMMA_REGS28 ", " "%28, %29, %30, %31"
#define TILED_WGMMA_REGS64 \
  TILED_WGMMA_REGS32 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TILED_WGMMA_REGS96 \
  TILED_WGMMA_REGS64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define TILED_WGMMA_REGS128 \
  TILED_WGMMA_REGS96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TILED_WGMMA_ACC4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define TILED_WGMMA_ACC8 TILED_WGMMA_ACC4, "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define TILED_WGMMA_ACC12 TILED_WGMMA_ACC8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])
#define TILED_WGMMA_ACC16 TILED_WGMMA_ACC12, "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TILED_WGMMA_ACC20 TILED_WGMMA_ACC16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19])
#define TILED_WGMMA_ACC24 TILED_WGMMA_ACC20, "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define TILED_WGMMA_ACC28 TILED_WGMMA_ACC24, "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27])
#define TILED_WGMMA_ACC32 TILED_WGMMA_ACC28, "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TILED_WGMMA_ACC64 \
  TILED_WGMMA_ACC32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TILED_WGMMA_ACC96 \
  TILED_WGMMA_ACC64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define TILED_WGMMA_ACC128 \
  TILED_WGMMA_ACC96, \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// The widths of the swapped narrow tiles (144, 160, 176, 200, 208, 224, 232 columns; hopper.h).
#define TILED_WGMMA_REGS72 TILED_WGMMA_REGS64 ", " "%64, %65, %66, %67, %68, %69, %70, %71"
#define TILED_WGMMA_REGS80 TILED_WGMMA_REGS64 ", " "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define TILED_WGMMA_REGS100 TILED_WGMMA_REGS96 ", " "%96, %97, %98, %99"
#define TILED_WGMMA_REGS104 TILED_WGMMA_REGS96 ", " "%96, %97, %98, %99, %100, %101, %102, %103"
#define TILED_WGMMA_REGS116 TILED_WGMMA_REGS104 ", " "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115"
#define TILED_WGMMA_REGS88 TILED_WGMMA_REGS64 ", " "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", " "%80, %81, %82, %83, %84, %85, %86, %87"
#define TILED_WGMMA_REGS112 TILED_WGMMA_REGS104 ", " "%104, %105, %106, %107, %108, %109, %110, %111"
#define TILED_WGMMA_ACC72 TILED_WGMMA_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define TILED_WGMMA_ACC80 \
  TILED_WGMMA_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define TILED_WGMMA_ACC100 TILED_WGMMA_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99])
#define TILED_WGMMA_ACC116 \
  TILED_WGMMA_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115])
#define TILED_WGMMA_ACC88 \
  TILED_WGMMA_ACC64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define TILED_WGMMA_ACC112 \
  TILED_WGMMA_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define TILED_WGMMA_ACC104 TILED_WGMMA_ACC96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])

// The wide one-slab widths (72 ... 112 columns: 36 ... 56 accumulator registers).
#define TILED_WGMMA_REGS36 TILED_WGMMA_REGS32 ", " "%32, %33, %34, %35"
#define TILED_WGMMA_ACC36 TILED_WGMMA_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#define TILED_WGMMA_REGS40 TILED_WGMMA_REGS32 ", " "%32, %33, %34, %35, %36, %37, %38, %39"
#define TILED_WGMMA_ACC40 TILED_WGMMA_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define TILED_WGMMA_REGS44 TILED_WGMMA_REGS32 ", " "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43"
#define TILED_WGMMA_ACC44 TILED_WGMMA_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43])
#define TILED_WGMMA_REGS48 TILED_WGMMA_REGS32 ", " "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define TILED_WGMMA_ACC48 TILED_WGMMA_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define TILED_WGMMA_REGS56 TILED_WGMMA_REGS32 ", " "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55"
#define TILED_WGMMA_ACC56 TILED_WGMMA_ACC32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])

// One wgmma with R = N/2 accumulator registers: operands %0..%R-1 are D,
// then the two descriptors, the accumulate flag (as predicate p), the
// scale-d/scale-a immediates and the two transpose immediates.  TAIL lists
// the operands after D in PTX order (tf32 has no transpose operands: its
// TRANS is "" and kTA/kTB go unused).
#define TILED_WGMMA(TYPES, REGS, ACC, PRED, TAIL)                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                               \
               "wgmma.mma_async.sync.aligned." TYPES " {" REGS "}" TAIL ";\n}\n"                \
               : ACC                                                                           \
               : "l"(a), "l"(b), "r"(acc), "n"(1), "n"(1), "n"(kTA), "n"(kTB))
#define TILED_WGMMA_N256(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS128, TILED_WGMMA_ACC128, "%130", ", %128, %129, p, %131, %132" TRANS)
#define TILED_WGMMA_N192(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS96, TILED_WGMMA_ACC96, "%98", ", %96, %97, p, %99, %100" TRANS)
#define TILED_WGMMA_N232(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS116, TILED_WGMMA_ACC116, "%118", ", %116, %117, p, %119, %120" TRANS)
#define TILED_WGMMA_N224(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS112, TILED_WGMMA_ACC112, "%114", ", %112, %113, p, %115, %116" TRANS)
#define TILED_WGMMA_N208(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS104, TILED_WGMMA_ACC104, "%106", ", %104, %105, p, %107, %108" TRANS)
#define TILED_WGMMA_N200(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS100, TILED_WGMMA_ACC100, "%102", ", %100, %101, p, %103, %104" TRANS)
#define TILED_WGMMA_N176(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS88, TILED_WGMMA_ACC88, "%90", ", %88, %89, p, %91, %92" TRANS)
#define TILED_WGMMA_N160(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS80, TILED_WGMMA_ACC80, "%82", ", %80, %81, p, %83, %84" TRANS)
#define TILED_WGMMA_N144(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS72, TILED_WGMMA_ACC72, "%74", ", %72, %73, p, %75, %76" TRANS)
#define TILED_WGMMA_N128(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS64, TILED_WGMMA_ACC64, "%66", ", %64, %65, p, %67, %68" TRANS)
#define TILED_WGMMA_N64(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS32, TILED_WGMMA_ACC32, "%34", ", %32, %33, p, %35, %36" TRANS)

// The one-slab widths (8, 16, 24, 32, 40, 48, 56 columns; hopper.h's kSlabWidths; 64 is above).
#define TILED_WGMMA_N8(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS4, TILED_WGMMA_ACC4, "%6", ", %4, %5, p, %7, %8" TRANS)
#define TILED_WGMMA_N16(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS8, TILED_WGMMA_ACC8, "%10", ", %8, %9, p, %11, %12" TRANS)
#define TILED_WGMMA_N24(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS12, TILED_WGMMA_ACC12, "%14", ", %12, %13, p, %15, %16" TRANS)
#define TILED_WGMMA_N32(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS16, TILED_WGMMA_ACC16, "%18", ", %16, %17, p, %19, %20" TRANS)
#define TILED_WGMMA_N40(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS20, TILED_WGMMA_ACC20, "%22", ", %20, %21, p, %23, %24" TRANS)
#define TILED_WGMMA_N48(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS24, TILED_WGMMA_ACC24, "%26", ", %24, %25, p, %27, %28" TRANS)
#define TILED_WGMMA_N56(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS28, TILED_WGMMA_ACC28, "%30", ", %28, %29, p, %31, %32" TRANS)

// The wide one-slab widths (hopper.h's kSlabWidths past 64; 128 is above).
#define TILED_WGMMA_N72(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS36, TILED_WGMMA_ACC36, "%38", ", %36, %37, p, %39, %40" TRANS)
#define TILED_WGMMA_N80(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS40, TILED_WGMMA_ACC40, "%42", ", %40, %41, p, %43, %44" TRANS)
#define TILED_WGMMA_N88(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS44, TILED_WGMMA_ACC44, "%46", ", %44, %45, p, %47, %48" TRANS)
#define TILED_WGMMA_N96(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS48, TILED_WGMMA_ACC48, "%50", ", %48, %49, p, %51, %52" TRANS)
#define TILED_WGMMA_N112(TYPES, TRANS) \
  TILED_WGMMA(TYPES, TILED_WGMMA_REGS56, TILED_WGMMA_ACC56, "%58", ", %56, %57, p, %59, %60" TRANS)

// Compile-time selection by element type and N: Wgmma<T, N>::run<kTA, kTB>.
template <class T, int kN>
struct Wgmma;
#define TILED_WGMMA_SPEC(T, N, SHAPE_TYPES, TRANS)                                              \
  template <>                                                                                  \
  struct Wgmma<T, N> {                                                                         \
    template <int kTA, int kTB>                                                                \
    __device__ __forceinline__ static void run(float (&d)[N / 2], uint64_t a, uint64_t b, int acc) { \
      static_assert(!std::is_same<T, float>::value || (kTA == 0 && kTB == 0),                  \
                    "tf32 wgmma reads K-major operands only");                                 \
      TILED_WGMMA_N##N(SHAPE_TYPES, TRANS);                                                    \
    }                                                                                          \
  };

// Both 16-bit types, N given once (TRANS: the two transpose operands' numbers).
#define TILED_WGMMA_SPEC16(N, TRANS)                                        \
  TILED_WGMMA_SPEC(__nv_bfloat16, N, "m64n" #N "k16.f32.bf16.bf16", TRANS) \
  TILED_WGMMA_SPEC(__half, N, "m64n" #N "k16.f32.f16.f16", TRANS)
TILED_WGMMA_SPEC16(256, ", %133, %134")
TILED_WGMMA_SPEC16(192, ", %101, %102")
TILED_WGMMA_SPEC16(232, ", %121, %122")
TILED_WGMMA_SPEC16(224, ", %117, %118")
TILED_WGMMA_SPEC16(208, ", %109, %110")
TILED_WGMMA_SPEC16(200, ", %105, %106")
TILED_WGMMA_SPEC16(176, ", %93, %94")
TILED_WGMMA_SPEC16(160, ", %85, %86")
TILED_WGMMA_SPEC16(144, ", %77, %78")
TILED_WGMMA_SPEC16(128, ", %69, %70")
TILED_WGMMA_SPEC16(64, ", %37, %38")
TILED_WGMMA_SPEC16(72, ", %41, %42")
TILED_WGMMA_SPEC16(80, ", %45, %46")
TILED_WGMMA_SPEC16(88, ", %49, %50")
TILED_WGMMA_SPEC16(96, ", %53, %54")
TILED_WGMMA_SPEC16(112, ", %61, %62")
TILED_WGMMA_SPEC16(56, ", %33, %34")
TILED_WGMMA_SPEC16(48, ", %29, %30")
TILED_WGMMA_SPEC16(40, ", %25, %26")
TILED_WGMMA_SPEC16(32, ", %21, %22")
TILED_WGMMA_SPEC16(24, ", %17, %18")
TILED_WGMMA_SPEC16(16, ", %13, %14")
TILED_WGMMA_SPEC16(8, ", %9, %10")
TILED_WGMMA_SPEC(float, 256, "m64n256k8.f32.tf32.tf32", "")
TILED_WGMMA_SPEC(float, 192, "m64n192k8.f32.tf32.tf32", "")
TILED_WGMMA_SPEC(float, 128, "m64n128k8.f32.tf32.tf32", "")
TILED_WGMMA_SPEC(float, 64, "m64n64k8.f32.tf32.tf32", "")

// wgmma.mma_async with A from registers (tf32 only): D(f32) (+)= A * B(smem
// desc, K-major).  The A fragment of m64nNk8 for thread (warp w, lane l) of
// the warpgroup, g = l / 4, t = l % 4: a[0] = A[16w + g][t], a[1] =
// A[16w + g + 8][t], a[2] = A[16w + g][t + 4], a[3] = A[16w + g + 8][t + 4]
// (the same as mma.sync m16n8k8's per warp).  The registers are read
// asynchronously: they must not be written until the wgmma has completed
// (wgmma_wait_group), and a wgmma_fence must separate their writes from it.
// Operands: D, the four A registers, B's descriptor, the accumulate flag
// (predicate p) and the scale-d/scale-a immediates.
#define TILED_WGMMA_RS(TYPES, REGS, ACC, PRED, TAIL)                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                         \
               "wgmma.mma_async.sync.aligned." TYPES " {" REGS "}" TAIL ";\n}\n"                          \
               : ACC                                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc), "n"(1), "n"(1))
template <int kN>
struct WgmmaRegsTf32;
#define TILED_WGMMA_RS_SPEC(N, R, PRED, TAIL)                                                           \
  template <>                                                                                            \
  struct WgmmaRegsTf32<N> {                                                                              \
    __device__ __forceinline__ static void run(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int acc) { \
      TILED_WGMMA_RS("m64n" #N "k8.f32.tf32.tf32", TILED_WGMMA_REGS##R, TILED_WGMMA_ACC##R, PRED, TAIL);  \
    }                                                                                                    \
  };
TILED_WGMMA_RS_SPEC(256, 128, "%133", ", {%128, %129, %130, %131}, %132, p, %134, %135")
TILED_WGMMA_RS_SPEC(192, 96, "%101", ", {%96, %97, %98, %99}, %100, p, %102, %103")
TILED_WGMMA_RS_SPEC(128, 64, "%69", ", {%64, %65, %66, %67}, %68, p, %70, %71")
TILED_WGMMA_RS_SPEC(64, 32, "%37", ", {%32, %33, %34, %35}, %36, p, %38, %39")
#undef TILED_WGMMA_RS_SPEC
#undef TILED_WGMMA_RS

#undef TILED_WGMMA_SPEC
#undef TILED_WGMMA_SPEC16
#undef TILED_WGMMA_N64
#undef TILED_WGMMA_N128
#undef TILED_WGMMA_N192
#undef TILED_WGMMA_N208
#undef TILED_WGMMA_N224
#undef TILED_WGMMA_N176
#undef TILED_WGMMA_N232
#undef TILED_WGMMA_N160
#undef TILED_WGMMA_N200
#undef TILED_WGMMA_N144
#undef TILED_WGMMA_N24
#undef TILED_WGMMA_N32
#undef TILED_WGMMA_N40
#undef TILED_WGMMA_N48
#undef TILED_WGMMA_N56
#undef TILED_WGMMA_N256
#undef TILED_WGMMA_N72
#undef TILED_WGMMA_N80
#undef TILED_WGMMA_N88
#undef TILED_WGMMA_N96
#undef TILED_WGMMA_N112
#undef TILED_WGMMA_REGS36
#undef TILED_WGMMA_ACC36
#undef TILED_WGMMA_REGS40
#undef TILED_WGMMA_ACC40
#undef TILED_WGMMA_REGS44
#undef TILED_WGMMA_ACC44
#undef TILED_WGMMA_REGS48
#undef TILED_WGMMA_ACC48
#undef TILED_WGMMA_REGS56
#undef TILED_WGMMA_ACC56
#undef TILED_WGMMA
#undef TILED_WGMMA_ACC128
#undef TILED_WGMMA_ACC96
#undef TILED_WGMMA_ACC104
#undef TILED_WGMMA_ACC112
#undef TILED_WGMMA_ACC88
#undef TILED_WGMMA_ACC116
#undef TILED_WGMMA_ACC100
#undef TILED_WGMMA_ACC80
#undef TILED_WGMMA_ACC72
#undef TILED_WGMMA_ACC64
#undef TILED_WGMMA_REGS128
#undef TILED_WGMMA_REGS96
#undef TILED_WGMMA_REGS104
#undef TILED_WGMMA_REGS112
#undef TILED_WGMMA_REGS88
#undef TILED_WGMMA_REGS116
#undef TILED_WGMMA_REGS100
#undef TILED_WGMMA_REGS80
#undef TILED_WGMMA_REGS72
#undef TILED_WGMMA_REGS64
#undef TILED_WGMMA_REGS32
#undef TILED_WGMMA_ACC32
#undef TILED_WGMMA_REGS12
#undef TILED_WGMMA_ACC12
#undef TILED_WGMMA_REGS16
#undef TILED_WGMMA_ACC16
#undef TILED_WGMMA_REGS20
#undef TILED_WGMMA_ACC20
#undef TILED_WGMMA_REGS24
#undef TILED_WGMMA_ACC24
#undef TILED_WGMMA_REGS28
#undef TILED_WGMMA_ACC28

#endif  // __CUDA_ARCH__ && __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace sm90
}  // namespace cuda
}  // namespace tiled
