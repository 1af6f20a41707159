"""tiled.gemm forward: values against float64 over shapes, layouts, dtypes, views."""
import os
import subprocess
import sys
import zlib
import random

import pytest
import torch

from conftest import (DEVICES, DTYPES, HAS_CUDA, LAYOUTS, TF32_TOL, assert_close_bound, assert_close_rel,
                      assert_nan_inf_match, graph_replay, make_operands, needs_cuda, rand, reference, run_poisoned,
                      tf32_mode)

gemm = torch.ops.tiled.gemm

# Sizes around every tile edge the kernels use (8, 16, 32, 64, 128, 256), a
# few primes, 0 and 1.
EDGE = [0, 1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 127, 128, 129, 131, 255, 256, 257]


def shape_sample(n, seed, extra=()):
    rnd = random.Random(seed)
    shapes = {(1, 1, 1), (0, 5, 3), (5, 0, 3), (5, 3, 0), (1, 257, 129), (257, 1, 65), (129, 131, 1)}
    shapes |= set(extra)
    while len(shapes) < n:
        shapes.add(tuple(rnd.choice(EDGE) for _ in range(3)))
    return sorted(shapes)


def check(M, N, K, dtype, device, layout, bias, batch=None, tol=None, seed=None):
    a, b = make_operands(M, N, K, dtype, device, layout, batch=batch, seed=seed)
    bias_t = rand((N,), dtype, device) if bias else None
    out_numel = M * N * (batch or 1)
    out, _ = run_poisoned(lambda: gemm(a, b, bias_t), out_numel, dtype, device)
    assert out.is_contiguous()
    assert_close_rel(out, reference(a, b, bias_t), dtype, tol)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_shape_sweep(device, dtype, layout):
    n = 40 if device == "cuda" else 14
    for i, (M, N, K) in enumerate(shape_sample(n, seed=zlib.crc32(f"{dtype}{layout}".encode()))):
        check(M, N, K, dtype, device, layout, bias=(i % 2 == 0))


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_large_cuda(dtype, layout):
    for M, N, K in [(1000, 1024, 997), (2048, 1536, 1024), (4096, 257, 2049), (3, 4096, 4096)]:
        check(M, N, K, dtype, "cuda", layout, bias=True)


@pytest.mark.parametrize("device", DEVICES)
def test_poisoning_is_effective(device):
    # The poisoning helper must actually land NaNs where the op writes, or the
    # "every element written" checks above prove nothing (CUDA: the freed NaN
    # block is the output's; CPU: every allocation of the call is junk-filled).
    a, b = make_operands(129, 131, 65, torch.float32, device)
    _, reused = run_poisoned(lambda: gemm(a, b), 129 * 131, torch.float32, device)
    assert reused
    unwritten, poisoned = run_poisoned(lambda: torch.empty(129, 131, device=device), 129 * 131, torch.float32,
                                       device)
    assert poisoned and torch.isnan(unwritten).all()


