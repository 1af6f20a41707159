"""The build itself: a CUDA build of torch must give a CUDA build of the extension."""
import pytest
import torch

import torch_tiled_gemm  # noqa: F401


def test_cuda_kernels_compiled_in_when_torch_has_cuda():
    has = torch._C._dispatch_has_kernel_for_dispatch_key("tiled::gemm", "CUDA")
    if torch.version.cuda is not None:
        assert has, "torch is a CUDA build but the extension has no CUDA kernel (built CPU-only?)"


def test_schema():
    schema = str(torch.ops.tiled.gemm.default._schema)
    assert schema == "tiled::gemm(Tensor a, Tensor b, Tensor? bias=None) -> Tensor"
    for key in ("CPU", "Autograd", "AutocastCUDA", "AutocastCPU"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("tiled::gemm", key), key


# ------------------------------------------------- which GPUs the build runs on

def _setup_py():
    """setup.py's DEFAULT_CUDA_ARCH_LIST and arch_macros, read without running
    setup()."""
    import ast
    import os
    import re

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "setup.py")
    tree = ast.parse(open(path).read())
    keep = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name == "arch_macros")
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "DEFAULT_CUDA_ARCH_LIST" for t in n.targets))]
    ns = {"re": re}
    exec(compile(ast.Module(keep, []), path, "exec"), ns)
    return ns


def test_default_arch_list_is_sass_80_90a_and_ptx_80(monkeypatch):
    from torch.utils import cpp_extension

    ns = _setup_py()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", ns["DEFAULT_CUDA_ARCH_LIST"])
    flags = cpp_extension._get_cuda_arch_flags()
    assert "-gencode=arch=compute_80,code=sm_80" in flags, flags
    assert "-gencode=arch=compute_90a,code=sm_90a" in flags, flags
    assert "-gencode=arch=compute_80,code=compute_80" in flags, flags  # PTX newer GPUs JIT
    assert not any("code=compute_90a" in f for f in flags), flags  # would run on sm_90 only
    assert ns["arch_macros"](flags) == ["-DTILED_SASS_ARCHS=80", "-DTILED_SASS_ARCHS_EXACT=90",
                                        "-DTILED_PTX_ARCHS=80"]
    assert ns["arch_macros"](["-gencode=arch=compute_90a,code=sm_90a"]) == [
        "-DTILED_SASS_ARCHS=", "-DTILED_SASS_ARCHS_EXACT=90", "-DTILED_PTX_ARCHS="]


@pytest.mark.sources
def test_build_archs_decision(tmp_path_factory):
    """csrc/cuda/build_archs.h, host-only (tests/host/build_archs.cpp): which
    GPUs each arch list runs on, the error's text, setup.py's macros."""
    import subprocess

    from conftest import build_host_driver

    exe = build_host_driver(tmp_path_factory, "build_archs", ["tests/host/build_archs.cpp"])
    got = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stdout + got.stderr
