// ldmatrix: four 8x8 matrices of 16-bit elements from shared memory into a
// warp's registers (sm_75+), shared by the mma.sync kernels (skinny/, sm80/).
#pragma once
#include <cstdint>

namespace tiled {
namespace cuda {

// Lane i names the row address of matrix i / 8; register j receives matrix j.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// Same, each matrix transposed on the way (for M/N-major tiles).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

}  // namespace cuda
}  // namespace tiled
