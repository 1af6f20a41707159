"""The checks themselves: correct outputs pass, damaged ones fail.

Each damage here is one a whole-matrix norm lets through on a large output
(a norm bound averages a wrong tile, column or element away): the
element-wise bound of torch_tiled_gemm/testing.py, which assert_close_rel
applies to every reference(a, b, bias), must catch it.  The outputs are
ours (the op on each device), damaged on purpose afterwards; tf32 is
simulated by rounding the operands before an fp32 product, so it runs on
the CPU too.
"""
import pytest
import torch

from conftest import (DEVICES, REL_TOL, TF32_TOL, assert_close_rel, assert_nan_inf_match, make_operands, rand,
                      reference, rel_err, run_poisoned, tf32_mode)

gemm = torch.ops.tiled.gemm


def fails(fn):
    """True when the check `fn` raises AssertionError."""
    try:
        fn()
    except AssertionError:
        return True
    return False


def operands(M, N, K, dtype, device, seed):
    a, b = make_operands(M, N, K, dtype, device, "NN", seed=seed)
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    bias = rand((N,), dtype, device, gen)
    return a, b, bias


def bump_ulps(out, index, ulps):
    """out with the element at `index` moved `ulps` units in the last place."""
    out = out.clone()
    ints = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
            torch.bfloat16: torch.int16}[out.dtype]
    out.view(ints)[index] += ulps
    return out


# ------------------------------------------------------------------ damaged 16-bit outputs

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_wrong_tile_is_caught(device, dtype):
    # One 16 x 16 tile wrong in three ways a kernel bug produces: its last
    # 16 k's missing, a neighbour tile's values, zeros.
    M, N, K = (1024, 1024, 512) if device == "cuda" else (512, 512, 256)
    a, b, _ = operands(M, N, K, dtype, device, seed=1)
    out = gemm(a, b)
    ref = reference(a, b)
    assert_close_rel(out, ref, dtype)  # ours, as computed, passes
    r, c = 16 * 7, 16 * 11
    short_k = (a[r:r + 16, :K - 16].double() @ b[:K - 16, c:c + 16].double()).to(dtype)
    for name, tile in [("last 16 k's missing", short_k), ("neighbour's values", out[r:r + 16, c + 16:c + 32]),
                       ("zeros", torch.zeros(16, 16, dtype=dtype, device=device))]:
        bad = out.clone()
        bad[r:r + 16, c:c + 16] = tile
        assert fails(lambda: assert_close_rel(bad, ref, dtype)), name


@pytest.mark.parametrize("device", DEVICES)
def test_bias_missing_on_8_columns_is_caught(device):
    M, N, K = 1000, 1024, 997
    dtype = torch.bfloat16
    a, b, bias = operands(M, N, K, dtype, device, seed=2)
    out = gemm(a, b, bias)
    ref = reference(a, b, bias)
    assert_close_rel(out, ref, dtype)
    bad = out.clone()
    bad[:, 500:508] = gemm(a, b[:, 500:508])  # the same columns without their bias
    assert rel_err(bad, ref) <= REL_TOL[dtype]  # the norm alone misses it
    assert fails(lambda: assert_close_rel(bad, ref, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(130, 513, 64), (130, 513, 700), (600, 700, 300), (1000, 1024, 997)], ids=str)
