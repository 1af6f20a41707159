"""Shared helpers: devices, float64 references, tolerances, layouts, poisoning."""
import builtins
import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from torch_tiled_gemm import testing as gemm_testing

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
LAYOUTS = ["NN", "NT", "TN", "TT"]

# ||out - ref|| / ||ref|| bounds against a float64 reference (fp32 strict; tf32
# has its own).  bf16 keeps 8 mantissa bits, fp16 11: the output rounding alone
# is ~2e-3 / ~3e-4 relative.  These whole-matrix bounds come on top of the
# element-wise one (torch_tiled_gemm/testing.py), which is what catches a
# wrong tile, column or element: assert_close_rel applies it whenever the
# reference came from reference(a, b, bias).
REL_TOL = {torch.float32: 2e-5, torch.float64: 1e-13, torch.float16: 2e-3, torch.bfloat16: 1e-2}
TF32_TOL = 5e-3

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_host_driver(tmp_path_factory, name, sources):
    """Builds a host-only test driver from `sources` (paths under the repo)
    with nvcc against csrc/ as an sm_90a build (TILED_WITH_SM90A), no device
    code for a real GPU, so it runs in CI without one; skips where nvcc is
    missing.  Returns the executable's path.  Kept in the system's temporary
    folder under a hash of the command and of every file under csrc/ and
    tests/host/, so that later runs of the suite on the same sources (CI
    runs it three times) reuse it instead of compiling it again."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    args = ["-std=c++17", "-DTILED_WITH_SM90A", "-I", "csrc", "-x", "cu", *sources,
            "-gencode=arch=compute_90a,code=compute_90a"]  # (run in ROOT)
    digest = hashlib.sha256(" ".join([nvcc, *args]).encode())
    for top in ("csrc", os.path.join("tests", "host")):
        for folder, dirs, files in sorted(os.walk(os.path.join(ROOT, top))):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(folder, f)
                digest.update(os.path.relpath(path, ROOT).encode())
                with open(path, "rb") as fh:
                    digest.update(fh.read())
    cache = os.path.join(tempfile.gettempdir(), "torch_tiled_gemm-host-drivers", digest.hexdigest()[:16])
    exe = os.path.join(cache, name)
    if os.path.exists(exe):
        return exe
    os.makedirs(cache, exist_ok=True)
    tmp = str(tmp_path_factory.mktemp(name) / name)
    subprocess.run([nvcc, *args, "-o", tmp], cwd=ROOT, check=True, capture_output=True, timeout=300)
    staged = f"{exe}.{os.getpid()}"  # (a worker building the same driver at once replaces it whole)
    shutil.copy2(tmp, staged)
    os.replace(staged, exe)
    return exe


def pytest_report_header(config):
    import torch_tiled_gemm

    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}); "
            f"extension {torch_tiled_gemm._C.__file__}")


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


def padded(values, ch):
    """`values` ([..., rows, cols]) stored row-major ('N') or column-major
    ('T') with the leading dimension rounded up to 8 elements (16 bytes or
    more), as an allocator-friendly model would store it; the padding is NaN,
    so a read past the extent poisons the result."""
    t = values if ch == "N" else values.transpose(-1, -2)
    inner = t.shape[-1]
    store = torch.full(t.shape[:-1] + (-(-inner // 8) * 8,), float("nan"), dtype=t.dtype, device=t.device)
    store[..., :inner] = t
    view = store[..., :inner]
    return view if ch == "N" else view.transpose(-1, -2)


def padded_operands(M, N, K, dtype, layout, gen, batch=None, ints=False):
    """CUDA operands in `layout` with padded leading dimensions (padded());
    `ints`: small integers, exact in every dtype and in fp32 sums, so any
    misplaced element shows."""
    lead = () if batch is None else (batch,)
    if ints:
        a = torch.randint(-2, 3, lead + (M, K), generator=gen, device="cuda").to(dtype)
        b = torch.randint(-2, 3, lead + (K, N), generator=gen, device="cuda").to(dtype)
    else:
        a = rand(lead + (M, K), dtype, "cuda", gen)
        b = rand(lead + (K, N), dtype, "cuda", gen)
    return padded(a, layout[0]), padded(b, layout[1])


def no_matplotlib(monkeypatch):
    """Makes `import matplotlib` fail for the test (the no-plot paths)."""
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib (test)")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", fake)


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
    """float64 a @ b (+ bias).  The operands ride along on the result
    (`gemm_operands`), so assert_close_rel can bound every element's error
    by what the operands allow (gemm_testing.error_bound)."""
    out = torch.matmul(a.double(), b.double())
    if bias is not None:
        out = out + bias.double()
    out.gemm_operands = (a, b, bias)
    return out


def rel_err(out, ref):
    return gemm_testing.relative_error(out, ref)


def _tf32_in_effect(out, tol, tf32):
    """Whether fp32 `out` may come from tf32 tensor cores: asked for
    explicitly, implied by the tf32 tolerance, or allowed right now on CUDA
    (the looser bound: a check inside tf32_mode(True) never fails a correct
    tf32 kernel)."""
    if out.dtype != torch.float32:
        return False
    if tf32 is not None:
        return tf32
    return tol == TF32_TOL or (out.is_cuda and torch.backends.cuda.matmul.allow_tf32)


def assert_elementwise(out, a, b, bias=None, tf32=False, mask=None, scales=None):
    """Every element of `out` within gemm_testing.error_bound of a @ b (+ bias)."""
    res = gemm_testing.check_gemm(out, a, b, bias, tf32=tf32, mask=mask, scales=scales)
    assert res.ok, res.message


def assert_close_rel(out, ref, dtype, tol=None, tf32=None):
    """`out` against the float64 `ref`: the whole-matrix relative error within
    `tol` (REL_TOL[dtype] by default, TF32_TOL for tf32) and, where `ref`
    came from reference(a, b, bias), every element within its own bound."""
    tol = REL_TOL[dtype] if tol is None else tol
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == dtype, (out.dtype, dtype)
    if ref.numel():
        assert torch.isfinite(out).all(), "output has non-finite elements (unwritten or overflow)"
    operands = getattr(ref, "gemm_operands", None)
    if operands is not None:
        if getattr(ref, "gemm_scales", None) is None:  # computed once per reference
            ref.gemm_scales = gemm_testing.reference_and_scales(*operands)
        assert_elementwise(out, *operands, tf32=_tf32_in_effect(out, tol, tf32), scales=ref.gemm_scales)
    err = rel_err(out, ref)
    assert err <= tol, f"relative error {err:.3e} > {tol:.1e}"


def assert_close_bound(out, a, b, bias, dtype, tol=None, tf32=None):
    """Error against the float64 reference, relative to |A| |B| + |bias|
    (the scale of a dot product's rounding error) instead of to the result:
    a single long dot product (M = N = 1) can cancel to a small value, where
    out-relative error says nothing about the kernel.  Every element is
    checked against its own bound as well."""
    tol = REL_TOL[dtype] if tol is None else tol
    ref = reference(a, b, bias)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert torch.isfinite(out).all(), "output has non-finite elements (unwritten or overflow)"
    assert_elementwise(out, a, b, bias, tf32=_tf32_in_effect(out, tol, tf32))
    scale = torch.matmul(a.double().abs(), b.double().abs())
    if bias is not None:
        scale = scale + bias.double().abs()
    err = (out.double() - ref).norm().item() / max(scale.norm().item(), 1e-300)
    assert err <= tol, f"error {err:.3e} of |A||B| > {tol:.1e}"


def assert_nan_inf_match(out, a, b, bias=None):
    """NaN and Inf operands: NaN exactly where the float64 reference has NaN,
    the same infinities where it has infinities, and every finite element
    within its element-wise bound (the bound of the finite rows and columns,
    which hold no NaN or Inf)."""
    ref = reference(a, b, bias)
    o = out.double()
    assert torch.equal(torch.isnan(o), torch.isnan(ref)), "NaN pattern differs from the reference's"
    assert torch.equal(torch.isinf(o), torch.isinf(ref)), "Inf pattern differs from the reference's"
    inf = torch.isinf(ref)
    assert torch.equal(o[inf], ref[inf]), "an infinity has the wrong sign"
    res = gemm_testing.check_gemm(out, a, b, bias, mask=torch.isfinite(ref),
                                  tf32=_tf32_in_effect(out, None, None))
    assert res.ok, res.message


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


def _cpu_junk_fill_flag():
    """c10's FLAGS_caffe2_cpu_allocator_do_junk_fill (a ctypes bool): while
    set, every CPU allocation is filled with 0x7fedbeef, a NaN in fp32 (and
    in every other 16-bit word of bf16 / fp16; fp64 reads it as 1.7e308).
    None where libc10 does not export it."""
    global _JUNK_FLAG
    if _JUNK_FLAG is False:
        try:
            lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
            _JUNK_FLAG = ctypes.c_bool.in_dll(lib, "FLAGS_caffe2_cpu_allocator_do_junk_fill")
        except (OSError, ValueError):
            _JUNK_FLAG = None
    return _JUNK_FLAG


_JUNK_FLAG = False


@contextlib.contextmanager
def cpu_junk_fill():
    """Every CPU allocation inside the block starts as junk (NaN in fp32);
    yields whether that is in effect (checked on a fresh allocation)."""
    flag = _cpu_junk_fill_flag()
    if flag is None:
        yield False
        return
    old = flag.value
    flag.value = True
    try:
        probe = torch.empty(64, dtype=torch.float32)
        yield bool(torch.isnan(probe).all())
    finally:
        flag.value = old


@contextlib.contextmanager
def poisoned_outputs(device, numel, dtype):
    """Makes an element the kernel fails to write show up as wrong.  On CUDA:
    a NaN-filled block freed just before the op, which the caching allocator
    hands back to the op's next allocation of that size (yields its address;
    the output is poisoned if it lands there).  On the CPU: c10's junk fill
    of every allocation inside the block (NaN in fp32 and in every other
    element of bf16 / fp16, 1.7e308 in fp64: each fails the value checks;
    yields True when in effect)."""
    if device == "cuda" and numel > 0:
        blob = torch.full((numel,), float("nan"), dtype=dtype, device=device)
        ptr = blob.data_ptr()
        del blob
        yield ptr
    elif device == "cpu" and numel > 0:
        with cpu_junk_fill() as on:
            yield "cpu" if on else None
    else:
        yield None


def run_poisoned(fn, out_numel, dtype, device):
    """(fn(), whether its output was poisoned before the op wrote it)."""
    with poisoned_outputs(device, out_numel, dtype) as token:
        out = fn()
    if token == "cpu":
        return out, True
    return out, (token is not None and out.data_ptr() == token)
