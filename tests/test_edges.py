"""aten's semantics at the edges, through every entry point.

* zero sizes: any of M, N, K, batch = 0 in every arrangement of 2-D / 3-D
  operands, views and strides, with and without bias, forward, backward,
  double backward, fake kernels and torch.compile;
* messages as clear as aten's: a non-tensor argument, an input whose dtype
  differs from the layer's;
* batch > 65535 (CUDA's grid limit in y and z), more than 2^31 elements per
  GPU kernel family, 16-bit operands at odd storage offsets (misaligned data
  pointers), out of memory during a staging copy.

Values are checked element by element against a float64 reference
(`assert_elementwise`): each element's error may be at most
u_out (2 |ref| + |bias|) + 4 u_acc sqrt(K) (|A||B|) for that element, with
u_out the output dtype's unit roundoff and u_acc fp32's (fp64's for fp64),
the accumulation's: the output's rounding plus an fp32 sum's error.
test_elementwise_check_catches_damage shows that one wrong element, tile or
column fails it.

The CUDA tests of > 2^31 elements need up to ~35 GB of GPU memory each
(marked slow; they skip where less is free): run this module alone on the
GPU machine, not beside other test processes.
"""
import itertools
import math
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tiled_gemm as ttg
from conftest import DEVICES, needs_cuda, run_poisoned

gemm = torch.ops.tiled.gemm
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
UNIT = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------
# Element-wise check against float64


def elementwise_bound(a, b, bias, dtype):
    """(reference, bound) for a @ b + bias in float64: the output's rounding
    (twice, for a kernel that rounds before adding the bias) and an fp32 (fp64
    for fp64) sum of K products, with its error's usual sqrt(K) growth and a
    factor 4 to spare."""
    a64, b64 = a.double(), b.double()
    ref = torch.matmul(a64, b64)
    k = a.shape[-1]
    u_acc = UNIT[torch.float64] if dtype == torch.float64 else UNIT[torch.float32]
    bound = 4 * u_acc * math.sqrt(max(k, 1)) * torch.matmul(a64.abs(), b64.abs())
    if bias is not None:
        ref = ref + bias.double()
        bound = bound + UNIT[dtype] * bias.double().abs()
    bound = bound + 2 * UNIT[dtype] * ref.abs() + 1e-300
    return ref, bound


def assert_elementwise(out, a, b, bias=None, what=""):
    dtype = a.dtype
    ref, bound = elementwise_bound(a, b, bias, dtype)
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert out.dtype == dtype, f"{what}: dtype {out.dtype} != {dtype}"
    if ref.numel() == 0:
        return
    err = (out.double() - ref).abs()
    bad = ~(err <= bound)  # NaN / Inf count as bad
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements off; first at {i}: "
                             f"{out[i].item():.6g} vs {ref[i].item():.6g} (bound {bound[i].item():.3g})")


def rand(shape, dtype, device="cpu", offset=0, gen=None):
    """Random values in `shape`, stored `offset` elements into a buffer."""
    n = math.prod(shape)
    buf = torch.randn(n + offset, dtype=torch.float32, device=device, generator=gen).to(dtype)
    return buf[offset:].view(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_elementwise_check_catches_damage(dtype):
    torch.manual_seed(0)
    M, N, K = 130, 513, 257
    a, b, bias = rand((M, K), dtype), rand((K, N), dtype), rand((N,), dtype)
    out = gemm(a, b, bias)
    assert_elementwise(out, a, b, bias)
    ref = (a.double() @ b.double() + bias.double()).to(dtype)
    assert_elementwise(ref, a, b, bias)  # correctly rounded passes
    # One wrong element (one product of its dot product dropped), one tile
    # of 16 x 16 computed from the wrong k-block offset, the bias missing on
    # one column, a result rounded through bf16 (fp32 only).
    damaged = []
    d = ref.clone()
    prods = a[65].double() * b[:, 300].double()
    d[65, 300] -= prods[prods.abs().argmax()].to(dtype)
    damaged.append(d)
    d = ref.clone()
    d[16:32, 32:48] = (a[16:32, 16:].double() @ b[:-16, 32:48].double() + bias[32:48].double()).to(dtype)
    damaged.append(d)
    d = ref.clone()
    col = int(bias.abs().argmax())
    d[:, col] -= bias[col]
    damaged.append(d)
    if dtype == torch.float32:
        damaged.append(ref.bfloat16().float())
    for i, d in enumerate(damaged):
        with pytest.raises(AssertionError):
            assert_elementwise(d, a, b, bias, what=f"damage {i}")


# ---------------------------------------------------------------------------
# Zero sizes


ARRANGEMENTS = ["22", "32", "23", "33"]


def view_of(values, kind):
    """`values` as a view of kind c (contiguous), t (column-major), s (a slice
    of a wider buffer at storage offset 1), e (expanded: stride 0 along its
    first dim, built from one row / batch)."""
    if kind == "c":
        return values.contiguous()
    if kind == "t":
        return values.transpose(-1, -2).contiguous().transpose(-1, -2)
    if kind == "s":
        wide = values.new_zeros(*values.shape[:-1], values.shape[-1] + 3)
        wide[..., 1:1 + values.shape[-1]] = values
        return wide[..., 1:1 + values.shape[-1]]
    if kind == "e":
        one = values.narrow(0, 0, 1) if values.shape[0] > 0 else values.new_zeros(1, *values.shape[1:])
        return one.expand(values.shape)
    raise ValueError(kind)


def zero_cases(sizes=(0, 1, 3), batches=(0, 1, 2)):
    """(arrangement, batch, M, N, K) with at least one of them 0."""
    for arr in ARRANGEMENTS:
        for bsz in ([None] if arr == "22" else batches):
            for M, N, K in itertools.product(sizes, repeat=3):
                if 0 in (M, N, K) or bsz == 0:
                    yield arr, bsz, M, N, K


def operand_shapes(arr, bsz, M, N, K):
    sa = (bsz, M, K) if arr[0] == "3" else (M, K)
    sb = (bsz, K, N) if arr[1] == "3" else (K, N)
    return sa, sb


def grads_of(out, inputs, g, create_graph=False):
    want = [t for t in inputs if t is not None and t.requires_grad]
    return torch.autograd.grad(out, want, g, allow_unused=True, create_graph=create_graph)


def assert_same(got, want, what):
    assert got is not None, f"{what}: missing"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12 if got.dtype == torch.float64 else 1e-2,
                               msg=lambda m: f"{what}: {m}")


