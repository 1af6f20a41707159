"""Correctness of the seed ladder (torch.ops.tiled.gemm_ladder) and of
simt_fast (torch.ops.tiled.gemm on strict fp32).

Every step, every dtype it takes, shapes around tile edges, the four operand
layouts (strides carry the layout: no copies), batches with a broadcast
operand, unaligned sliced views.  Reference: float64 torch.matmul.
"""
import math

import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (loads torch.ops.tiled)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SHAPES = [(1, 1, 1), (7, 13, 5), (31, 33, 17), (127, 129, 65), (256, 128, 64),
          (257, 129, 255), (1000, 999, 37)]
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
BASIC_STEPS = [1, 2, 20, 3, 4]          # every dtype
F32_STEPS = [5, 6, 7, 8, 9]             # float32 only (9 = simt_fast)
CANDIDATES = [91, 92, 93]               # simt_fast tuning candidates: NN, aligned B only
LAYOUTS = ["NN", "NT", "TN", "TT"]


def _tol(dtype, k):
    if dtype == torch.float64:
        return 1e-12
    if dtype == torch.float32:
        return 1e-5 * max(1.0, k / 256)
    return 1e-2


def _mat(rows, cols, dtype, transposed, batch=None, gen=None):
    """rows x cols values; transposed=True gives a column-major view (strides
    (1, rows)) of the same logical matrix, built without a copy."""
    shape = (rows, cols) if batch is None else (batch, rows, cols)
    if not transposed:
        return torch.randn(shape, device="cuda", generator=gen).to(dtype)
    tshape = (cols, rows) if batch is None else (batch, cols, rows)
    return torch.randn(tshape, device="cuda", generator=gen).to(dtype).transpose(-1, -2)


def _check(out, a, b, bias=None):
    ref = torch.matmul(a.double(), b.double())
    if bias is not None:
        ref = ref + bias.double()
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == a.dtype
    assert torch.isfinite(out).all(), "non-finite output (unwritten or overflowed elements)"
    k = a.shape[-1]
    err = (out.double() - ref).norm() / ref.norm().clamp_min(1e-30)
    assert err.item() < _tol(a.dtype, k), f"relative error {err.item():.3e}"


def _run(a, b, step):
    return torch.ops.tiled.gemm_ladder(a, b, step)


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("step", BASIC_STEPS + F32_STEPS)
def test_step_shapes_layouts(step, dtype, shape):
    if step in F32_STEPS and dtype != torch.float32:
        pytest.skip("float32-only step (the error path is tested separately)")
    m, n, k = shape
    g = _gen(1000 * step + m + n + k)
    for layout in LAYOUTS:
        a = _mat(m, k, dtype, layout[0] == "T", gen=g)
        b = _mat(k, n, dtype, layout[1] == "T", gen=g)
        out = _run(a, b, step)
        _check(out, a, b)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("step", BASIC_STEPS + F32_STEPS)
def test_batched_broadcast_and_determinism(step, dtype):
    if step in F32_STEPS and dtype != torch.float32:
        pytest.skip("float32-only step")
    g = _gen(7 + step)
    bsz, m, n, k = 3, 67, 129, 45
    for layout in LAYOUTS:
        a = _mat(m, k, dtype, layout[0] == "T", batch=bsz, gen=g)
        b2 = _mat(k, n, dtype, layout[1] == "T", gen=g)
        b = b2.unsqueeze(0).expand(bsz, k, n)  # batch stride 0
        out = _run(a, b, step)
        _check(out, a, b)
        again = _run(a, b, step)
        assert torch.equal(out, again), "two runs differ"
        # broadcast A instead
        a2 = _mat(m, k, dtype, layout[0] == "T", gen=g).unsqueeze(0).expand(bsz, m, k)
        bb = _mat(k, n, dtype, layout[1] == "T", batch=bsz, gen=g)
        _check(_run(a2, bb, step), a2, bb)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("step", BASIC_STEPS + F32_STEPS)
