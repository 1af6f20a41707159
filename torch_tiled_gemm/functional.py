"""Python conveniences over torch.ops.tiled.gemm with torch's semantics."""
from typing import Optional

import torch

from .ops import direct as _direct, gated_direct as _gated_direct, gated_linear_direct as _gated_linear_direct
from .ops import gemm_direct as _gemm_direct, linear_act_direct as _linear_act_direct, linear_direct as _linear_direct

_gemm = torch.ops.tiled.gemm.default
_linear = torch.ops.tiled.linear.default


def _type_name(obj) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _require_tensor(fn: str, name: str, position: int, obj, optional: bool = False) -> None:
    """The TypeError torch's own functions raise for a non-tensor argument,
    e.g. "matmul(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"."""
    if isinstance(obj, torch.Tensor) or (optional and obj is None):
        return
    raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not {_type_name(obj)}")


def _numel(shape) -> int:
    """Product of `shape` (SymInts welcome).  Used instead of reshape's -1,
    which cannot be inferred for a tensor with no elements."""
    n = 1
    for s in shape:
        n = n * s
    return n


def gemm(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """a [M,K] or [B,M,K] times b [K,N] or [B,K,N] (+ bias [N]); see the README."""
    # A call that records a gradient skips the dispatcher's hop to the
    # Autograd kernel where that changes nothing (ops.py, the direct path;
    # direct() accepts tensors only).
    if _direct(a, b, bias):
        return _gemm_direct(a, b, bias)
    _require_tensor("gemm", "a", 1, a)
    _require_tensor("gemm", "b", 2, b)
    _require_tensor("gemm", "bias", 3, bias, optional=True)
    return _gemm(a, b, bias)


def _gemm_call(a, b):
    """gemm(a, b) for matmul (operands checked there)."""
    if _direct(a, b, None):
        return _gemm_direct(a, b, None)
    return _gemm(a, b, None)


def kernel_name(a: torch.Tensor, b: torch.Tensor) -> str:
    """The kernel the dispatch layer would run for gemm(a, b) (e.g. "simt_general")."""
    _require_tensor("kernel_name", "a", 1, a)
    _require_tensor("kernel_name", "b", 2, b)
    return torch.ops.tiled.gemm_kernel_name(a, b)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul's semantics (1-D operands, N-D broadcasting) through tiled.gemm."""
    _require_tensor("matmul", "input", 1, a)
    _require_tensor("matmul", "other", 2, b)
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D"
        )
    a_vec, b_vec = a.dim() == 1, b.dim() == 1
    if a_vec:
        a = a.unsqueeze(0)
    if b_vec:
        b = b.unsqueeze(-1)
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(
            "a and b shapes cannot be multiplied "
            f"({'x'.join(map(str, a.shape))} and {'x'.join(map(str, b.shape))})"
        )
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if a.dim() <= 3 and b.dim() <= 3 and (a.dim() == 2 or b.dim() == 2 or a.shape[0] == b.shape[0]):
        # What the op takes as is: 2-D x 2-D, a batch against a shared 2-D
        # operand (3-D x 2-D folds into one tall GEMM inside the op where the
        # batches are evenly spaced rows), 3-D x 3-D of one batch size.
        out = _gemm_call(a, b)
    elif b.dim() == 2:
        # [..., M, K] @ [K, N]: fold every leading dim into M (a view when possible).
        lead = a.shape[:-1]
        out = _gemm_call(a.reshape(_numel(lead), k), b).reshape(*lead, n)
    else:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        nb = _numel(batch)

        def flat(t, rows, cols):
            # An operand with one matrix for every batch stays 2-D (the op
            # broadcasts it without copying); others get the broadcast batch.
            if _numel(t.shape[:-2]) == 1 and nb != 1:
                return t.reshape(rows, cols)
            return t.expand(*batch, rows, cols).reshape(nb, rows, cols)

        out = _gemm_call(flat(a, m, k), flat(b, k, n)).reshape(*batch, m, n)
    if a_vec:
        out = out.squeeze(-2)
    if b_vec:
        out = out.squeeze(-1)
    return out


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """F.linear's semantics: x [..., in] @ weight[out, in]^T + bias.

    The weight is read in place (a transposed view) and its gradient is
    produced directly in its own [out, in] layout.
    """
    if _direct(x, weight, bias):  # as in gemm
        return _linear_direct(x, weight, bias)
    _require_tensor("linear", "input", 1, x)
    _require_tensor("linear", "weight", 2, weight)
    _require_tensor("linear", "bias", 3, bias, optional=True)
    return _linear(x, weight, bias)


_linear_act = torch.ops.tiled.linear_act.default
_gated_linear = torch.ops.tiled.gated_linear.default

# Spellings accepted for the epilogue's activations (the op takes the first
# column's names).
_ACT_ALIASES = {
    None: "none", "none": "none", "identity": "none",
    "relu": "relu",
    "gelu": "gelu_erf", "gelu_erf": "gelu_erf",
    "gelu_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "silu": "silu", "swish": "silu",
}


def activation_name(activation) -> str:
    """The op's name for `activation`: None / "none", "relu", "gelu" (erf),
    "gelu_tanh", "silu" and a few aliases (HF's "gelu_new", "swish", ...)."""
    try:
        return _ACT_ALIASES[activation]
    except (KeyError, TypeError):
        raise ValueError(
            f"unsupported activation {activation!r} (supported: none, relu, gelu / gelu_erf, gelu_tanh, silu)"
        ) from None


def linear_act(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    activation: Optional[str] = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """act(x @ weight^T + bias) + residual in one GEMM: the activation and the
    residual add run in the GEMM's epilogue (docs/fused.md)."""
    if residual is None and _direct(x, weight, bias):  # as in gemm
        return _linear_act_direct(x, weight, bias, activation_name(activation))
    _require_tensor("linear_act", "input", 1, x)
    _require_tensor("linear_act", "weight", 2, weight)
    _require_tensor("linear_act", "bias", 3, bias, optional=True)
    _require_tensor("linear_act", "residual", 5, residual, optional=True)
    return _linear_act(x, weight, bias, activation_name(activation), residual)


def gated_linear(
    x: torch.Tensor,
    w_gate: torch.Tensor,
    w_up: torch.Tensor,
    activation: str = "silu",
    b_gate: Optional[torch.Tensor] = None,
    b_up: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """act(x @ w_gate^T + b_gate) * (x @ w_up^T + b_up): SwiGLU (silu) / GeGLU
    (gelu) gated MLP input projection (docs/fused.md)."""
    if _gated_direct(x, w_gate, w_up, b_gate, b_up):  # as in gemm
        return _gated_linear_direct(x, w_gate, w_up, activation_name(activation), b_gate, b_up)
    _require_tensor("gated_linear", "input", 1, x)
    _require_tensor("gated_linear", "w_gate", 2, w_gate)
    _require_tensor("gated_linear", "w_up", 3, w_up)
    return _gated_linear(x, w_gate, w_up, activation_name(activation), b_gate, b_up)
