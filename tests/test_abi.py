"""One binary for every torch from 2.10 on (CUDA or CPU-only): built on
PyTorch's stable ABI (C shims, header-only types) and Python's limited API.
These tests read the built library and the sources; the proof that one wheel
runs under several torch versions is .ci/run's second suite (and
benchmarks/results/abi-*.json)."""
import os
import re
import shutil
import subprocess

import pytest
import torch

import torch_tiled_gemm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SO = torch_tiled_gemm._C.__file__

OPS = ("gemm", "linear", "gemm_ladder", "gemm_epilogue", "linear_act", "gated_linear", "gemm_kernel_name",
       "gemm_tuning")


def _undefined_symbols():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not on PATH")
    out = subprocess.run([nm, "-D", "--undefined-only", SO], check=True, capture_output=True, text=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def test_library_is_abi3():
    assert SO.endswith(".abi3.so"), SO


def test_only_c_shims_from_torch():
    """No C++ symbol of torch (c10::, at::, torch::, libtorch_python's THP* or
    pybind11): their mangled names change between releases.  The C shims
    (aoti_torch_*, torch_*) and CPython's limited API are all it may use."""
    bad = []
    for sym in _undefined_symbols():
        name = sym.split("@")[0]
        if re.search(r"(^_ZN?K?\d*(c10|at|torch|pybind11)\d)|(N3c10|N2at|N5torch|N8pybind11)|^THP", name):
            bad.append(name)
    assert not bad, "unstable torch symbols: " + ", ".join(sorted(bad)[:20])
    assert any(s.startswith(("aoti_torch_", "torch_")) for s in _undefined_symbols())


def test_no_unstable_headers_in_sources():
    pattern = re.compile(r'#\s*include\s*[<"](ATen/|c10/|torch/(library|extension|all|autograd|python)\.h|'
                         r"torch/csrc/api/|pybind11/)")
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "csrc")):
        for f in files:
            path = os.path.join(folder, f)
            for n, line in enumerate(open(path, errors="replace"), 1):
                if pattern.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_target_version_is_2_10():
    setup = open(os.path.join(ROOT, "setup.py")).read()
    assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in setup
    assert 'install_requires=["torch>=2.10"]' in setup
    assert '"torch>=2.10"' in open(os.path.join(ROOT, "pyproject.toml")).read()


def test_registrations():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for op in OPS:
        assert has(f"tiled::{op}", "CPU"), op
    for op in ("gemm", "linear", "linear_act", "gated_linear"):
        assert has(f"tiled::{op}", "Autograd"), op
    for op in ("gemm", "linear"):
        assert has(f"tiled::{op}", "AutocastCPU") and has(f"tiled::{op}", "AutocastCUDA"), op


def test_loads_without_torch_cuda_libraries():
    """The same wheel serves CPU-only torch builds: nothing of torch's CUDA
    libraries (or a shared CUDA runtime) is needed at load time."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not on PATH")
    out = subprocess.run([readelf, "-d", SO], check=True, capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert needed, out
    bad = [lib for lib in needed if re.match(r"lib(cudart|cuda|torch_cuda|c10_cuda|torch_python)", lib)]
    assert not bad, f"needed at load time: {bad}"