def check_fwd_bwd(fn, ref_fn, tensors, what):
    """fn(*leaves) against ref_fn(*leaves) (aten), output and gradients of
    every tensor, on leaves that keep each tensor's strides."""
    ours = [t.detach().requires_grad_() if t is not None else None for t in tensors]
    refs = [t.detach().requires_grad_() if t is not None else None for t in tensors]
    out, ref = fn(*ours), ref_fn(*refs)
    assert_same(out, ref, f"{what} forward")
    g = torch.randn(ref.shape, dtype=ref.dtype, device=ref.device)
    for i, (x, y) in enumerate(zip(grads_of(out, ours, g), grads_of(ref, refs, g))):
        assert_same(x, y if y is not None else torch.zeros_like(x), f"{what} grad {i}")


def bias_for(N, dtype, use_bias, device="cpu"):
    return torch.randn(N, dtype=torch.float32, device=device).to(dtype) if use_bias else None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arr", ARRANGEMENTS)
def test_zero_sizes_gemm(device, arr):
    # torch.ops.tiled.gemm: every zero pattern x batch x views of both
    # operands (contiguous, column-major, sliced at an offset, expanded) x
    # bias, in float64 (the answers are exact: zeros, bias, or empty).
    torch.manual_seed(1)
    n = 0
    for _, bsz, M, N, K in (c for c in zero_cases() if c[0] == arr):
        sa, sb = operand_shapes(arr, bsz, M, N, K)
        for va, vb in itertools.product("ctse", repeat=2):
            a = view_of(torch.randn(sa, dtype=torch.float64, device=device), va)
            b = view_of(torch.randn(sb, dtype=torch.float64, device=device), vb)
            for use_bias in (False, True):
                bias = bias_for(N, torch.float64, use_bias, device)
                what = f"gemm {tuple(sa)}{va} @ {tuple(sb)}{vb} bias={use_bias}"
                check_fwd_bwd(lambda x, y, c: gemm(x, y, c),
                              lambda x, y, c: torch.matmul(x, y) + (c if c is not None else 0),
                              [a, b, bias], what)
                n += 1
    assert n > 100


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_sizes_dtypes(device, dtype):
    # The zero paths in every dtype (the K = 0 answer is the bias, exactly).
    torch.manual_seed(2)
    for arr, bsz, M, N, K in zero_cases(sizes=(0, 2), batches=(0, 2)):
        sa, sb = operand_shapes(arr, bsz, M, N, K)
        for va, vb in (("c", "c"), ("t", "s")):
            a = view_of(torch.randn(sa, device=device).to(dtype), va)
            b = view_of(torch.randn(sb, device=device).to(dtype), vb)
            bias = bias_for(N, dtype, True, device)
            check_fwd_bwd(lambda x, y, c: gemm(x, y, c), lambda x, y, c: torch.matmul(x, y) + c, [a, b, bias],
                          f"gemm {dtype} {tuple(sa)}{va} @ {tuple(sb)}{vb}")