def test_single_wrong_element_is_caught(device, shape):
    M, N, K = shape
    if device == "cpu" and M * N * K > 2e8:
        pytest.skip("CPU: the smaller shapes (the largest runs on CUDA)")
    dtype = torch.bfloat16
    a, b, bias = operands(M, N, K, dtype, device, seed=3)
    out = gemm(a, b, bias)
    ref = reference(a, b, bias)
    assert_close_rel(out, ref, dtype)
    i, j = M // 2, N // 3
    big = tuple(int(v) for v in torch.nonzero(ref.abs() == ref.abs().max())[0])  # a value far from 0
    damaged = {
        "4 ulps up": bump_ulps(out, (i, j), 4),
        "4 ulps down": bump_ulps(out, (i, j), -4),
        "zero": out.index_put((torch.tensor([big[0]]), torch.tensor([big[1]])), torch.zeros(1, dtype=dtype,
                                                                                            device=device)),
        "sign": out.index_put((torch.tensor([big[0]]), torch.tensor([big[1]])), -out[big].reshape(1)),
        "neighbour": out.index_put((torch.tensor([i]), torch.tensor([j])), out[i, j + 1].reshape(1)),
    }
    for name, bad in damaged.items():
        if name == "neighbour" and torch.equal(bad, out):
            continue
        assert fails(lambda: assert_close_rel(bad, ref, dtype)), name
    assert rel_err(damaged["4 ulps up"], ref) <= REL_TOL[dtype]  # the norm alone misses it


# ------------------------------------------------------------------ tf32 precision

def tf32_operand(x, mode):
    """fp32 x rounded to tf32 (10 stored mantissa bits): 'trunc' chops the
    low 13 bits (what the tensor cores do to an fp32 register), 'rna' rounds
    to nearest, ties away (cvt.rna.tf32.f32)."""
    bits = x.contiguous().view(torch.int32)
    if mode == "rna":
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


def bf16_precision_operand(x, mode):
    if mode == "rna":
        return x.to(torch.bfloat16).float()
    return (x.contiguous().view(torch.int32) & ~0xFFFF).view(torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(256, 256, 256), (1000, 300, 33), (64, 128, 4096)], ids=str)
def test_tf32_at_bf16_precision_is_caught(device, shape):
    # tf32 operands truncated or rounded to tf32, then an fp32 product: pass
    # the tf32 check; operands kept only to bf16 precision: fail it.
    M, N, K = shape
    if device == "cpu" and K > 1000:
        pytest.skip("CPU: the shorter K (the deep one runs on CUDA)")
    a, b, bias = operands(M, N, K, torch.float32, device, seed=4)
    ref = reference(a, b, bias)
    with tf32_mode(False):  # the fp32 product below: strict fp32 (also on CUDA)
        for mode in ("trunc", "rna"):
            ok = gemm(tf32_operand(a, mode), tf32_operand(b, mode), bias)
            assert_close_rel(ok, ref, torch.float32, TF32_TOL)
            bad = gemm(bf16_precision_operand(a, mode), bf16_precision_operand(b, mode), bias)
            assert fails(lambda: assert_close_rel(bad, ref, torch.float32, TF32_TOL)), mode
            # and tf32 passes as tf32 only: the strict fp32 check rejects it
            assert fails(lambda: assert_close_rel(ok, ref, torch.float32, tf32=False)), mode


# ------------------------------------------------------------------ fp32, fp64

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_wide_types_wrong_element_or_column(device, dtype):
    M, N, K = 200, 300, 500
    a, b, bias = operands(M, N, K, dtype, device, seed=5)
    out = gemm(a, b, bias)
    ref = reference(a, b, bias)
    assert_close_rel(out, ref, dtype)
    # one product missing from one element: far below the norm bound
    i, j = 17, 29
    k = int(torch.argmax((a[i].double() * b[:, j].double()).abs()))
    bad = out.clone()
    bad[i, j] -= (a[i, k] * b[k, j]).to(dtype)
    assert fails(lambda: assert_close_rel(bad, ref, dtype))
    bad = out.clone()
    bad[:, 5] -= bias[5]
    assert fails(lambda: assert_close_rel(bad, ref, dtype))


