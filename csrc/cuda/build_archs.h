// Which GPUs this build's device code runs on, from the architectures
// setup.py compiled for (TORCH_CUDA_ARCH_LIST).  Checked at the first call
// on a device (gemm_cuda.cpp, through dispatch.h's build_mismatch), so a GPU
// with nothing compiled for it gets an error naming it and the build's
// archs instead of the CUDA runtime's "no kernel image is available".
// Torch-free, host only; tests/host/build_archs.cpp checks the rules.
#pragma once
#include <string>
#include <vector>

namespace tiled {
namespace cuda {

// Architectures as 10 * major + minor (80: sm_80, 90: sm_90, 100: sm_100).
struct BuildArchs {
  bool known = false;            // false: built without setup.py's macros (no check)
  std::vector<int> sass;         // sm_XY (and family sm_XYf): runs on X.Z for Z >= Y
  std::vector<int> sass_exact;   // sm_XYa / compute_XYa: runs on X.Y only
  std::vector<int> ptx;          // compute_XY: JIT-compiled by the driver on X.Y and later
};

// Whether a GPU of compute capability major.minor runs this build's kernels:
// SASS of the same major version and an equal or lower minor, arch-specific
// code of exactly its version, or PTX of its version or lower.
inline bool build_runs_on(const BuildArchs& b, int major, int minor) {
  if (!b.known) return true;
  const int dev = 10 * major + minor;
  for (int a : b.sass)
    if (a / 10 == major && a % 10 <= minor) return true;
  for (int a : b.sass_exact)
    if (a == dev) return true;
  for (int a : b.ptx)
    if (a <= dev) return true;
  return false;
}

// "sm_80, sm_90a, compute_80".
inline std::string build_archs_text(const BuildArchs& b) {
  std::string out;
  auto add = [&](const char* prefix, int a, const char* suffix) {
    if (!out.empty()) out += ", ";
    out += prefix + std::to_string(a) + suffix;
  };
  for (int a : b.sass) add("sm_", a, "");
  for (int a : b.sass_exact) add("sm_", a, "a");
  for (int a : b.ptx) add("compute_", a, "");
  return out.empty() ? "no GPU architecture" : out;
}

// Empty when the GPU runs this build, else the error to raise.
inline std::string build_mismatch_message(const BuildArchs& b, const char* gpu, int major, int minor) {
  if (build_runs_on(b, major, minor)) return std::string();
  const std::string cap = std::to_string(major) + "." + std::to_string(minor);
  return "this build of torch_tiled_gemm has no kernels for the " + std::string(gpu) + " (compute capability " + cap +
         "): it was built for " + build_archs_text(b) + ". Rebuild it with TORCH_CUDA_ARCH_LIST including \"" + cap +
         "\" (e.g. TORCH_CUDA_ARCH_LIST=\"" + cap + "\" pip install --no-build-isolation .)" +
         (major < 8 ? "; its tensor-core kernels need compute capability 8.0 or later." : ".");
}

// The architectures this translation unit's build compiled for, from
// setup.py's macros: comma-separated lists of 10 * major + minor.
inline BuildArchs compiled_archs() {
  BuildArchs b;
#if defined(TILED_SASS_ARCHS) && defined(TILED_SASS_ARCHS_EXACT) && defined(TILED_PTX_ARCHS)
  b.known = true;
  for (int a : {0, TILED_SASS_ARCHS})
    if (a > 0) b.sass.push_back(a);
  for (int a : {0, TILED_SASS_ARCHS_EXACT})
    if (a > 0) b.sass_exact.push_back(a);
  for (int a : {0, TILED_PTX_ARCHS})
    if (a > 0) b.ptx.push_back(a);
#endif
  return b;
}

}  // namespace cuda
}  // namespace tiled