MATMUL_ZERO_SHAPES = [
    # 1-D and N-D operands, broadcast batches, the reported (4, 1929, 0) @ (0, 116).
    ((0,), (0,)), ((0,), (0, 3)), ((3, 0), (0,)), ((5, 0), (0, 10)), ((0, 5), (5, 10)), ((5, 3), (3, 0)),
    ((2, 0, 4), (4,)), ((2, 3, 0), (0,)), ((0,), (2, 0, 3)), ((4, 1929, 0), (0, 116)), ((3, 5, 0), (0, 10)),
    ((2, 0, 3, 4), (4, 5)), ((2, 1, 3, 0), (4, 0, 5)), ((0, 1, 3, 4), (2, 4, 5)), ((1, 3, 4), (0, 4, 5)),
    ((2, 2, 3, 0), (2, 2, 0, 5)), ((0, 3, 4), (4, 5)), ((3, 4), (0, 4, 5)), ((3, 0), (2, 2, 0, 5)),
    ((2, 1, 3, 4), (1, 0, 4, 5)), ((5, 5, 0), (0, 5)), ((0, 0), (5, 0, 0)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", MATMUL_ZERO_SHAPES, ids=str)
def test_zero_sizes_matmul(device, sa, sb):
    # ttg.matmul: torch.matmul's shapes, values and gradients, for plain,
    # transposed (last two dims) and sliced views.
    torch.manual_seed(3)
    for va, vb in itertools.product("cts" if len(sa) > 1 else "c", "cts" if len(sb) > 1 else "c"):
        a = view_of(torch.randn(sa, dtype=torch.float64, device=device), va)
        b = view_of(torch.randn(sb, dtype=torch.float64, device=device), vb)
        check_fwd_bwd(ttg.matmul, torch.matmul, [a, b], f"matmul {sa}{va} @ {sb}{vb}")


LINEAR_ZERO_SHAPES = [  # (x shape, out_features)
    ((0, 3), 4), ((3, 0), 4), ((3, 4), 0), ((0, 0), 0), ((2, 3, 0), 5), ((0, 3, 4), 5), ((2, 0, 4), 5),
    ((2, 3, 4), 0), ((4, 129, 0), 116), ((0,), 3), ((3,), 0), ((2, 1, 0, 1, 2), 4),
]


@pytest.mark.parametrize("xs,out_features", LINEAR_ZERO_SHAPES, ids=str)
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_zero_sizes_linear(device, xs, out_features, use_bias):
    # tiled.linear, ttg.linear and TiledLinear against F.linear / nn.Linear.
    torch.manual_seed(4)
    in_features = xs[-1]
    for vx, vw in itertools.product("cts" if len(xs) > 1 else "c", "cts"):
        x = view_of(torch.randn(xs, dtype=torch.float64, device=device), vx)
        w = view_of(torch.randn(out_features, in_features, dtype=torch.float64, device=device), vw)
        bias = bias_for(out_features, torch.float64, use_bias, device)
        what = f"linear {xs}{vx} weight {tuple(w.shape)}{vw} bias={use_bias}"
        check_fwd_bwd(ttg.linear, F.linear, [x, w, bias], what)
        check_fwd_bwd(torch.ops.tiled.linear, F.linear, [x, w, bias], "tiled." + what)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Initializing zero-element tensors is a no-op"
        lin = nn.Linear(in_features, out_features, bias=use_bias, dtype=torch.float64, device=device)
    tl = ttg.TiledLinear.from_linear(lin)
    x = torch.randn(xs, dtype=torch.float64, device=device, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, ref = tl(x), lin(x2)
    assert_same(out, ref, "TiledLinear forward")
    g = torch.randn(ref.shape, dtype=torch.float64, device=device)
    got = torch.autograd.grad(out, [x, *tl.parameters()], g)
    want = torch.autograd.grad(ref, [x2, *lin.parameters()], g)
    for i, (p, q) in enumerate(zip(got, want)):
        assert_same(p, q, f"TiledLinear grad {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arr", ARRANGEMENTS)
def test_zero_sizes_double_backward(device, arr):
    # Second derivatives through the op's own backward (which calls the op):
    # d/d(a, b, bias, g) of <grad_a, r_a> + <grad_b, r_b>, as aten gives them.
    torch.manual_seed(5)
    for _, bsz, M, N, K in (c for c in zero_cases(sizes=(0, 2), batches=(0, 2)) if c[0] == arr):
        sa, sb = operand_shapes(arr, bsz, M, N, K)
        base = [torch.randn(s, dtype=torch.float64, device=device) for s in (sa, sb, (N,))]
        results = []
        for fn in (lambda x, y, c: gemm(x, y, c), lambda x, y, c: torch.matmul(x, y) + c):
            a, b, c = (t.clone().requires_grad_() for t in base)
            out = fn(a, b, c)
            g = torch.ones_like(out).requires_grad_()
            ga, gb, gc = torch.autograd.grad(out, (a, b, c), g, create_graph=True)
            torch.manual_seed(6)
            s = (ga * torch.randn_like(ga)).sum() + (gb * torch.randn_like(gb)).sum() + (gc * 0.5).sum()
            second = torch.autograd.grad(s, (a, b, c, g), allow_unused=True)
            results.append([r if r is not None else torch.zeros_like(t) for r, t in zip(second, (a, b, c, g))])
        for i, (x, y) in enumerate(zip(*results)):
            assert_same(x, y, f"double backward {arr} {sa} @ {sb}, input {i}")


def test_zero_sizes_fake_kernels():
    # The fake (meta) kernels give aten's output shapes for zero sizes, and
    # opcheck (schema, fake tensor, autograd registration, AOT dispatch)
    # passes on them.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        for arr, bsz, M, N, K in zero_cases(sizes=(0, 2), batches=(0, 2)):
            sa, sb = operand_shapes(arr, bsz, M, N, K)
            a, b = torch.empty(sa), torch.empty(sb)
            assert gemm(a, b, torch.empty(N)).shape == torch.matmul(a, b).shape
        for xs, out_features in LINEAR_ZERO_SHAPES:
            x, w = torch.empty(xs), torch.empty(out_features, xs[-1])
            assert torch.ops.tiled.linear(x, w, torch.empty(out_features)).shape == F.linear(x, w).shape
    # opcheck in full (its AOT dispatch test is the slow part) on the
    # reported shapes, its fake-tensor test on more.
    full = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for (sa, sb), utils in [(((4, 7, 0), (0, 5)), full), (((3, 5, 0), (0, 10)), full),
                            (((0, 3, 4), (0, 4, 2)), full[2:3]), (((3, 0), (2, 0, 4)), full[2:3]),
                            (((2, 3, 4), (4, 0)), full[2:3])]:
        a = torch.randn(sa, dtype=torch.float64, requires_grad=True)
        b = torch.randn(sb, dtype=torch.float64, requires_grad=True)
        bias = torch.randn(sb[-1], dtype=torch.float64, requires_grad=True)
        torch.library.opcheck(gemm, (a, b, bias), test_utils=utils)
    for (xs, out_features), utils in [(((2, 3, 0), 5), full), (((0, 4), 3), full[2:3]), (((3, 4), 0), full[2:3])]:
        x = torch.randn(xs, dtype=torch.float64, requires_grad=True)
        w = torch.randn(out_features, xs[-1], dtype=torch.float64, requires_grad=True)
        bias = torch.randn(out_features, dtype=torch.float64, requires_grad=True)
        torch.library.opcheck(torch.ops.tiled.linear, (x, w, bias), test_utils=utils)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_sizes_compile(device):
    # torch.compile (fullgraph) of each entry point on zero-size inputs:
    # outputs and gradients as eager aten gives them.
    torch._dynamo.reset()
    funcs = {
        "gemm": (lambda a, b, c: gemm(a, b, c), lambda a, b, c: torch.matmul(a, b) + c),
        "matmul": (lambda a, b, c: ttg.matmul(a, b) + c, lambda a, b, c: torch.matmul(a, b) + c),
        "linear": (lambda a, b, c: ttg.linear(a, b.t(), c), lambda a, b, c: F.linear(a, b.t(), c)),
    }
    shapes = [((4, 9, 0), (0, 5)), ((3, 5, 0), (0, 10)), ((0, 3, 4), (4, 6))]
    for name, (ours, ref) in funcs.items():
        compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
        for sa, sb in shapes:
            a = view_of(torch.randn(sa, dtype=torch.float64, device=device), "t")
            b = torch.randn(sb, dtype=torch.float64, device=device)
            c = torch.randn(sb[-1], dtype=torch.float64, device=device)
            check_fwd_bwd(compiled, ref, [a, b, c], f"compiled {name} {sa} @ {sb}")


# ---------------------------------------------------------------------------
# Messages


def message(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    raise AssertionError("no error raised")


@pytest.mark.parametrize("device", DEVICES)
def test_non_tensor_argument_message(device):
    # Exactly torch's TypeError, e.g. "matmul(): argument 'input' (position 1)
    # must be Tensor, not numpy.ndarray".
    t = torch.randn(3, 3, device=device)
    arr = np.ones((3, 3), dtype=np.float32)
    assert message(lambda: ttg.matmul(arr, t)) == message(lambda: torch.matmul(arr, t))
    assert message(lambda: ttg.matmul(t, arr)) == message(lambda: torch.matmul(t, arr))
    assert message(lambda: ttg.matmul(t, [[1.0]])) == message(lambda: torch.matmul(t, [[1.0]]))
    assert message(lambda: ttg.linear(arr, t)) == message(lambda: F.linear(arr, t))
    assert message(lambda: ttg.linear(t, arr)) == message(lambda: F.linear(t, arr))
    assert message(lambda: ttg.linear(t, t, arr)) == message(lambda: F.linear(t, t, arr))
    lin = nn.Linear(3, 3, device=device)
    assert message(lambda: ttg.TiledLinear.from_linear(lin)(arr)) == message(lambda: lin(arr))
    kind, text = message(lambda: ttg.gemm(arr, t))
    assert kind is TypeError and text == "gemm(): argument 'a' (position 1) must be Tensor, not numpy.ndarray"
    kind, text = message(lambda: ttg.gemm(t, t, 1.0))
    assert kind is TypeError and text == "gemm(): argument 'bias' (position 3) must be Tensor, not float"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("x_dtype", [torch.int64, torch.float64, torch.float16, torch.int32], ids=str)
@pytest.mark.parametrize("use_bias", [True, False])
def test_linear_dtype_message(device, x_dtype, use_bias):
    # An input of another dtype than the layer's: nn.Linear's words ("mat1 and
    # mat2 must have the same dtype, but got Long and Float"), not a remark
    # about the bias; from eager (with and without autograd) and from the fake
    # kernel that torch.compile traces.
    lin = nn.Linear(3, 4, bias=use_bias, device=device)
    tl = ttg.TiledLinear.from_linear(lin)
    x = torch.ones(2, 3, device=device).to(x_dtype)
    names = {torch.int64: "Long", torch.float64: "Double", torch.float16: "Half", torch.int32: "Int"}
    expected = f"mat1 and mat2 must have the same dtype, but got {names[x_dtype]} and Float"
    if use_bias:
        kind, text = message(lambda: lin(x))
        assert expected in text  # what nn.Linear says
    for fn in (lambda: tl(x), lambda: ttg.linear(x, lin.weight, lin.bias),
               lambda: torch.ops.tiled.linear(x, lin.weight.detach(), None)):
        kind, text = message(fn)
        assert kind is RuntimeError and expected in text and "bias dtype" not in text, text
    with torch.no_grad():
        kind, text = message(lambda: tl(x))
        assert expected in text and "bias dtype" not in text, text
    torch._dynamo.reset()
    compiled = torch.compile(tl, fullgraph=True, backend="aot_eager")
    kind, text = message(lambda: compiled(x))
    assert expected in text and "bias dtype" not in text, text
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        w = torch.empty(4, 3, device=device)
        kind, text = message(lambda: torch.ops.tiled.linear(torch.empty(2, 3, dtype=x_dtype, device=device), w,
                                                            torch.empty(4, device=device)))
        assert expected in text and "bias dtype" not in text, text


# ---------------------------------------------------------------------------
# batch > 65535


def batched_cases(device, dtype, bsz, M, N, K):
    """gemm arrangements of `bsz` batches: 3-D x 3-D, 3-D x 2-D as one tall
    GEMM and as a batch (a transposed-batch view that does not fold), 2-D x
    3-D, each with a bias."""
    gen = torch.Generator(device=device).manual_seed(bsz + M)
    a3, b3 = rand((bsz, M, K), dtype, device, gen=gen), rand((bsz, K, N), dtype, device, gen=gen)
    a2, b2 = rand((M, K), dtype, device, gen=gen), rand((K, N), dtype, device, gen=gen)
    bias = rand((N,), dtype, device, gen=gen)
    a3_unfolded = rand((M, bsz, K), dtype, device, gen=gen).transpose(0, 1)
    return {"3x3": (a3, b3, bias), "3x2": (a3, b2, bias), "3x2 unfolded": (a3_unfolded, b2, bias),
            "2x3": (a2, b3, bias)}


def check_batched_grads(a, b, bias, out, what):
    """Gradients of gemm(a, b, bias) element-wise against float64, each
    written as the product it is: grad_a = g b^T, grad_b = a^T g (a shared
    operand's summed over the batch: one product over the batch's rows),
    grad_bias = 1^T g."""
    g = torch.randn(out.shape, device=out.device).to(out.dtype)
    ga, gb, gc = torch.autograd.grad(out, (a, b, bias), g)
    a, b = a.detach(), b.detach()
    K, N = a.shape[-1], b.shape[-1]
    bt = b.transpose(-1, -2)
    if a.dim() == 3:
        assert_elementwise(ga, g, bt, None, what + " grad_a")
    else:  # sum over the batch of g_i b_i^T
        assert_elementwise(ga, g.transpose(0, 1).reshape(a.shape[0], -1), bt.reshape(-1, K), None, what + " grad_a")
    if b.dim() == 3:
        assert_elementwise(gb, a.transpose(-1, -2) if a.dim() == 3 else a.t(), g, None, what + " grad_b")
    else:  # sum over the batch of a_i^T g_i
        assert_elementwise(gb, a.reshape(-1, K).t(), g.reshape(-1, N), None, what + " grad_b")
    rows = g.reshape(-1, N)
    assert_elementwise(gc.unsqueeze(0), torch.ones(1, rows.shape[0], dtype=g.dtype, device=g.device), rows, None,
                       what + " grad_bias")


def assert_batches(out, a, b, bias, what, limit=2**24):
    """assert_elementwise over every batch of a small output; over the
    batches around 65535 and the last ones (and every element finite: the
    memory was poisoned before the call) of a large one, whose float64
    reference would not fit."""
    if out.numel() <= limit:
        return assert_elementwise(out, a, b, bias, what)
    assert bool(torch.isfinite(out).all()), f"{what}: non-finite elements (unwritten?)"
    n = out.shape[0]
    idx = torch.tensor(sorted({0, 1, 65534, 65535, 65536, n // 2, n - 2, n - 1} & set(range(n))), device=out.device)
    pick = lambda t: t.index_select(0, idx) if t.dim() == 3 else t  # noqa: E731
    assert_elementwise(out.index_select(0, idx), pick(a), pick(b), bias, what + f" (batches {idx.tolist()})")


def check_batched(device, dtype, bsz, M, N, K, grads=False):
    """Every arrangement of batched_cases: values (and, for fp32 / fp64,
    gradients) against float64.  (In 16 bits the gradient of a shared
    operand is summed over the batch after each batch's rounding, as aten's
    is, which the one-product bound does not cover.)"""
    names = {}
    for name, (a, b, bias) in batched_cases(device, dtype, bsz, M, N, K).items():
        names[name] = ttg.kernel_name(a, b)
        if grads:
            a.requires_grad_(), b.requires_grad_(), bias.requires_grad_()
        out, _ = run_poisoned(lambda: gemm(a, b, bias), bsz * M * N, dtype, device)
        assert_batches(out.detach(), a.detach(), b.detach(), bias.detach(),
                       f"{name} {dtype} batch {bsz} ({names[name]})")
        if grads:
            check_batched_grads(a, b, bias, out, f"{name} {dtype} batch {bsz}")
        del out
    return names


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_batch_over_65535_cpu(dtype):
    check_batched("cpu", dtype, 65537, 2, 3, 4, grads=dtype in (torch.float32, torch.float64))


def test_matmul_batch_over_65535_cpu():
    # N-D matmul that flattens to > 65535 batches, broadcasting one side.
    a = torch.randn(257, 256, 1, 3, 5, dtype=torch.float64)
    b = torch.randn(1, 4, 5, 2, dtype=torch.float64)
    torch.testing.assert_close(ttg.matmul(a, b), torch.matmul(a, b))


@needs_cuda
@pytest.mark.parametrize("dtype,shape", [
    (torch.bfloat16, (128, 128, 64)),   # Hopper tensor cores (sm90_*)
    (torch.float16, (16, 256, 64)),     # small M: skinny refuses > 65535 batches, another family takes it
    (torch.bfloat16, (64, 64, 63)),     # unaligned: staged copies, then the tensor cores
    (torch.float32, (32, 32, 32)),      # simt_fast
    (torch.float64, (8, 8, 8)),         # simt_general
], ids=str)
def test_batch_over_65535_cuda(dtype, shape):
    M, N, K = shape
    names = check_batched("cuda", dtype, 65600, M, N, K, grads=dtype == torch.float32)
    print(dtype, shape, names)


@needs_cuda
def test_batch_over_65535_cuda_simt_general():
    # The general SIMT kernel in every dtype (the other families off; the
    # switch is read once per process).
    run_in_subprocess("""
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            names = test_edges.check_batched("cuda", dtype, 65600, 16, 16, 16)
            assert all(n == "simt_general" for n in names.values()), names
    """, TILED_DISABLE_KERNELS="hopper,sm80,skinny,simt_fast,staging")


def run_in_subprocess(body, **env):
    code = "import sys, torch\nsys.path.insert(0, %r)\nimport test_edges\n" % os.path.join(ROOT, "tests")
    code += textwrap.dedent(body)
    res = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


# ---------------------------------------------------------------------------
# More than 2^31 elements (CUDA)

INT32_MAX = 2**31 - 1


def check_sampled(out, a, b, bias, what, samples=48):
    """Rows and columns of a huge product against float64: the first and last
    ones, those where an element's offset passes 2^31 in A, B or C (the
    first a 32-bit index would get wrong), and random ones; and every element
    written (the output's memory was NaN before the call)."""
    assert bool(torch.isfinite(out).all()), f"{what}: non-finite elements (unwritten?)"
    M, N = out.shape[-2], out.shape[-1]
    gen = torch.Generator().manual_seed(M * 31 + N)

    def pick(n, lds):
        edge = {0, 1, n - 2, n - 1, n - 33, n - 65}
        for ld in lds:
            if ld > 0:
                edge |= {2**31 // ld - 1, 2**31 // ld, 2**31 // ld + 1}
        edge = torch.tensor(sorted(i for i in edge if 0 <= i < n))
        return torch.unique(torch.cat([edge, torch.randint(0, n, (samples,), generator=gen)])).to(out.device)

    rows = pick(M, [abs(a.stride(0)), out.stride(0)])
    cols = pick(N, [abs(b.stride(1))])
    sub = out.index_select(-2, rows).index_select(-1, cols)
    assert_elementwise(sub, a.index_select(-2, rows), b.index_select(-1, cols),
                       None if bias is None else bias.index_select(0, cols), what)


def big_case(dtype, M, N, K, layout="NN", bias=True):
    """Operands whose product has > 2^31 elements somewhere (A, B or C)."""
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = rand((M, K), dtype, "cuda", gen=gen) if layout[0] == "N" else rand((K, M), dtype, "cuda", gen=gen).t()
    b = rand((K, N), dtype, "cuda", gen=gen) if layout[1] == "N" else rand((N, K), dtype, "cuda", gen=gen).t()
    c = rand((N,), dtype, "cuda", gen=gen) if bias else None
    return a, b, c


BIG = [  # (family prefix, dtype, M, N, K, layout, env); each has > 2^31 elements in A, B or C
    ("sm90_", torch.bfloat16, 46400, 46400, 64, "NN", {}),           # C
    ("sm90_", torch.bfloat16, 2097216, 256, 1024, "NN", {}),         # A
    ("sm90_", torch.float16, 256, 2097216, 1024, "NT", {}),          # B (x @ W^T with a huge W)
    ("skinny_", torch.bfloat16, 16, 524416, 4096, "NN", {"TILED_CONFIG": "16x128sk1"}),   # B
    ("skinny_", torch.bfloat16, 524416, 16, 4096, "NN", {"TILED_CONFIG": "16x128sk1"}),   # A, swapped
    ("staged_a+sm90_", torch.bfloat16, 2099264, 256, 1023, "NN", {}),  # A, unaligned: a staged copy
    ("simt_fast", torch.float32, 46400, 46400, 16, "NN", {}),         # C
    ("simt_fast", torch.float32, 2097216, 64, 1024, "NN", {}),        # A
    ("simt_general", torch.float64, 46400, 46400, 4, "NN", {}),       # C
]


def run_big(prefix, dtype, M, N, K, layout):
    assert max(M * K, K * N, M * N) > INT32_MAX
    a, b, c = big_case(dtype, M, N, K, layout)
    name = ttg.kernel_name(a, b)
    assert name.startswith(prefix), f"{M}x{N}x{K} {layout} {dtype} ran {name}, expected {prefix}*"
    out, _ = run_poisoned(lambda: gemm(a, b, c), M * N, dtype, "cuda")
    check_sampled(out, a, b, c, f"{name} {M}x{N}x{K} {layout}")
    del a, b, c, out
    torch.cuda.empty_cache()
    return name


@needs_cuda
@pytest.mark.slow
@pytest.mark.parametrize("prefix,dtype,M,N,K,layout,env", BIG,
                         ids=[f"{c[0].rstrip('_')}-{str(c[1])[6:]}-{c[2]}x{c[3]}x{c[4]}-{c[5]}" for c in BIG])
def test_over_2_31_elements(monkeypatch, prefix, dtype, M, N, K, layout, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    need = (M * K + K * N + 2 * M * N) * torch.finfo(dtype).bits // 8 + (M * K * 2 if "staged" in prefix else 0)
    if torch.cuda.mem_get_info()[0] < need * 1.1:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of free GPU memory")
    print(run_big(prefix, dtype, M, N, K, layout))


@needs_cuda
@pytest.mark.slow
def test_over_2_31_elements_simt_general_16bit():
    # The general SIMT kernel in 16-bit and fp32 (others off, in a process of its own).
    out = run_in_subprocess("""
        for dtype in (torch.bfloat16, torch.float32):
            print(test_edges.run_big("simt_general", dtype, 46400, 46400, 16, "NN"))
    """, TILED_DISABLE_KERNELS="hopper,sm80,skinny,simt_fast,staging")
    print(out)


# ---------------------------------------------------------------------------
# 16-bit operands at odd storage offsets (misaligned data pointers)

OFFSETS = [1, 3, 7]
OFFSET_SHAPES = [(37, 45, 70), (129, 67, 300)]


def offset_operands(M, N, K, dtype, device, layout, off_a, off_b, off_bias, bsz=None):
    gen = torch.Generator(device=device).manual_seed(M + N + K + off_a)
    lead = () if bsz is None else (bsz,)
    a = rand(lead + ((M, K) if layout[0] == "N" else (K, M)), dtype, device, off_a, gen)
    b = rand(lead + ((K, N) if layout[1] == "N" else (N, K)), dtype, device, off_b, gen)
    a = a if layout[0] == "N" else a.transpose(-1, -2)
    b = b if layout[1] == "N" else b.transpose(-1, -2)
    bias = rand((N,), dtype, device, off_bias, gen)
    return a, b, bias


@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512", "amx"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_odd_storage_offsets_cpu(monkeypatch, isa, dtype):
    if isa == "amx" and dtype != torch.bfloat16:
        pytest.skip("the AMX kernel is bf16 only")
    monkeypatch.setenv("TILED_CONFIG", isa)
    probe = torch.zeros(2, 2, dtype=dtype)
    if ttg.kernel_name(probe, probe) != f"cpu_blocked_{isa}":
        pytest.skip(f"this CPU has no {isa}")
    for (M, N, K), layout, off in itertools.product(OFFSET_SHAPES, ["NN", "TN", "NT", "TT"], OFFSETS):
        a, b, bias = offset_operands(M, N, K, dtype, "cpu", layout, off, 8 - off, off + 2)
        assert a.storage_offset() == off
        if dtype.itemsize == 2:
            assert a.data_ptr() % 4 == 2
        assert_elementwise(gemm(a, b, bias), a, b, bias, f"{isa} {layout} offset {off} {M}x{N}x{K}")
        a3, b3, bias = offset_operands(M, N, 16, dtype, "cpu", layout, off, off, off, bsz=2)
        assert_elementwise(gemm(a3, b3, bias), a3, b3, bias, f"{isa} batched {layout} offset {off}")


CUDA_OFFSET_SHAPES = [
    (16, 4096, 512),    # skinny territory (min(M, N) <= 64)
    (4096, 16, 512),
    (1024, 1024, 1024),  # tensor cores (after staged copies when misaligned)
    (300, 257, 129),
    (7, 9, 11),
]


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["NN", "TN", "NT", "TT"])
def test_odd_storage_offsets_cuda(dtype, layout):
    names = set()
    for (M, N, K), off in itertools.product(CUDA_OFFSET_SHAPES, OFFSETS):
        a, b, bias = offset_operands(M, N, K, dtype, "cuda", layout, off, 8 - off, off + 2)
        assert a.data_ptr() % 16 != 0
        name = ttg.kernel_name(a, b)
        names.add(name)
        out, _ = run_poisoned(lambda: gemm(a, b, bias), M * N, dtype, "cuda")
        assert_elementwise(out, a, b, bias, f"{name} {layout} offset {off} {M}x{N}x{K}")
        # Only one operand misaligned, the other aligned.
        a2, b2, _ = offset_operands(M, N, K, dtype, "cuda", layout, 0, off, 0)
        assert_elementwise(gemm(a2, b2), a2, b2, None, f"{ttg.kernel_name(a2, b2)} {layout} b offset {off}")
    print(dtype, layout, sorted(names))


# ---------------------------------------------------------------------------
# Out of memory during a staging copy (CUDA)


def test_oom_error_type():
    # The stable ABI carries the C++ side's out-of-memory back as a
    # RuntimeError (csrc/torch_stable.h); the Autograd kernels raise torch's
    # OutOfMemoryError again, and leave every other error as it was.
    from torch_tiled_gemm import ops

    with pytest.raises(torch.OutOfMemoryError, match="tiled: CUDA out of memory: could not allocate 12"):
        ops._reraise_oom(RuntimeError("tiled: CUDA out of memory: could not allocate 12 elements on cuda:0 (...)"))
    with pytest.raises(RuntimeError, match="^other$") as e:
        ops._reraise_oom(RuntimeError("other"))
    assert type(e.value) is RuntimeError


@needs_cuda
def test_oom_in_staging_copy():
    # A row-major A with an odd K (no 16-byte aligned rows) reaches the
    # tensor cores through an aligned copy of A (~134 MB here).  With the
    # process's allocator capped just above what it holds, that copy cannot
    # be made: torch's OutOfMemoryError, and nothing allocated is left behind.
    # In a fresh process: in this one the caching allocator may hold free
    # blocks from earlier tests that the copy would fit in under any cap
    # (measured on an H100: 262 MB reserved and free after empty_cache).  A
    # cap, not a filler tensor taking the GPU's free memory: other test
    # processes share the GPU and must not be starved.
    run_in_subprocess("""
        import torch_tiled_gemm as ttg
        from conftest import assert_elementwise
        M, N, K = 4096, 256, 16383
        # Made in place, in bf16: a float32 temporary's freed block would stay
        # reserved around the bf16 tensor carved from it (402 MB reserved for
        # 143 MB allocated, measured on an H100), and the copy would fit there.
        a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").normal_()
        b = torch.empty((K, N), dtype=torch.bfloat16, device="cuda").normal_()
        name = ttg.kernel_name(a, b)
        assert name.startswith("staged_a+"), name
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        assert torch.cuda.memory_reserved() - before < 64 * 2**20, (torch.cuda.memory_reserved(), before)
        total = torch.cuda.get_device_properties(a.device).total_memory
        reserved = torch.cuda.memory_reserved()
        limit = reserved + 32 * 2**20  # room for the 2 MB output, not for the copy
        torch.cuda.set_per_process_memory_fraction(limit / total, a.device)
        try:
            out = torch.ops.tiled.gemm(a, b)
        except torch.OutOfMemoryError:
            out = None
        torch.cuda.synchronize()
        state = (f"reserved {reserved} -> {torch.cuda.memory_reserved()}, limit {limit}, allocated {before} -> "
                 f"{torch.cuda.memory_allocated()}")
        assert out is None, f"no OutOfMemoryError ({name}): {state}"
        assert torch.cuda.memory_allocated() == before, state
        torch.cuda.set_per_process_memory_fraction(1.0, a.device)
        # The op still works afterwards.
        assert_elementwise(torch.ops.tiled.gemm(a, b), a, b)
        print("ok")
    """)