def test_unaligned_sliced_views(step, dtype):
    """Row stride > width and an odd storage offset: 16-byte vector paths must
    fall back to scalar loads, never fail."""
    if step in F32_STEPS and dtype != torch.float32:
        pytest.skip("float32-only step")
    g = _gen(99 + step)

    def view(rows, cols, transposed, pad, offset):
        # rows x cols logical matrix inside a bigger buffer: leading dim
        # = width + pad, storage offset odd (so the data pointer is not
        # 16-byte aligned either).
        if transposed:
            ld = rows + pad
            buf = torch.randn(cols * ld + offset, device="cuda", generator=g).to(dtype)
            return buf.as_strided((rows, cols), (1, ld), offset)
        ld = cols + pad
        buf = torch.randn(rows * ld + offset, device="cuda", generator=g).to(dtype)
        return buf.as_strided((rows, cols), (ld, 1), offset)

    for (m, n, k) in [(130, 131, 77), (64, 128, 32)]:
        for layout in LAYOUTS:
            ta, tb = layout[0] == "T", layout[1] == "T"
            a = view(m, k, ta, pad=5, offset=3)
            b = view(k, n, tb, pad=3, offset=1)
            assert a.storage_offset() % 2 == 1 and b.storage_offset() % 2 == 1
            _check(_run(a, b, step), a, b)
            # Aligned views (leading dim a multiple of 4, offset 4 elements)
            # of ragged sizes: the 16-byte paths with partial vectors at the
            # edges.
            wa, wb = (m if ta else k), (k if tb else n)
            a = view(m, k, ta, pad=(-wa) % 4 + 4, offset=4)
            b = view(k, n, tb, pad=(-wb) % 4 + 8, offset=4)
            _check(_run(a, b, step), a, b)


@pytest.mark.parametrize("step", CANDIDATES)
@pytest.mark.parametrize("shape", [(256, 128, 64), (257, 132, 255), (1000, 1000, 37), (1, 4, 1)],
                         ids=lambda s: "x".join(map(str, s)))
def test_simt_candidates_nn(step, shape):
    m, n, k = shape
    g = _gen(step + m)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    _check(_run(a, b, step), a, b)


def test_invalid_step_raises():
    a = torch.randn(4, 4, device="cuda")
    for step in [0, 10, 77, -1]:
        with pytest.raises(RuntimeError):
            _run(a, a, step)


@pytest.mark.parametrize("step", F32_STEPS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).split(".")[-1])
def test_f32_only_steps_refuse_other_dtypes(step, dtype):
    a = torch.randn(8, 8, device="cuda").to(dtype)
    with pytest.raises(RuntimeError):
        _run(a, a, step)


# --- simt_fast through the main op (strict fp32) ------------------------------

@pytest.fixture
def strict_fp32():
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    old_prec = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    yield
    torch.backends.cuda.matmul.allow_tf32 = old_tf32
    torch.set_float32_matmul_precision(old_prec)


@pytest.mark.parametrize("shape", SHAPES + [(128, 4096, 512)], ids=lambda s: "x".join(map(str, s)))
def test_simt_fast_main_op_bias_layouts(strict_fp32, shape):
    m, n, k = shape
    g = _gen(5 + m * 7 + n)
    for layout in LAYOUTS:
        a = _mat(m, k, torch.float32, layout[0] == "T", gen=g)
        b = _mat(k, n, torch.float32, layout[1] == "T", gen=g)
        bias = torch.randn(n, device="cuda", generator=g)
        _check(torch.ops.tiled.gemm(a, b, bias), a, b, bias)
        _check(torch.ops.tiled.gemm(a, b, None), a, b)


def test_simt_fast_main_op_batched(strict_fp32):
    g = _gen(3)
    a = torch.randn(4, 129, 70, device="cuda", generator=g)
    b = torch.randn(70, 257, device="cuda", generator=g).unsqueeze(0).expand(4, 70, 257)
    bias = torch.randn(257, device="cuda", generator=g)
    out = torch.ops.tiled.gemm(a, b, bias)
    _check(out, a, b, bias)
    assert torch.equal(out, torch.ops.tiled.gemm(a, b, bias))
