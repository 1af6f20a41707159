"""Build torch_tiled_gemm.

A CUDA build (CPU + CUDA kernels) when torch is a CUDA build and nvcc is
found, a CPU-only build otherwise; TILED_FORCE_CPU=1 forces the latter.
GPU architectures come from TORCH_CUDA_ARCH_LIST, default "8.0+PTX;9.0a":
SASS for sm_80 (A100; also runs on sm_86 / sm_89) and sm_90a (the Hopper
tensor-core kernels need the arch-specific target), plus compute_80 PTX that
the driver compiles for newer GPUs (sm_100, sm_120: the sm80 family runs
there).  ("9.0a+PTX" would give compute_90a PTX, which only an sm_90 can
use.)  The build's archs are passed to the code (TILED_*_ARCHS) so that a GPU
with nothing compiled for it gets a clear error (csrc/cuda/build_archs.h).
"""
import glob
import os
import re
import sys

from setuptools import setup


def _find_cuda_home():
    """torch looks for CUDA_HOME next to `nvcc`; a wrapper nvcc on the PATH
    (e.g. /usr/local/bin/nvcc) hides the toolkit, so look behind it."""
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return
    import shutil

    nvcc = shutil.which("nvcc")
    candidates = []
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates += ["/usr/local/cuda"]
    for home in candidates:
        if os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
            os.environ["CUDA_HOME"] = home
            return


_find_cuda_home()

import torch  # noqa: E402
from torch.utils import cpp_extension  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))


def rel(paths):
    return sorted(os.path.relpath(p, ROOT) for p in paths)


def want_cuda():
    if os.environ.get("TILED_FORCE_CPU", "0") == "1":
        return False
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


cpu_sources = rel(glob.glob(os.path.join(ROOT, "csrc", "*.cpp")) + glob.glob(os.path.join(ROOT, "csrc", "cpu", "*.cpp")))
# PyTorch's stable ABI, targeting torch 2.10: the binary uses only the
# C shims and header-only types of that version, so it loads into every torch
# from 2.10 on, whichever torch's headers built it (csrc/torch_stable.h).
TORCH_TARGET = "-DTORCH_TARGET_VERSION=0x020a000000000000"
# Hidden visibility: the stable headers' types are hidden, and nothing but
# PyInit__C needs exporting.
cxx_flags = ["-O3", "-fopenmp-simd", "-fvisibility=hidden", TORCH_TARGET]  # C++ standard: torch's
link_flags = []

# Torch-free CUDA sources compiled with `-Xptxas -O1` into objects of their
# own (BuildExt below), because ptxas's -O3 schedule reorders their unrolled
# FFMAs into a slower order (csrc/cuda/ladder/simt_fast_large.cu;
# docs/ladder.md, round 7).  Only these files: the tensor-core kernels want -O3.
PTXAS_O1_SOURCES = ["csrc/cuda/ladder/simt_fast_large.cu"]

DEFAULT_CUDA_ARCH_LIST = "8.0+PTX;9.0a"


def arch_macros(gencode_flags):
    """-D flags naming the archs of torch's -gencode flags, for
    csrc/cuda/build_archs.h: TILED_SASS_ARCHS (sm_XY, sm_XYf), TILED_SASS_ARCHS_EXACT
    (sm_XYa, compute_XYa: that GPU only), TILED_PTX_ARCHS (compute_XY), each a
    comma-separated list of 10 * major + minor (possibly empty)."""
    sass, exact, ptx = [], [], []
    for flag in gencode_flags:
        m = re.search(r"code=(sm|compute)_(\d+)([af]?)$", flag)
        if not m:
            continue
        arch, kind, suffix = int(m.group(2)), m.group(1), m.group(3)
        target = exact if suffix == "a" else sass if kind == "sm" else ptx
        if arch not in target:
            target.append(arch)
    return ["-DTILED_SASS_ARCHS=" + ",".join(map(str, sorted(sass))),
            "-DTILED_SASS_ARCHS_EXACT=" + ",".join(map(str, sorted(exact))),
            "-DTILED_PTX_ARCHS=" + ",".join(map(str, sorted(ptx)))]