# ------------------------------------------------------------------ NaN / Inf

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_nan_inf_value_check(device, dtype):
    # test_gemm.py's test_nan_inf_propagate check: the right NaN / Inf
    # pattern with zeros (or values 10% off) elsewhere fails it.
    a, b = make_operands(40, 30, 20, dtype, device)
    a[3, 4] = float("nan")
    a[7, 2] = float("inf")
    b[5, 9] = float("-inf")
    out = gemm(a, b)
    assert_nan_inf_match(out, a, b)
    ref = reference(a, b).to(dtype)
    fin = torch.isfinite(ref)
    zeros = torch.where(fin, torch.zeros_like(ref), ref)
    assert fails(lambda: assert_nan_inf_match(zeros, a, b))
    off = torch.where(fin, ref * 1.1, ref)
    assert fails(lambda: assert_nan_inf_match(off, a, b))
    flipped = torch.where(torch.isinf(ref), -ref, ref)
    assert fails(lambda: assert_nan_inf_match(flipped, a, b))


# ------------------------------------------------------------------ poisoning

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_cpu_poisoning_catches_an_unwritten_tile(dtype):
    # The CPU output is poisoned too: a "kernel" that leaves one 16 x 16
    # tile unwritten fails the checks, and ours, run poisoned, passes them.
    M, N, K = 96, 80, 40
    a, b, bias = operands(M, N, K, dtype, "cpu", seed=6)
    ref = reference(a, b, bias)

    def lazy():
        out = torch.empty(M, N, dtype=dtype)
        full = ref.to(dtype)
        out[:32] = full[:32]
        out[48:] = full[48:]
        out[32:48, :64] = full[32:48, :64]  # columns 64..79 of rows 32..47 never written
        return out

    bad, poisoned = run_poisoned(lazy, M * N, dtype, "cpu")
    assert poisoned
    assert fails(lambda: assert_close_rel(bad, ref, dtype))
    out, poisoned = run_poisoned(lambda: gemm(a, b, bias), M * N, dtype, "cpu")
    assert poisoned
    assert_close_rel(out, ref, dtype)


def test_cpu_poisoned_allocations_are_nan():
    out, poisoned = run_poisoned(lambda: torch.empty(1000), 1000, torch.float32, "cpu")
    assert poisoned and torch.isnan(out).all()


# ------------------------------------------------------------------ the benchmarks check what they time

def test_benchmarks_mark_a_wrong_output(monkeypatch):
    # bench.py's GEMM rows, TiledLinear rows (forward and every gradient),
    # host-overhead rows and sweep.py's cases check their outputs: ours as
    # it is passes, a kernel with one wrong element is marked FAIL.
    import os
    import sys

    from torch_tiled_gemm import bench

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import sweep

    monkeypatch.setattr(bench, "paired", lambda ours, theirs, device, rounds=6: (1.0, 1.0, 1.0))
    monkeypatch.setattr(sweep, "paired", bench.paired)
    monkeypatch.setattr(bench, "host_us_per_call", lambda fn, device, calls=2000: (fn(), 1.0)[1])
    good = [bench.gemm_case(64, 48, 80, "fp32", "NT", "cpu"), bench.gemm_case(64, 48, 80, "bf16", "TN", "cpu"),
            bench.linear_case(96, 64, 48, "bf16", "cpu"), sweep.case(33, 65, 70, "bf16", "cpu", "NT")]
    good += [bench.overhead_case(kind, "cpu", n=32, calls=2)
             for kind in ("gemm_call", "linear_call", "linear_fwd_bwd_call")]
    for c in good:
        assert c["check"] == "ok", c
        assert 0 < c["err_over_bound"] <= 1
    real = torch.ops.tiled.gemm

    def wrong(a, b, bias=None):
        out = real(a, b, bias)
        out[..., 3, 4] += 1
        return out

    monkeypatch.setattr(torch.ops.tiled, "gemm", wrong)
    for c in [bench.gemm_case(64, 48, 80, "fp32", "NN", "cpu"), sweep.case(33, 65, 70, "bf16", "cpu", "NN"),
              bench.overhead_case("gemm_call", "cpu", n=32, calls=2)]:
        assert c["check"] == "FAIL" and "[3, 4]" in c["check_failures"][0], c
    assert "**FAIL**" in bench.table([c]) and "FAILED" in bench.table([c])
