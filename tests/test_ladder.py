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
from conftest import assert_elementwise

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SHAPES = [(1, 1, 1), (7, 13, 5), (31, 33, 17), (127, 129, 65), (256, 128, 64),
          (257, 129, 255), (1000, 999, 37)]
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
BASIC_STEPS = [1, 2, 20, 3, 4]          # every dtype
F32_STEPS = [5, 6, 7, 8, 9]             # float32 only (9 = simt_fast)
# simt_fast's configs, each alone (every layout and alignment): 96 / 97 =
# sliced-K 64x64 / 32x32 (few tiles; M or N <= 32), 101 = the lean pipeline
# on a 128x128 block (GPUs without 75 KB of shared memory), 109 = the large
# config (128x256 block, FFMAs in 2x2 quads, compiled with ptxas -O1).
SIMT_CONFIGS = [96, 97, 101, 109]
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
    # every element within its own bound (the ladder is strict fp32; the
    # tf32 bound only where the main op may have run tf32)
    assert_elementwise(out, a, b, bias, tf32=a.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32)


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


@pytest.mark.parametrize("step", SIMT_CONFIGS)
def test_simt_configs_all_layouts(step):
    """Odd shapes around every tile size (32, 64, 128; k-tiles of 8, 16, 32),
    K not a multiple of any k-tile, the four layouts; one bias check."""
    g = _gen(300 + step)
    shapes = [(1, 1, 1), (7, 13, 5), (33, 31, 97), (65, 129, 257), (130, 67, 41), (257, 200, 300)]
    for (m, n, k) in shapes:
        for layout in LAYOUTS:
            a = _mat(m, k, torch.float32, layout[0] == "T", gen=g)
            b = _mat(k, n, torch.float32, layout[1] == "T", gen=g)
            _check(_run(a, b, step), a, b)


@pytest.mark.parametrize("step", SIMT_CONFIGS)
def test_simt_configs_batched_unaligned(step):
    g = _gen(400 + step)
    bsz, m, n, k = 3, 67, 129, 45
    for layout in LAYOUTS:
        ta, tb = layout[0] == "T", layout[1] == "T"
        a = _mat(m, k, torch.float32, ta, batch=bsz, gen=g)
        b = _mat(k, n, torch.float32, tb, gen=g).unsqueeze(0).expand(bsz, k, n)
        out = _run(a, b, step)
        _check(out, a, b)
        assert torch.equal(out, _run(a, b, step)), "two runs differ"
        # Unaligned views: odd storage offset, padded leading dim.
        for (mm, nn, kk) in [(130, 131, 77), (20, 70, 33)]:
            wa, wb = (mm if ta else kk), (kk if tb else nn)
            ba = torch.randn((kk if ta else mm) * (wa + 5) + 3, device="cuda", generator=g)
            bb = torch.randn((nn if tb else kk) * (wb + 3) + 1, device="cuda", generator=g)
            av = ba.as_strided((mm, kk), (1, wa + 5) if ta else (wa + 5, 1), 3)
            bv = bb.as_strided((kk, nn), (1, wb + 3) if tb else (wb + 3, 1), 1)
            _check(_run(av, bv, step), av, bv)


def _aligned(rows, cols, transposed, gen, batch=None, extra=4):
    """rows x cols view whose leading dim is a multiple of 4 (>= width + 4),
    storage offset 4 elements: every operand 16-byte aligned, sizes ragged."""
    width = rows if transposed else cols
    ld = width + (-width) % 4 + extra
    outer = cols if transposed else rows
    n = batch or 1
    bs = outer * ld + 8  # batch stride: a multiple of 4 as well
    buf = torch.randn(n * bs + 4, device="cuda", generator=gen)
    strides = (1, ld) if transposed else (ld, 1)
    if batch is None:
        return buf.as_strided((rows, cols), strides, 4)
    return buf.as_strided((batch, rows, cols), (bs,) + strides, 4)