if want_cuda():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_CUDA_ARCH_LIST)
    arch_list = os.environ["TORCH_CUDA_ARCH_LIST"]
    cuda_sources = rel(
        glob.glob(os.path.join(ROOT, "csrc", "cuda", "**", "*.cu"), recursive=True)
        + glob.glob(os.path.join(ROOT, "csrc", "cuda", "**", "*.cpp"), recursive=True)
    )
    cuda_sources = [s for s in cuda_sources if s not in PTXAS_O1_SOURCES]
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo", TORCH_TARGET]
    if "9.0a" in arch_list:
        nvcc_flags.append("-DTILED_WITH_SM90A")
    nvcc_flags += arch_macros(cpp_extension._get_cuda_arch_flags())
    if os.environ.get("TILED_PTXAS_VERBOSE") == "1":
        nvcc_flags.append("-Xptxas=-v")
    ext = cpp_extension.CUDAExtension(
        "torch_tiled_gemm._C",
        cpu_sources + cuda_sources,
        extra_compile_args={"cxx": cxx_flags + ["-DTILED_WITH_CUDA"], "nvcc": nvcc_flags},
        extra_link_args=link_flags,
        py_limited_api=True,
    )
    # The CUDA runtime linked statically, and nothing of torch's CUDA libraries
    # at load time (csrc/cuda/gemm_cuda.cpp looks up the one shim it needs):
    # the same binary then loads into a CPU-only torch too (docs/abi.md).
    ext.libraries = [lib for lib in ext.libraries if lib not in ("cudart", "c10_cuda", "torch_cuda")]
    ext.libraries += ["cudart_static", "rt", "dl", "pthread"]
    ext.ptxas_o1_sources = PTXAS_O1_SOURCES
    ext.ptxas_o1_flags = nvcc_flags
else:
    ext = cpp_extension.CppExtension(
        "torch_tiled_gemm._C",
        cpu_sources,
        extra_compile_args={"cxx": cxx_flags},
        extra_link_args=link_flags,
        py_limited_api=True,
    )


class BuildExt(cpp_extension.BuildExtension.with_options(use_ninja=True)):
    """torch's BuildExtension, plus the PTXAS_O1_SOURCES: each compiled by
    nvcc with the extension's nvcc flags, its architectures and `-Xptxas
    -O1` into an object that is linked in (rebuilt when it is older than any
    file under csrc/)."""

    def finalize_options(self):
        super().finalize_options()
        # One object folder for every build of this checkout: the editable
        # install builds in a fresh temporary folder otherwise, and a wheel
        # built after it (the README's Tests command, CI) would compile the
        # CUDA kernels again; ninja reuses what is up to date.
        self.build_temp = os.path.join(ROOT, "build", "objects")

    def build_extension(self, ext):
        for src in getattr(ext, "ptxas_o1_sources", []):
            obj = self._ptxas_o1_object(src, ext.ptxas_o1_flags)
            if obj not in (ext.extra_objects or []):  # (a second build of the same extension)
                ext.extra_objects = list(ext.extra_objects or []) + [obj]
        super().build_extension(ext)

    def _ptxas_o1_object(self, src, flags):
        import subprocess

        obj = os.path.join(os.path.abspath(self.build_temp), "ptxas_o1", os.path.splitext(src)[0] + ".o")
        deps = [p for p in glob.glob(os.path.join(ROOT, "csrc", "**", "*"), recursive=True) if os.path.isfile(p)]
        if os.path.exists(obj) and all(os.path.getmtime(p) <= os.path.getmtime(obj) for p in deps):
            return obj
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        cmd = [os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc"), "-c", os.path.join(ROOT, src), "-o", obj]
        cmd += flags + cpp_extension._get_cuda_arch_flags() + ["-std=c++17", "-Xcompiler", "-fPIC", "-Xptxas", "-O1"]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        return obj


setup(
    name="torch_tiled_gemm",
    version="0.1.0",
    description="Hand-written tiled GEMM as a PyTorch custom operator (CPU + CUDA, autograd, torch.compile)",
    packages=["torch_tiled_gemm"],
    package_data={"torch_tiled_gemm": ["tables/*.tsv"]},
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExt},
    # Python's limited API (abi3; torch defines Py_LIMITED_API for 3.10): one
    # binary for every Python from 3.10 on.
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    python_requires=">=3.10",
    install_requires=["torch>=2.10"],
)