@needs_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tf32_mode(layout):
    with tf32_mode(True):
        for M, N, K in [(127, 129, 255), (1024, 1024, 1024), (64, 4096, 512)]:
            check(M, N, K, torch.float32, "cuda", layout, bias=True, tol=TF32_TOL)
        # Too small for the Hopper / sm80 path (no staging below 64 rows), and
        # rows of 513 or 4095 floats are not 16-byte aligned for the skinny
        # kernel: the fast fp32 SIMT kernel takes it, not the general one.
        a, b = make_operands(16, 4095, 513, torch.float32, "cuda", layout)
        assert torch.ops.tiled.gemm_kernel_name(a, b) == "simt_fast"
        check(16, 4095, 513, torch.float32, "cuda", layout, bias=True, tol=TF32_TOL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batched(device, dtype):
    for layout in LAYOUTS:
        check(33, 17, 29, dtype, device, layout, bias=True, batch=3)
        check(130, 65, 70, dtype, device, layout, bias=False, batch=2)
    # Broadcast operands: 3-D x 2-D and 2-D x 3-D.
    a = rand((4, 19, 23), dtype, device)
    b = rand((23, 11), dtype, device)
    assert_close_rel(gemm(a, b), reference(a, b), dtype)
    assert_close_rel(gemm(a.transpose(1, 2).contiguous().transpose(1, 2), b.t().contiguous().t()),
                     reference(a, b), dtype)
    a2 = rand((19, 23), dtype, device)
    b3 = rand((4, 23, 11), dtype, device)
    assert_close_rel(gemm(a2, b3), reference(a2, b3), dtype)
    # Batch of size 0 and 1.
    assert gemm(rand((0, 3, 4), dtype, device), rand((0, 4, 5), dtype, device)).shape == (0, 3, 5)
    a1, b1 = rand((1, 9, 4), dtype, device), rand((1, 4, 5), dtype, device)
    assert_close_rel(gemm(a1, b1), reference(a1, b1), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_views(device, dtype):
    big = rand((300, 400), dtype, device)
    # Row stride larger than the width, odd storage offsets (unaligned base
    # pointers), both layouts, a batch dim with a gap.
    a = big[3:120, 5:70]            # [117, 65], row stride 400, offset 1205
    b = big[101:166, 7:50]          # [65, 43]
    assert_close_rel(gemm(a, b), reference(a, b), dtype)
    at = big[11:76, 1:118].t()      # [117, 65] column-major view
    bt = big[13:56, 3:68].t()       # [65, 43] column-major view
    assert_close_rel(gemm(at, bt), reference(at, bt), dtype)
    base = rand((5, 40, 50), dtype, device)
    a3 = base[::2, 1:38, 3:30]      # batch stride 4000, [3, 37, 27]
    b3 = rand((3, 27, 60), dtype, device)[:, :, 1:60:1]
    assert_close_rel(gemm(a3, b3), reference(a3, b3), dtype)
    # No unit stride at all: read through a copy, still right.
    a_nu = big[::2, ::3][:20, :30]
    b_nu = big[::3, ::2][:30, :10]
    assert_close_rel(gemm(a_nu, b_nu), reference(a_nu, b_nu), dtype)
    # Expanded (stride-0) operands.  Every output element is the same dot
    # product, so keep it away from 0 (positive values): with signed random
    # values a near-cancelling sum made the relative error of an exact-enough
    # result exceed the tolerance now and then.
    row = (rand((1, 30), dtype, device).abs() + 0.5).expand(20, 30)
    col = (rand((30, 1), dtype, device).abs() + 0.5).expand(30, 9)
    assert_close_rel(gemm(row, col), reference(row, col), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_transposed_views_are_not_copied(device):
    a, b = make_operands(64, 48, 80, torch.float32, device, "TT")
    with torch.profiler.profile() as prof:
        gemm(a, b)
    names = {e.name for e in prof.events()}
    assert not names & {"aten::copy_", "aten::clone", "aten::contiguous"}, names


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_k_zero_and_empty(device, dtype):
    a, b = rand((5, 0), dtype, device), rand((0, 7), dtype, device)
    bias = rand((7,), dtype, device)
    assert torch.equal(gemm(a, b), torch.zeros(5, 7, dtype=dtype, device=device))
    assert torch.equal(gemm(a, b, bias), bias.expand(5, 7))
    assert gemm(rand((0, 3), dtype, device), rand((3, 7), dtype, device)).shape == (0, 7)
    assert gemm(rand((4, 3), dtype, device), rand((3, 0), dtype, device)).shape == (4, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_inf_propagate(device, dtype):
    a, b = make_operands(40, 30, 20, dtype, device)
    a[3, 4] = float("nan")
    a[7, 2] = float("inf")
    b[5, 9] = float("-inf")
    # NaN / Inf exactly where the float64 reference has them, every finite
    # element within its own bound (tests/test_checks.py: zeros fail it)
    assert_nan_inf_match(gemm(a, b), a, b)
    bias = rand((30,), dtype, device)
    bias[11] = float("nan")
    assert_nan_inf_match(gemm(a, b, bias), a, b, bias)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_deterministic(device, dtype):
    M, N, K = (515, 333, 1021) if device == "cuda" else (130, 70, 300)
    for layout in LAYOUTS:
        a, b = make_operands(M, N, K, dtype, device, layout)
        bias = rand((N,), dtype, device)
        assert torch.equal(gemm(a, b, bias), gemm(a, b, bias))


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    f32 = dict(device=device, dtype=torch.float32)

    def raises(match, *args):
        with pytest.raises(RuntimeError, match=match):
            gemm(*args)

    raises(r"cannot be multiplied \(3x2 and 3x2\)", torch.randn(3, 2, **f32), torch.randn(3, 2, **f32))
    raises(r"cannot be multiplied \(2x3x4 and 5x6\)", torch.randn(2, 3, 4, **f32), torch.randn(5, 6, **f32))
    raises(r"batch sizes of a and b differ \(2x3x4 and 3x4x5\)", torch.randn(2, 3, 4, **f32),
           torch.randn(3, 4, 5, **f32))
    raises("a must be 2-D", torch.randn(4, **f32), torch.randn(4, 5, **f32))
    raises("b must be 2-D", torch.randn(3, 4, **f32), torch.randn(1, 2, 4, 5, **f32))
    raises("same dtype", torch.randn(3, 4, **f32), torch.randn(4, 5, device=device, dtype=torch.float64))
    raises("unsupported dtype", torch.ones(3, 4, device=device, dtype=torch.int32),
           torch.ones(4, 5, device=device, dtype=torch.int32))
    raises(r"bias must be 1-D of size N=5", torch.randn(3, 4, **f32), torch.randn(4, 5, **f32), torch.randn(6, **f32))
    raises(r"bias must be 1-D", torch.randn(3, 4, **f32), torch.randn(4, 5, **f32), torch.randn(1, 5, **f32))
    raises("bias dtype", torch.randn(3, 4, **f32), torch.randn(4, 5, **f32),
           torch.randn(5, device=device, dtype=torch.float64))
    if device == "cuda":
        raises("same device", torch.randn(3, 4, **f32), torch.randn(4, 5))
        raises("bias is on", torch.randn(3, 4, **f32), torch.randn(4, 5, **f32), torch.randn(5))
        if torch.cuda.device_count() > 1:
            raises("same device", torch.randn(3, 4, **f32), torch.randn(4, 5, device="cuda:1"))


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.get_device_properties(0).total_memory < 40 * 2**30,
                    reason="needs a CUDA GPU with 40 GiB")
def test_past_2_pow_31_elements():
    # A = [2^20 + 3, 2^11] bf16 has > 2^31 elements: offsets must be 64-bit.
    M, K, N = (1 << 20) + 3, 2048, 24
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    out = gemm(a, b)
    rows = torch.tensor([0, 1, M // 2, M - 2, M - 1], device="cuda")
    ref = reference(a[rows], b)
    assert_close_rel(out[rows], ref, torch.bfloat16)
    del a, out
    torch.cuda.empty_cache()


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_sizes_tall_skinny(device):
    # M = N = 1 is one dot product of 4097 terms: it can cancel to a small
    # value, so the error is measured against |A| |B| (assert_close_bound).
    for M, N, K in [(1, 1, 4097), (1, 3000, 17), (2049, 1, 63), (8, 8, 8)]:
        a, b = make_operands(M, N, K, torch.float32, device, "NN")
        bias = rand((N,), torch.float32, device)
        out, _ = run_poisoned(lambda: gemm(a, b, bias), M * N, torch.float32, device)
        assert_close_bound(out, a, b, bias, torch.float32)


CPU_ISAS = ["baseline", "avx2", "avx512", "amx"]  # amx: bf16 only


def test_kernel_name_cpu():
    a, b = make_operands(8, 8, 8, torch.float32, "cpu")
    assert torch.ops.tiled.gemm_kernel_name(a, b) in [f"cpu_blocked_{i}" for i in CPU_ISAS[:3]]
    a, b = make_operands(8, 8, 8, torch.bfloat16, "cpu")
    assert torch.ops.tiled.gemm_kernel_name(a, b) in [f"cpu_blocked_{i}" for i in CPU_ISAS]


def cpu_isa_or_skip(monkeypatch, isa, dtype=torch.float32):
    """Forces the CPU kernel's instruction set `isa` by name (TILED_CONFIG); skips where the CPU
    (or, for AMX, the OS or the dtype) does not give it."""
    if isa == "amx" and dtype != torch.bfloat16:
        pytest.skip("the AMX kernel is bf16 only (other dtypes run the AVX-512 build)")
    monkeypatch.setenv("TILED_CONFIG", f"cpu_blocked_{isa}")
    a, b = make_operands(2, 2, 2, dtype, "cpu")
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    if name != f"cpu_blocked_{isa}":
        pytest.skip(f"this CPU has no {isa} (runs {name})")


@pytest.mark.parametrize("isa", CPU_ISAS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cpu_isa_edges(monkeypatch, isa, dtype):
    # Around the micro-kernels' panels (4x16 portable, 12x32 / 12x16 AVX-512
    # and 8x32 / 8x16 for few rows, 32x32 AMX with K in steps of 32),
    # the row blocks (64 / 72 rows at a
    # time, tasks of up to 512 / 576 rows), the 256-column blocks and
    # 256-deep K slices; every layout, a bias on every other shape, the
    # output poisoned first.
    cpu_isa_or_skip(monkeypatch, isa, dtype)
    shapes = [(1, 1, 1), (11, 31, 7), (12, 32, 16), (13, 33, 17), (25, 17, 255), (72, 64, 256), (73, 257, 257),
              (577, 40, 33), (130, 513, 300), (32, 32, 32), (33, 31, 513), (65, 96, 1025)]
    for i, (M, N, K) in enumerate(shapes):
        for layout in LAYOUTS:
            check(M, N, K, dtype, "cpu", layout, bias=(i % 2 == 0))


@pytest.mark.parametrize("isa", CPU_ISAS)
@pytest.mark.parametrize("shape, layout, many_threads", [
    ((700, 600, 300), "NT", 2),  # several tasks of full width: 700 rows x 3 column blocks
    ((150, 200, 300), "NN", 16),  # few rows: tasks narrower than a column block, a partial panel at N
    ((3, 1000, 70), "TN", 16),  # a decode-like M: the columns alone are split
], ids=str)
def test_cpu_threads_do_not_change_bits(monkeypatch, isa, shape, layout, many_threads):
    # Each task owns its block of C and sums over K in one order, so neither
    # the thread count nor the block sizes it leads to can change a bit.
    dtype = torch.bfloat16 if isa == "amx" else torch.float32
    cpu_isa_or_skip(monkeypatch, isa, dtype)
    a, b = make_operands(*shape, dtype, "cpu", layout)
    ref = torch.matmul(a.double(), b.double())
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = gemm(a, b)
        torch.set_num_threads(max(many_threads, threads))
        many = gemm(a, b)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)
    assert_close_rel(many, ref, dtype)


@pytest.mark.parametrize("isa", CPU_ISAS[:3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_cpu_rows_do_not_depend_on_m(monkeypatch, isa, dtype):
    # Up to 64 rows run on 8-row panels (AVX-512) where those pad M less,
    # others on 12-row ones (72 rows here); each element is still summed over
    # K in one order, one FMA per step, so the first rows of a taller problem
    # are bitwise the few-row problem's.
    cpu_isa_or_skip(monkeypatch, isa, dtype)
    for M, N, K, layout in [(16, 300, 1000, "NN"), (5, 257, 333, "TN"), (9, 100, 513, "NT"), (1, 33, 5, "TT"),
                            (40, 64, 300, "NN"), (64, 40, 257, "TN")]:
        a, b = make_operands(72, N, K, dtype, "cpu", layout, seed=M + N + K)
        bias = rand((N,), dtype, "cpu")
        tall = gemm(a, b, bias)
        assert torch.equal(gemm(a[:M], b, bias), tall[:M]), (M, N, K, layout)


@pytest.mark.parametrize("isa", CPU_ISAS)
def test_cpu_scratch_reuse(monkeypatch, isa):
    # The tasks' packing and accumulator buffers outlive the call (per-thread
    # scratch, never cleared): after a large call has filled them, smaller
    # and ragged calls, a K of 0 and a single thread must not read any of
    # its data.
    dtype = torch.bfloat16 if isa == "amx" else torch.float32
    cpu_isa_or_skip(monkeypatch, isa, dtype)
    threads = torch.get_num_threads()
    try:
        for M, N, K, nthreads in [(700, 600, 520, threads), (13, 33, 17, threads), (600, 700, 0, threads),
                                  (73, 257, 257, 1), (700, 600, 520, 1), (5, 7, 3, threads), (40, 300, 0, 1)]:
            torch.set_num_threads(nthreads)
            for layout in ("NN", "TT"):
                check(M, N, K, dtype, "cpu", layout, bias=True)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("M, N, K", [(64, 96, 512), (96, 40, 300), (33, 64, 64)])
def test_cpu_amx_column_major_views(monkeypatch, M, N, K):
    # A column-major A with a leading dimension past M (a transposed slice of
    # a wider matrix): whole 32 x 32 blocks are transposed in registers,
    # ragged rows and K slices take the element-wise packing.  B column-major
    # with a leading dimension past K: whole 16-column x 32-k blocks are
    # transposed as 16 x 16 words of k pairs, a ragged last k step and
    # partial column groups (N = 40) element by element.
    cpu_isa_or_skip(monkeypatch, "amx", torch.bfloat16)
    a = rand((K, M + 8), torch.bfloat16, "cpu")[:, 3:M + 3].t()
    b = rand((N, K + 5), torch.bfloat16, "cpu")[:, :K].t()
    assert a.stride() == (1, M + 8)
    out, _ = run_poisoned(lambda: gemm(a, b), M * N, torch.bfloat16, "cpu")
    assert_close_rel(out, reference(a, b, None), torch.bfloat16)


def test_cpu_unknown_config_is_declined(monkeypatch):
    # A name no CPU configuration has (or one this CPU lacks) is declined:
    # the best instruction set runs, as without TILED_CONFIG.
    a, b = make_operands(4, 4, 4, torch.float32, "cpu")
    usual = torch.ops.tiled.gemm_kernel_name(a, b)
    for name in ("sse9", "cpu_blocked_sse9", "sm90_bf16_128x128pp_nt", "amx"):  # (amx: bf16 only)
        monkeypatch.setenv("TILED_CONFIG", name)
        assert torch.ops.tiled.gemm_kernel_name(a, b) == usual, name
        assert_close_rel(gemm(a, b), reference(a, b, None), torch.float32)


@pytest.mark.parametrize("padding", [3, 40])
def test_settings_read_on_every_call(monkeypatch, padding):
    # The TILED_* switches are read from the environment once per call (a
    # table of up to 32; past that every lookup goes to getenv): a change
    # between calls takes effect, an unset one reads as unset, an unknown
    # name is declined, whichever path the lookup takes.
    for i in range(padding):
        monkeypatch.setenv(f"TILED_TEST_PADDING_{i}", str(i))
    a, b = make_operands(4, 4, 4, torch.float32, "cpu")
    monkeypatch.setenv("TILED_CONFIG", "baseline")
    assert torch.ops.tiled.gemm_kernel_name(a, b) == "cpu_blocked_baseline"
    assert_close_rel(gemm(a, b), reference(a, b, None), torch.float32)
    monkeypatch.delenv("TILED_CONFIG")
    unset = torch.ops.tiled.gemm_kernel_name(a, b)
    assert unset in [f"cpu_blocked_{i}" for i in CPU_ISAS[:3]]
    monkeypatch.setenv("TILED_CONFIG", "sse9")
    assert torch.ops.tiled.gemm_kernel_name(a, b) == unset
    monkeypatch.setenv("TILED_CONFIG", "cpu_blocked_baseline")
    assert torch.ops.tiled.gemm_kernel_name(a, b) == "cpu_blocked_baseline"


def _is_hopper():
    return HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "tf32"], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_staged_operands(dtype, layout):
    """Operands the tensor-core kernel cannot read in place (odd leading dims,
    odd offsets, non-K-major tf32) go through aligned K-major copies."""
    tf32 = dtype == "tf32"
    dt = torch.float32 if tf32 else dtype
    with tf32_mode(tf32):
        cases = [(255, 257, 129), (1000, 999, 997), (129, 4095, 67)]
        for i, (M, N, K) in enumerate(cases):
            a, b = make_operands(M, N, K, dt, "cuda", layout)
            bias = rand((N,), dt, "cuda") if i % 2 == 0 else None
            name = torch.ops.tiled.gemm_kernel_name(a, b)
            out, _ = run_poisoned(lambda: gemm(a, b, bias), M * N, dt, "cuda")
            assert_close_rel(out, reference(a, b, bias), dt, TF32_TOL if tf32 else None)
            if _is_hopper():
                assert name.startswith(("staged", "sm90")), name
        # an odd storage offset on an otherwise aligned shape, and a batch
        big = rand((3, 260, 300), dt, "cuda")
        a3 = big[:, 1:129, 3:259]
        b3 = rand((3, 256, 200), dt, "cuda")
        if layout[1] == "T":
            b3 = b3.transpose(1, 2).contiguous().transpose(1, 2)
        assert_close_rel(gemm(a3, b3), reference(a3, b3), dt, TF32_TOL if tf32 else None)
        if _is_hopper():
            assert torch.ops.tiled.gemm_kernel_name(a3, b3).startswith("staged_a"), torch.ops.tiled.gemm_kernel_name(a3, b3)
        # broadcast 2-D B against a batched A
        b2 = rand((256, 131), dt, "cuda")
        assert_close_rel(gemm(a3, b2), reference(a3, b2), dt, TF32_TOL if tf32 else None)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "tf32"], ids=str)
def test_staged_copies_exact(dtype):
    """The staging copy (csrc/cuda/stage_copy.cu) moves every element: small
    integers (exact products and fp32 sums), so the result must equal the
    float64 reference rounded to the output type bit for bit.  Sources with
    a step in both dimensions, an odd offset, a transposed batch, a
    broadcast (stride-0) batch, and sizes not multiples of its 32x32 tiles."""
    tf32 = dtype == "tf32"
    dt = torch.float32 if tf32 else dtype
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    ints = lambda *shape: torch.randint(-2, 3, shape, generator=gen, device="cuda").to(dt)  # noqa: E731
    with tf32_mode(tf32):
        cases = [
            (ints(300, 2 * 257)[:, ::2], ints(257, 190)),  # A: column stride 2, row stride 514
            (ints(131, 77), ints(3, 77, 2 * 200)[1, :, 1::2]),  # B: odd offset, column stride 2
            (ints(4, 150, 100).transpose(1, 2), ints(4, 150, 99)),  # A: column-major batch
            (ints(3, 65, 130), ints(1, 130, 67).expand(3, 130, 67)),  # B: stride-0 batch
            (ints(97, 1000).t(), ints(97, 65).t().contiguous().t()),  # 1000 x 97 times 97 x 65, both transposed
        ]
        for a, b in cases:
            out = gemm(a, b)
            want = reference(a, b).to(dt)
            bad = (out != want).sum().item()
            assert bad == 0, (tuple(a.shape), tuple(b.shape), torch.ops.tiled.gemm_kernel_name(a, b), bad)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "tf32"], ids=str)
def test_staged_row_copy_exact(dtype):
    """The staging copy that keeps the layout (stage_copy.cu's row copy: 16-byte
    vectors built from the two aligned source chunks around each) over rows of
    1 to 600 elements starting at every offset within 16 bytes: row-major A
    with leading dimension K + 3 after a 3-element offset, and column-major A
    with leading dimension M + 3 -- batched, so rows run on across the batch.
    Small integers: the result must equal the float64 reference bit for bit."""
    tf32 = dtype == "tf32"
    dt = torch.float32 if tf32 else dtype
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    ints = lambda *shape: torch.randint(-2, 3, shape, generator=gen, device="cuda").to(dt)  # noqa: E731
    M, N, batch = 70, 72, 3
    with tf32_mode(tf32):
        for K in (1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257, 600):
            flat = ints(batch * M * (K + 3) + 3)
            row_major = flat[3:].as_strided((batch, M, K), (M * (K + 3), K + 3, 1))
            col_major = ints(batch, K, M + 3)[:, :, :M].transpose(1, 2)
            b = ints(K, N)
            for a in (row_major, col_major):
                name = torch.ops.tiled.gemm_kernel_name(a, b)
                out, _ = run_poisoned(lambda: gemm(a, b), batch * M * N, dt, "cuda")
                bad = (out.view(batch, M, N) != reference(a, b).to(dt)).sum().item()
                assert bad == 0, (K, a.stride(), name, bad)


def _simt_staging(M, N, layout):
    """Mirror of dispatch.cu's simt_plan for contiguous operands (a "T"
    operand is a column-major view with leading dimension M or K): the
    staging prefix of the kernel name."""
    b = M >= 2048 and (layout[1] == "T" or N % 4 != 0)
    a = N >= 2048 and layout[0] == "T" and M % 4 != 0 and (b or (layout[1] == "N" and N % 4 == 0))
    return {(False, False): "", (True, False): "staged_a+", (False, True): "staged_b+", (True, True): "staged_ab+"}[(a, b)]


@needs_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strict_fp32_stages_column_major_b(layout):
    """Strict fp32 on the SIMT kernel's large config: from M = 2048 a
    column-major B, or a row-major one that is not 16-byte aligned, is copied
    row-major with an aligned leading dimension first; from N = 2048 an
    unaligned column-major A gets an aligned column-major copy when B ends up
    row-major and aligned (the kernel's 16-byte copies need every M- or
    N-contiguous operand aligned); otherwise no copy."""
    with tf32_mode(False):
        # >= 132 tiles of 128x128: aligned; B unaligned; below M = 2048;
        # A unaligned in T layouts; both unaligned.
        for M, N, K in [(2048, 1100, 130), (2049, 1025, 67), (2047, 1100, 130), (1027, 2048, 300),
                        (2051, 2053, 129)]:
            a, b = make_operands(M, N, K, torch.float32, "cuda", layout)
            name = torch.ops.tiled.gemm_kernel_name(a, b)
            if _is_hopper() or name.endswith("simt_fast"):
                assert name == _simt_staging(M, N, layout) + "simt_fast", (M, N, K, layout, name)
            check(M, N, K, torch.float32, "cuda", layout, bias=(K % 2 == 0))


def _check_simt_fixed_order(M, N, K, layout, kernel):
    """Strict fp32 (M, N, K) in `layout` on `kernel` (where simt_fast runs):
    right against float64 with bias (output poisoned), the same bits on a
    second run.  Returns the operands and bias."""
    a, b = make_operands(M, N, K, torch.float32, "cuda", layout, seed=M + N + K)
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    if _is_hopper() or name.startswith("simt_fast"):
        assert name == kernel, (M, N, K, name)
    check(M, N, K, torch.float32, "cuda", layout, bias=True, seed=M + N + K)
    bias = torch.randn(N, device="cuda")
    first = gemm(a, b, bias)
    assert torch.equal(first, gemm(a, b, bias)), (M, N, K)
    assert_close_rel(first, reference(a, b, bias), torch.float32)
    return a, b, bias


def _check_replay_and_plain(a, b, bias, monkeypatch):
    """The same bits under CUDA-graph replay; the plain configuration forced
    by name (TILED_CONFIG=simt_fast: no split, no stream-K) runs, right."""
    captured = graph_replay(lambda: gemm(a, b, bias), lambda: a.copy_(torch.randn_like(a)))
    assert torch.equal(captured, gemm(a, b, bias))
    monkeypatch.setenv("TILED_CONFIG", "simt_fast")
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    if _is_hopper() or name.startswith("simt_fast"):
        assert name == "simt_fast", name
    assert_close_rel(gemm(a, b, bias), reference(a, b, bias), torch.float32)


@needs_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strict_fp32_split_k(layout, monkeypatch):
    """Strict fp32 with few 128x256 tiles and a deep K splits K over the SMs
    (slices of a multiple of 16, the last one shorter), partials summed in a
    fixed order: right against float64 with and without bias, the same bits on
    every run and under CUDA-graph replay; simt_fast forced by name keeps
    the sliced-K kernel."""
    with tf32_mode(False):
        # (M, N, K): 8 slices, the last one shorter; 8 equal slices; an odd,
        # unaligned shape (scalar copies); M just over the 32-row limit.
        for M, N, K in [(128, 4096, 4100), (64, 4096, 4096), (100, 4001, 4097), (33, 2304, 8192)]:
            a, b, bias = _check_simt_fixed_order(M, N, K, layout, "simt_fast_splitk")
        _check_replay_and_plain(a, b, bias, monkeypatch)


def _streamk_shapes(sms):
    """(M, N, K) of strict fp32 problems whose 128 x 256 tiles fill one wave
    on `sms` SMs and a little of a second: ragged (edge tiles in M and N, a
    partial last k-tile) and aligned."""
    rows = 12
    cols = -(-(sms + 5) // rows)
    if (rows * cols) % sms == 0:
        cols += 1
    return [(rows * 128 - 36, cols * 256 - 77, 1000), (rows * 128, cols * 256, 1024)]


@needs_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strict_fp32_stream_k(layout, monkeypatch):
    """Strict fp32 whose 128x256 tiles leave >= 15% of all waves' SM slots
    idle deals the last partial wave plus one full wave to every SM as runs of
    k-tiles (stream-K, partials added in a fixed order): right against float64
    with bias on interior and edge tiles, the same bits on every run and under
    CUDA-graph replay; simt_fast forced by name runs whole tiles (ladder
    step 109's bits).  Fewer tiles than SMs run whole tiles."""
    monkeypatch.delenv("TILED_CONFIG", raising=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with tf32_mode(False):
        for M, N, K in _streamk_shapes(sms):
            a, b, bias = _check_simt_fixed_order(M, N, K, layout, "simt_fast_streamk")
        _check_replay_and_plain(a, b, bias, monkeypatch)
        # Whole tiles are ladder step 109's, bit for bit.
        assert torch.equal(gemm(a, b), torch.ops.tiled.gemm_ladder(a, b, 109))
        # Fewer tiles than SMs (but more than half: no split-K): whole tiles.
        monkeypatch.delenv("TILED_CONFIG")
        M, N, K = 1280 - 3, (sms // 20 + 1) * 256, 1032
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout, seed=7)
        name = torch.ops.tiled.gemm_kernel_name(a, b)
        if _is_hopper() or name.startswith("simt_fast"):
            assert name == "simt_fast", name
        check(M, N, K, torch.float32, "cuda", layout, bias=True, seed=7)


@needs_cuda
@pytest.mark.parametrize("layout", ["NT", "TT"])
def test_strict_fp32_staging_off(layout):
    """TILED_DISABLE_KERNELS=staging runs a column-major or unaligned B, and
    an unaligned A, in place.  The switch is read once per process: a child
    process runs the case."""
    code = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import torch
import test_gemm
test_gemm.staging_off_case({layout!r})
print("ok")
"""
    env = dict(os.environ, TILED_DISABLE_KERNELS="staging")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]


def staging_off_case(layout):
    with tf32_mode(False):
        M, N, K = 2049, 2053, 67
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout)
        name = torch.ops.tiled.gemm_kernel_name(a, b)
        if _is_hopper() or name.endswith("simt_fast"):
            assert name == "simt_fast", name
        check(M, N, K, torch.float32, "cuda", layout, bias=True)


@needs_cuda
def test_staging_can_be_disabled_and_small_shapes_skip_it():
    if not _is_hopper():
        pytest.skip("staging targets the sm_90a kernels")
    a, b = make_operands(4095, 4095, 4095, torch.bfloat16, "cuda")
    assert torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged")
    a, b = make_operands(8, 4095, 4095, torch.bfloat16, "cuda")
    assert not torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged")
