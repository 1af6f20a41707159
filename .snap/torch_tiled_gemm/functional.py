"""Python conveniences over torch.ops.tiled.gemm with torch's semantics."""
from typing import Optional

import torch

from . import ops  # noqa: F401

_gemm = torch.ops.tiled.gemm.default
_linear = torch.ops.tiled.linear.default


def gemm(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """a [M,K] or [B,M,K] times b [K,N] or [B,K,N] (+ bias [N]); see the README."""
    return _gemm(a, b, bias)


def kernel_name(a: torch.Tensor, b: torch.Tensor) -> str:
    """The kernel the dispatch layer would run for gemm(a, b) (e.g. "simt_general")."""
    return torch.ops.tiled.gemm_kernel_name(a, b)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul's semantics (1-D operands, N-D broadcasting) through tiled.gemm."""
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
    if b.dim() == 2:
        # [..., M, K] @ [K, N]: fold every leading dim into M (a view when possible).
        lead = a.shape[:-1]
        out = _gemm(a.reshape(-1, a.shape[-1]), b, None).reshape(*lead, b.shape[-1])
    else:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        a3 = a.expand(*batch, m, k).reshape(-1, m, k)
        b3 = b.expand(*batch, k, n).reshape(-1, k, n)
        out = _gemm(a3, b3, None).reshape(*batch, m, n)
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
    return _linear(x, weight, bias)
