"""PyTorch's own OpInfo samples for mm, bmm, matmul, addmm and linear, run
through ttg.matmul / ttg.linear against aten, forward and backward.

Every sample of `op_db` (torch.testing._internal.common_methods_invocations)
for those ops, in each dtype the OpInfo lists that the op supports (float32,
float64, float16, bfloat16), as given and as its non-contiguous twin
(`SampleInput.noncontiguous()`), on the CPU and, where there is one, on CUDA.

The criterion, per element: our error against a float64 evaluation of the
same aten op on the same inputs may be at most twice aten's own error on that
element plus 4 unit roundoffs of the dtype times the element's magnitude
scale, the same op evaluated on |inputs| (|A||B| + |beta||input|: the size
of what a rounding can touch).  Gradients the same way, with the scale
d<|g|, op(|inputs|)>/d|input|, which for these bilinear ops is |g||B|^T,
|A|^T|g|, ...  4 unit roundoffs of the scale is torch's own bf16 tolerance
(rtol 1.6e-2) and catches one wrong product in a dot product of up to
~1/(4u) terms of similar size.

Set TILED_OPINFO_JSON=path to get {"passed", "failed", "failures"} written
there at the end of the module (for a results file); the pytest summary
counts the same cases.
"""
import json
import os

import pytest
import torch

pytest.importorskip("expecttest")  # common_methods_invocations imports it
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import torch_tiled_gemm as ttg  # noqa: E402
from conftest import DEVICES  # noqa: E402

OPS = ("mm", "bmm", "matmul", "addmm", "nn.functional.linear")
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Unit roundoff of each dtype.
UNIT = {torch.float64: 2.0**-53, torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
# Values near the dtype's smallest normal are all the absolute slack there is.
TINY = {torch.float64: 1e-300, torch.float32: 1e-30, torch.float16: 1e-4, torch.bfloat16: 1e-30}


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """addmm through ttg: the bias operand where aten's formula is exactly
    one (beta = alpha = 1, input broadcasting along the rows), else
    beta * input + alpha * (mat1 @ mat2)."""
    n = mat2.shape[-1]
    if beta == 1 and alpha == 1 and input.dim() <= 1 and input.numel() in (1, n):
        bias = input.reshape(-1).expand(n) if input.numel() == 1 else input
        return ttg.gemm(mat1, mat2, bias)
    prod = ttg.matmul(mat1, mat2)
    if alpha != 1:
        prod = prod * alpha
    return input * beta + prod if beta != 0 else prod


OURS = {
    "mm": lambda a, b: ttg.matmul(a, b),
    "bmm": lambda a, b: ttg.matmul(a, b),
    "matmul": lambda a, b: ttg.matmul(a, b),
    "addmm": _addmm,
    "nn.functional.linear": lambda x, w, bias=None: ttg.linear(x, w, bias),
}


def _opinfos():
    return [op for op in op_db if op.name in OPS]


_SAMPLES = {}


def _samples(op, device, dtype):
    """The op's samples, made once per (op, device, dtype) from a fixed seed
    (some generators are slow: bmm.triton_optimized's take ~0.3 s)."""
    key = (op.name, op.variant_test_name, device, dtype)
    if key not in _SAMPLES:
        torch.manual_seed(1000 * DTYPES.index(dtype) + _opinfos().index(op))
        _SAMPLES[key] = list(op.sample_inputs(device, dtype, requires_grad=op.supports_autograd))
    return _SAMPLES[key]


def _cases():
    """(op, dtype, sample index, contiguous?) for every sample; the counts
    are taken on the CPU (the sample generators do not depend on the device)."""
    cases = []
    for op in _opinfos():
        supported = op.supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype not in supported:
                continue
            for i in range(len(_samples(op, "cpu", dtype))):
                for contiguous in (True, False):
                    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
                    cases.append(pytest.param(op, dtype, i, contiguous,
                                              id=f"{name}-{str(dtype)[6:]}-{i}-{'c' if contiguous else 'nc'}"))
    return cases


CASES = _cases()
RESULTS = {"passed": 0, "failed": 0, "failures": []}


@pytest.fixture(scope="module", autouse=True)
def _write_results():
    yield
    path = os.environ.get("TILED_OPINFO_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(RESULTS, f, indent=1)


def _tensors(sample):
    """The sample's tensor arguments in call order (input, then args)."""
    return [t for t in (sample.input, *sample.args) if isinstance(t, torch.Tensor)]


def _rebuild(sample, fn):
    """(input, args) with fn applied to every tensor."""
    conv = lambda t: fn(t) if isinstance(t, torch.Tensor) else t  # noqa: E731
    return conv(sample.input), tuple(conv(t) for t in sample.args)


def _call(f, sample, input, args):
    return sample.output_process_fn_grad(f(input, *args, **sample.kwargs))


def _leaf(t, dtype=None):
    """A fresh leaf with t's values (dtype: cast), strides kept where possible."""
    r = t.detach()
    r = r.to(dtype) if dtype is not None else r.clone()  # clone() keeps strides of non-overlapping views
    return r.requires_grad_(t.requires_grad)


def _abs_kwargs(kwargs):
    return {k: (abs(v) if isinstance(v, (int, float)) else v) for k, v in kwargs.items()}


def check_close(name, got, ref_aten, ref64, scale, dtype):
    """got and aten's result against the float64 reference, element-wise."""
    assert got.shape == ref64.shape, f"{name}: shape {tuple(got.shape)} != {tuple(ref64.shape)}"
    assert got.dtype == dtype, f"{name}: dtype {got.dtype} != {dtype}"
    if ref64.numel() == 0:
        return
    err = (got.double() - ref64).abs()
    err_aten = (ref_aten.double() - ref64).abs()
    bound = 2 * err_aten + 4 * UNIT[dtype] * scale + TINY[dtype]
    bad = ~(err <= bound)  # NaN counts as bad
    if bad.any():
        i = bad.nonzero()[0].tolist()
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.numel()} elements off; first at {i}: ours "
            f"{got[tuple(i)].item():.6g}, aten {ref_aten[tuple(i)].item():.6g}, float64 "
            f"{ref64[tuple(i)].item():.6g}, bound {bound[tuple(i)].item():.3g}")