def test_large_config_batched_matches_step101():
    """Step 109 (simt_fast's large config) gives every accumulator step 101's
    FFMAs in step 101's k order (it changes the block tile, the copy schedule
    and the order across accumulators only): the same bits, also on batches
    and a broadcast operand whose interior blocks take the fast copy path
    (132 x 260 has full 128 x 128 and 128 x 256 blocks)."""
    g = _gen(809)
    bsz, m, n, k = 3, 132, 260, 100
    for layout in LAYOUTS:
        ta, tb = layout[0] == "T", layout[1] == "T"
        a = _aligned(m, k, ta, g, batch=bsz)
        b = _aligned(k, n, tb, g).unsqueeze(0).expand(bsz, k, n)
        out = _run(a, b, 109)
        _check(out, a, b)
        assert torch.equal(out, _run(a, b, 101)), "differs from step 101"
        a2 = _mat(m, k, torch.float32, ta, gen=g).unsqueeze(0).expand(bsz, m, k)
        b2 = _mat(k, n, torch.float32, tb, batch=bsz, gen=g)
        out2 = _run(a2, b2, 109)
        _check(out2, a2, b2)
        assert torch.equal(out2, _run(a2, b2, 101)), "differs from step 101"


@pytest.mark.parametrize("shape", [(4, 4, 4), (33, 31, 97), (65, 129, 17), (130, 67, 41),
                                   (128, 256, 300), (257, 200, 63), (200, 257, 1000),
                                   (129, 260, 45)],
                         ids=lambda s: "x".join(map(str, s)))
def test_large_config_aligned_matches_step101(shape):
    """Step 109 on 16-byte-aligned padded views of ragged sizes (partial
    vectors at the k edge, rows past M / N, interior blocks with a partial
    last k-tile, where the copies spread into the next k-tile's loop switch
    between the fast and the edge path) in the four layouts, bitwise equal
    to step 101."""
    m, n, k = shape
    g = _gen(1009 + m + n + k)
    for layout in LAYOUTS:
        a = _aligned(m, k, layout[0] == "T", g)
        b = _aligned(k, n, layout[1] == "T", g)
        out = _run(a, b, 109)
        _check(out, a, b)
        assert torch.equal(out, _run(a, b, 101)), f"{layout}: step 109 differs from step 101"


@pytest.mark.parametrize("step", [96, 97])
def test_sliced_k_long_k_deterministic(step):
    """Sliced-K sums 4 partial tiles in a fixed order: bitwise reproducible."""
    g = _gen(500 + step)
    a = torch.randn(40, 3001, device="cuda", generator=g)
    b = torch.randn(3001, 72, device="cuda", generator=g)
    out = _run(a, b, step)
    _check(out, a, b)
    assert torch.equal(out, _run(a, b, step))


def test_invalid_step_raises():
    a = torch.randn(4, 4, device="cuda")
    for step in [0, 10, 77, 90, 95, 99, 100, 108, -1]:  # (90-108: deleted tuning candidates)
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


# (128, 4096, 512): simt_fast's mid-size (sliced-K 64x64) path; (16, 2048, 300)
# and (1000, 24, 77): the small (32x32) path; (1000, 999, 37): the 128x128 path
# only on GPUs with <= 64 SMs, mid-size otherwise.
@pytest.mark.parametrize("shape", SHAPES + [(128, 4096, 512), (16, 2048, 300), (1000, 24, 77),
                                            (2304, 2304, 40)],
                         ids=lambda s: "x".join(map(str, s)))
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


def test_simt_fast_large_is_step109(strict_fp32):
    # simt_fast's large problems run step 109 (without a bias, the main op
    # gives the step's bits), in every layout.
    g = _gen(11)
    m, n, k = 2304, 1664, 200  # >= one 128x128 tile per SM: the large config
    for layout in LAYOUTS:
        a = _mat(m, k, torch.float32, layout[0] == "T", gen=g)
        b = _mat(k, n, torch.float32, layout[1] == "T", gen=g)
        bias = torch.randn(n, device="cuda", generator=g)
        _check(torch.ops.tiled.gemm(a, b, bias), a, b, bias)
        assert torch.equal(torch.ops.tiled.gemm(a, b, None), _run(a, b, 109)), layout
