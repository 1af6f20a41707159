// Host-only check of which GPUs a build runs on (csrc/cuda/build_archs.h):
// the rules for SASS, arch-specific code and PTX, the error's text, and the
// parsing of setup.py's macros (defined here as setup.py would pass them,
// one list empty).  Prints "ok" or each violation.  Built and run by
// tests/test_build.py, so CI checks the decision without a GPU.
#define TILED_SASS_ARCHS
#define TILED_SASS_ARCHS_EXACT 90
#define TILED_PTX_ARCHS 80, 86

#include <cstdio>
#include <string>

#include "cuda/build_archs.h"

using namespace tiled::cuda;

namespace {

int failures = 0;

void expect(bool cond, const char* what) {
  if (!cond) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

BuildArchs archs(std::vector<int> sass, std::vector<int> exact, std::vector<int> ptx) {
  BuildArchs b;
  b.known = true;
  b.sass = std::move(sass);
  b.sass_exact = std::move(exact);
  b.ptx = std::move(ptx);
  return b;
}

}  // namespace

int main() {
  // The default build: "8.0+PTX;9.0a".
  const BuildArchs def = archs({80}, {90}, {80});
  expect(build_runs_on(def, 8, 0), "default: A100 (8.0)");
  expect(build_runs_on(def, 8, 6), "default: sm_86 runs sm_80 SASS");
  expect(build_runs_on(def, 8, 9), "default: sm_89 runs sm_80 SASS");
  expect(build_runs_on(def, 9, 0), "default: H100 (sm_90a)");
  expect(build_runs_on(def, 10, 0), "default: sm_100 JITs compute_80");
  expect(build_runs_on(def, 12, 0), "default: sm_120 JITs compute_80");
  expect(!build_runs_on(def, 7, 5), "default: not sm_75");
  expect(!build_runs_on(def, 7, 0), "default: not sm_70");
  // "9.0a" alone (the old default): the H100 only.
  const BuildArchs hopper = archs({}, {90}, {});
  expect(build_runs_on(hopper, 9, 0), "9.0a: H100");
  expect(!build_runs_on(hopper, 8, 0), "9.0a: not an A100");
  expect(!build_runs_on(hopper, 10, 0), "9.0a: sm_90a code does not run on sm_100");
  expect(!build_runs_on(hopper, 9, 1), "9.0a: arch-specific code runs on 9.0 only");
  // SASS runs within its major version, from its minor up; never across majors.
  const BuildArchs ampere = archs({86}, {}, {});
  expect(!build_runs_on(ampere, 8, 0), "8.6: not on 8.0");
  expect(build_runs_on(ampere, 8, 6) && build_runs_on(ampere, 8, 9), "8.6: on 8.6, 8.9");
  expect(!build_runs_on(ampere, 9, 0), "8.6 SASS: not on 9.0");
  // compute_90a PTX (setup.py files it as exact): the 9.0 only.
  const BuildArchs ptx90a = archs({}, {90}, {});
  expect(!build_runs_on(ptx90a, 10, 0), "compute_90a: not on sm_100");
  // Unknown (built without setup.py's macros): no check.
  expect(build_runs_on(BuildArchs{}, 7, 5), "unknown build: no check");

  // The message names the GPU, its capability and the build's archs.
  const std::string m = build_mismatch_message(def, "Tesla T4", 7, 5);
  expect(m.find("Tesla T4") != std::string::npos, "message names the GPU");
  expect(m.find("compute capability 7.5") != std::string::npos, "message names the capability");
  expect(m.find("sm_80, sm_90a, compute_80") != std::string::npos, "message lists the archs");
  expect(m.find("TORCH_CUDA_ARCH_LIST") != std::string::npos, "message says how to rebuild");
  expect(build_mismatch_message(def, "NVIDIA H100 80GB HBM3", 9, 0).empty(), "no message where it runs");
  const std::string a100 = build_mismatch_message(hopper, "NVIDIA A100-SXM4-80GB", 8, 0);
  expect(a100.find("NVIDIA A100-SXM4-80GB") != std::string::npos && a100.find("built for sm_90a") != std::string::npos,
         "A100 on a 9.0a-only build");

  // setup.py's macros, one list empty.
  const BuildArchs parsed = compiled_archs();
  expect(parsed.known, "macros: known");
  expect(parsed.sass.empty(), "macros: empty SASS list");
  expect(parsed.sass_exact == std::vector<int>{90}, "macros: exact list");
  expect(parsed.ptx == (std::vector<int>{80, 86}), "macros: PTX list");
  expect(build_archs_text(parsed) == "sm_90a, compute_80, compute_86", "macros: text");

  if (failures == 0) std::printf("ok\n");
  return failures == 0 ? 0 : 1;
}
