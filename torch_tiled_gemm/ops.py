"""Loads the compiled operators and registers their fake (meta) kernels.

The schemas, the autograd formula and the autocast rule live in C++
(csrc/ops.cpp); this module only adds what torch.compile needs to trace the
op without running it: output shape and dtype, with the same argument checks.
"""
import torch

from . import _C  # noqa: F401  (runs TORCH_LIBRARY registrations)

_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# c10's names for dtypes, as aten's messages print them ("Long", "Float").
_SCALAR_TYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}


def _scalar_type(dtype):
    return _SCALAR_TYPE_NAMES.get(dtype, str(dtype))


def _shape(t):
    return "x".join(str(s) for s in t.shape)


def _check_args(a, b, bias, op):
    torch._check(a.dim() in (2, 3), lambda: f"{op}: a must be 2-D [M, K] or 3-D [B, M, K], got {a.dim()}-D")
    torch._check(b.dim() in (2, 3), lambda: f"{op}: b must be 2-D [K, N] or 3-D [B, K, N], got {b.dim()}-D")
    torch._check(
        a.shape[-1] == b.shape[-2],
        lambda: f"{op}: a and b shapes cannot be multiplied ({_shape(a)} and {_shape(b)})",
    )
    if a.dim() == 3 and b.dim() == 3:
        torch._check(
            a.shape[0] == b.shape[0],
            lambda: f"{op}: batch sizes of a and b differ ({_shape(a)} and {_shape(b)})",
        )
    torch._check(
        a.dtype == b.dtype,
        lambda: f"{op}: expected a and b to have the same dtype, but got: {_scalar_type(a.dtype)} != "
        f"{_scalar_type(b.dtype)}",
    )
    torch._check(
        a.dtype in _DTYPES,
        lambda: f"{op}: unsupported dtype {_scalar_type(a.dtype)} (supported: float32, float64, float16, bfloat16)",
    )
    torch._check(
        a.device == b.device,
        lambda: f"{op}: expected a and b on the same device, but got {a.device} and {b.device}",
    )
    n = b.shape[-1]
    if bias is not None:
        torch._check(
            bias.dim() == 1 and bias.shape[0] == n,
            lambda: f"{op}: bias must be 1-D of size N={n}, got shape {tuple(bias.shape)}",
        )
        torch._check(
            bias.dtype == a.dtype,
            lambda: f"{op}: bias dtype {_scalar_type(bias.dtype)} differs from the operands' dtype "
            f"{_scalar_type(a.dtype)}",
        )
    if a.dim() == 3:
        return (a.shape[0], a.shape[-2], n)
    if b.dim() == 3:
        return (b.shape[0], a.shape[-2], n)
    return (a.shape[-2], n)


@torch.library.register_fake("tiled::gemm")
def _gemm_fake(a, b, bias=None):
    return a.new_empty(_check_args(a, b, bias, "tiled.gemm"))


@torch.library.register_fake("tiled::linear")
def _linear_fake(x, weight, bias=None):
    torch._check(weight.dim() == 2, lambda: f"tiled.linear: weight must be 2-D, got shape {tuple(weight.shape)}")
    torch._check(x.dim() >= 1, lambda: "tiled.linear: input must be at least 1-D")
    torch._check(
        x.dtype == weight.dtype,
        lambda: f"tiled.linear: mat1 and mat2 must have the same dtype, but got {_scalar_type(x.dtype)} and "
        f"{_scalar_type(weight.dtype)}",
    )
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"tiled.linear: mat1 and mat2 shapes cannot be multiplied (... x {x.shape[-1]} and "
        f"{weight.shape[1]}x{weight.shape[0]})",
    )
    # The leading dims' product spelled out: reshape(-1, n) cannot infer the
    # -1 of an input with no elements.
    rows = 1
    for s in x.shape[:-1]:
        rows = rows * s
    _check_args(x.reshape(rows, x.shape[-1]), weight.t(), bias, "tiled.linear")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.register_fake("tiled::gemm_ladder")