def run_sample(op, sample, dtype):
    ours_fn, aten_fn = OURS[op.name], op.op
    tensors = _tensors(sample)
    ours_in = _rebuild(sample, _leaf)
    aten_in = _rebuild(sample, _leaf)
    ref_in = _rebuild(sample, lambda t: _leaf(t, torch.float64))
    abs_in = _rebuild(sample, lambda t: t.detach().double().abs().requires_grad_(t.requires_grad))

    out = _call(ours_fn, sample, *ours_in)
    out_aten = _call(aten_fn, sample, *aten_in)
    out64 = _call(aten_fn, sample, *ref_in)
    abs_kwargs = _abs_kwargs(sample.kwargs)
    scale = sample.output_process_fn_grad(aten_fn(*abs_in[:1], *abs_in[1], **abs_kwargs))
    check_close("forward", out, out_aten, out64, scale.detach(), dtype)

    if not op.supports_autograd or not any(t.requires_grad for t in tensors):
        return
    flat = lambda ins: [t for t in (ins[0], *ins[1]) if isinstance(t, torch.Tensor)]  # noqa: E731
    wants = [t.requires_grad for t in tensors]
    g = torch.randn(out64.shape, dtype=torch.float64, device=out64.device)
    grads = torch.autograd.grad(out, [t for t, w in zip(flat(ours_in), wants) if w], g.to(dtype), allow_unused=True)
    grads_aten = torch.autograd.grad(out_aten, [t for t, w in zip(flat(aten_in), wants) if w], g.to(dtype),
                                     allow_unused=True)
    grads64 = torch.autograd.grad(out64, [t for t, w in zip(flat(ref_in), wants) if w], g, allow_unused=True)
    scales = torch.autograd.grad(scale, [t for t, w in zip(flat(abs_in), wants) if w], g.abs(), allow_unused=True)
    inputs = [t for t, w in zip(tensors, wants) if w]
    for k, (gr, ga, g64, gs, t) in enumerate(zip(grads, grads_aten, grads64, scales, inputs)):
        if g64 is None:
            assert gr is None or not gr.any(), f"grad {k}: nonzero where aten has none"
            continue
        assert gr is not None, f"grad {k}: missing"
        check_close(f"grad of argument {k} {tuple(t.shape)}", gr, ga, g64, gs, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, dtype, index, contiguous", CASES)
def test_opinfo_sample(device, op, dtype, index, contiguous):
    samples = _samples(op, device, dtype)
    assert index < len(samples), f"{len(samples)} samples on {device}, {index + 1} or more on the CPU"
    sample = samples[index]
    if not contiguous:
        sample = sample.noncontiguous()
    try:
        run_sample(op, sample, dtype)
    except Exception as e:
        RESULTS["failed"] += 1
        RESULTS["failures"].append(f"{device} {op.name}.{op.variant_test_name} {dtype} #{index} "
                                   f"{'c' if contiguous else 'nc'}: {str(e).splitlines()[0][:300]}")
        raise
    RESULTS["passed"] += 1


# ---------------------------------------------------------------------------
# The criterion catches a wrong kernel


class _DamageGrad(torch.autograd.Function):
    """Identity forward; its backward adds 5% of the gradient's largest
    magnitude to one element."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        d = torch.zeros_like(g).reshape(-1)
        d[d.numel() // 2] = 0.05 * g.abs().max()
        return g + d.reshape(g.shape)


def _damage_output(f):
    def damaged(*args, **kwargs):
        out = f(*args, **kwargs)
        d = torch.zeros_like(out).reshape(-1)
        d[d.numel() // 2] = 0.05 * out.detach().abs().max()
        return out + d.reshape(out.shape)
    return damaged


def _drop_bias_column(f):
    def damaged(x, w, bias=None):
        out = f(x, w, bias)
        col = int(bias.abs().argmax())
        mask = torch.zeros_like(bias)
        mask[col] = bias[col]
        return out - mask
    return damaged


def _damage_grad_of_first(f):
    return lambda x, *args, **kwargs: f(_DamageGrad.apply(x), *args, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_criterion_catches_damage(monkeypatch, dtype):
    # One wrong output element, a bias missing on one column, one wrong
    # gradient element: each fails the check on real OpInfo samples, while
    # the undamaged op passes them.
    picks = {"addmm": 0, "nn.functional.linear": 6, "matmul": 11, "mm": 0, "bmm": 0}
    ops = {op.name: op for op in _opinfos() if not op.variant_test_name}
    for name, index in picks.items():
        op = ops[name]
        sample = _samples(op, "cpu", dtype)[index]
        run_sample(op, sample, dtype)
        damages = [_damage_output, _damage_grad_of_first]
        if name == "nn.functional.linear":
            assert len(sample.args) == 2  # has a bias
            damages.append(_drop_bias_column)
        for damage in damages:
            monkeypatch.setitem(OURS, name, damage(OURS[name]))
            with pytest.raises(AssertionError):
                run_sample(op, sample, dtype)
            monkeypatch.undo()
