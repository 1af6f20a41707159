"""Shared helpers: devices, float64 references, tolerances, layouts, poisoning."""
import contextlib
import os
import shutil
import subprocess

import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
LAYOUTS = ["NN", "NT", "TN", "TT"]

# ||out - ref|| / ||ref|| bounds against a float64 reference (fp32 strict; tf32
# has its own).  bf16 keeps 8 mantissa bits, fp16 11: the output rounding alone
# is ~2e-3 / ~3e-4 relative.
REL_TOL = {torch.float32: 2e-5, torch.float64: 1e-13, torch.float16: 2e-3, torch.bfloat16: 1e-2}
TF32_TOL = 5e-3

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_host_driver(tmp_path_factory, name, sources):
    """Builds a host-only test driver from `sources` (paths under the repo)
    with nvcc against csrc/ as an sm_90a build (TILED_WITH_SM90A), no device
    code for a real GPU, so it runs in CI without one; skips where nvcc is
    missing.  Returns the executable's path."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    exe = str(tmp_path_factory.mktemp(name) / name)
    cmd = [nvcc, "-std=c++17", "-DTILED_WITH_SM90A", "-I", os.path.join(ROOT, "csrc"), "-x", "cu",
           *(os.path.join(ROOT, s) for s in sources), "-o", exe, "-gencode=arch=compute_90a,code=compute_90a"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return exe


def pytest_configure(config):
    # Strict fp32 on the GPU unless a test opts in to TF32 explicitly.
    torch.backends.cuda.matmul.allow_tf32 = False


def rand(shape, dtype, device, gen=None):
    return torch.randn(shape, dtype=torch.float32, device=device, generator=gen).to(dtype)


def as_layout(t, layout_char):
    """Same values, the requested layout in memory: 'N' row-major, 'T' column-major view."""
    if layout_char == "N":
        return t.contiguous()
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def make_operands(M, N, K, dtype, device, layout="NN", batch=None, seed=None):
    gen = None
    if seed is not None:
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
    lead = () if batch is None else (batch,)
    a = as_layout(rand(lead + (M, K), dtype, device, gen), layout[0])
    b = as_layout(rand(lead + (K, N), dtype, device, gen), layout[1])
    return a, b


def reference(a, b, bias=None):
    out = torch.matmul(a.double(), b.double())
    if bias is not None:
        out = out + bias.double()
    return out


def rel_err(out, ref):
    out = out.double()
    if ref.numel() == 0:
        return 0.0
    denom = ref.norm().item()
    diff = (out - ref).norm().item()
    return diff / denom if denom > 0 else diff


def assert_close_rel(out, ref, dtype, tol=None):
    tol = REL_TOL[dtype] if tol is None else tol
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == dtype, (out.dtype, dtype)
    if ref.numel():
        assert torch.isfinite(out).all(), "output has non-finite elements (unwritten or overflow)"
    err = rel_err(out, ref)
    assert err <= tol, f"relative error {err:.3e} > {tol:.1e}"


def assert_close_bound(out, a, b, bias, dtype, tol=None):
    """Error against the float64 reference, relative to |A| |B| + |bias|
    (the scale of a dot product's rounding error) instead of to the result:
    a single long dot product (M = N = 1) can cancel to a small value, where
    out-relative error says nothing about the kernel."""
    tol = REL_TOL[dtype] if tol is None else tol
    ref = reference(a, b, bias)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert torch.isfinite(out).all(), "output has non-finite elements (unwritten or overflow)"
    scale = torch.matmul(a.double().abs(), b.double().abs())
    if bias is not None:
        scale = scale + bias.double().abs()
    err = (out.double() - ref).norm().item() / max(scale.norm().item(), 1e-300)
    assert err <= tol, f"error {err:.3e} of |A||B| > {tol:.1e}"


@contextlib.contextmanager
def tf32_mode(on):
    """torch.backends.cuda.matmul.allow_tf32 set to `on` inside the block,
    restored after it (the op reads it on every call)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def graph_replay(fn, before_replay):
    """Capture fn() into a CUDA graph, run before_replay() (e.g. new input
    values), replay, and return the captured output tensor."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    before_replay()
    g.replay()
    torch.cuda.synchronize()
    return out


@contextlib.contextmanager
def poisoned_outputs(device, numel, dtype):
    """Fill the allocator's next block with NaN so an element the kernel fails
    to write shows up as NaN in the output.  On CUDA the caching allocator hands
    the same block back to the op's next allocation of that size."""
    if device == "cuda" and numel > 0:
        blob = torch.full((numel,), float("nan"), dtype=dtype, device=device)
        ptr = blob.data_ptr()
        del blob
        yield ptr
    else:
        yield None


def run_poisoned(fn, out_numel, dtype, device):
    with poisoned_outputs(device, out_numel, dtype) as ptr:
        out = fn()
    return out, (ptr is not None and out.data_ptr() == ptr)