def _gemm_ladder_fake(a, b, step):
    return a.new_empty(_check_args(a, b, None, "tiled.gemm_ladder"))


ACTIVATIONS = ("none", "relu", "gelu_erf", "gelu_tanh", "silu")


def _check_act(act, op):
    torch._check(
        act in ACTIVATIONS,
        lambda: f"{op}: unknown activation '{act}' (choose one of: none, relu, gelu_erf, gelu_tanh, silu)",
    )


def _check_like_out(t, shape, name, like, op):
    if t is None:
        return
    torch._check(
        t.dim() == len(shape) and all(a == b for a, b in zip(t.shape, shape)),
        lambda: f"{op}: {name} must have the output's shape {tuple(shape)}, got {tuple(t.shape)}",
    )
    torch._check(
        t.dtype == like.dtype,
        lambda: f"{op}: {name} dtype {_scalar_type(t.dtype)} differs from the operands' dtype "
        f"{_scalar_type(like.dtype)}",
    )


@torch.library.register_fake("tiled::gemm_epilogue")
def _gemm_epilogue_fake(a, b, bias=None, act="none", mul=None, residual=None, save_pre=False):
    op = "tiled.gemm_epilogue"
    shape = _check_args(a, b, bias, op)
    _check_act(act, op)
    _check_like_out(mul, shape, "mul", a, op)
    _check_like_out(residual, shape, "residual", a, op)
    out = a.new_empty(shape)
    return out, (a.new_empty(shape) if save_pre else a.new_empty((0,)))


def _linear_shape(x, weight, op):
    torch._check(weight.dim() == 2, lambda: f"{op}: weight must be 2-D, got shape {tuple(weight.shape)}")
    torch._check(x.dim() >= 1, lambda: f"{op}: input must be at least 1-D")
    torch._check(
        x.dtype == weight.dtype,
        lambda: f"{op}: mat1 and mat2 must have the same dtype, but got {_scalar_type(x.dtype)} and "
        f"{_scalar_type(weight.dtype)}",
    )
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"{op}: mat1 and mat2 shapes cannot be multiplied (... x {x.shape[-1]} and "
        f"{weight.shape[1]}x{weight.shape[0]})",
    )
    return (*x.shape[:-1], weight.shape[0])


def _check_bias(bias, n, like, op):
    if bias is None:
        return
    torch._check(
        bias.dim() == 1 and bias.shape[0] == n,
        lambda: f"{op}: bias must be 1-D of size N={n}, got shape {tuple(bias.shape)}",
    )
    torch._check(
        bias.dtype == like.dtype,
        lambda: f"{op}: bias dtype {_scalar_type(bias.dtype)} differs from the operands' dtype "
        f"{_scalar_type(like.dtype)}",
    )


@torch.library.register_fake("tiled::linear_act")
def _linear_act_fake(x, weight, bias=None, act="none", residual=None):
    op = "tiled.linear_act"
    shape = _linear_shape(x, weight, op)
    _check_bias(bias, weight.shape[0], x, op)
    _check_act(act, op)
    _check_like_out(residual, shape, "residual", x, op)
    return x.new_empty(shape)


@torch.library.register_fake("tiled::gated_linear")
def _gated_linear_fake(x, w_gate, w_up, act="silu", b_gate=None, b_up=None):
    op = "tiled.gated_linear"
    shape = _linear_shape(x, w_gate, op)
    _linear_shape(x, w_up, op)
    torch._check(
        w_gate.shape[0] == w_up.shape[0],
        lambda: f"{op}: w_gate and w_up must have the same number of rows, got {tuple(w_gate.shape)} and "
        f"{tuple(w_up.shape)}",
    )
    _check_bias(b_gate, w_gate.shape[0], x, op)
    _check_bias(b_up, w_up.shape[0], x, op)
    _check_act(act, op)
    return x.new_empty(shape)
