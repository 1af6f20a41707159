"""ptxas's own report on the sm90 kernels (csrc/cuda/hopper/gemm_sm90.cuh),
compiled here for sm_90a without a GPU: no wgmma serialisation (C7514: ptxas
makes every wgmma wait for the previous one when it sees the accumulators
read inside the pipeline; docs/hopper.md, round 33, where an epilogue change
did that to the tf32 kernels and cost up to 30%) and no register spills, for
a set of configurations covering both dtype widths, every tile family the
dispatch uses (cooperative, ping-pong, cluster pair, split-K, stream-K
capable, swapped-only widths, one-slab) and both A layouts of tf32.
Compiled once per CI run (marker `sources`); skips where nvcc is missing."""
import os
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.sources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sm90Config template arguments: T, BN, A M-major, B N-major, cluster, ping-pong, split-K, C^T, one-slab.
CONFIGS = [
    "float, 128, false, false",
    "float, 64, false, false",
    "float, 256, false, false",
    "float, 128, true, false",
    "float, 256, false, false, 2",
    "float, 128, false, false, 1, true",
    "float, 128, false, false, 1, false, true",
    "__nv_bfloat16, 128, false, true",
    "__nv_bfloat16, 256, false, false, 2",
    "__nv_bfloat16, 128, true, false, 1, true",
    "__half, 64, false, false, 1, false, true",
    "__nv_bfloat16, 160, true, true, 1, false, false, true",
    "__nv_bfloat16, 96, true, false, 1, false, false, true, true",
    "__half, 32, false, false, 1, false, false, false, true",
]


def test_sm90_kernels_not_serialised_nor_spilling(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    grid = "const __grid_constant__ CUtensorMap"
    src = ['#include "cuda/hopper/gemm_sm90.cuh"', "namespace tiled { namespace cuda { namespace sm90 {"]
    src += [f"template __global__ void sm90_gemm_kernel<Sm90Config<{c}>>({grid}, {grid}, {grid}, const KernelArgs);"
            for c in CONFIGS]
    src += ["}}}"]
    (tmp_path / "kernels.cu").write_text("\n".join(src) + "\n")
    got = subprocess.run([nvcc, "-std=c++17", "-O3", "-arch=sm_90a", "-I", "csrc", "-Xptxas", "-v", "-cubin",
                          "-o", str(tmp_path / "kernels.cubin"), str(tmp_path / "kernels.cu")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = got.stdout + got.stderr
    assert got.returncode == 0, out[-4000:]
    entries = re.findall(r"Compiling entry function '(\w+)'", out)
    assert len(entries) == len(CONFIGS), out[-4000:]
    serialised = [line for line in out.splitlines() if "C7514" in line]
    assert not serialised, "\n".join(serialised)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out)
    assert len(spills) == len(CONFIGS) and all(s == ("0", "0") for s in spills), out[-4000:]
