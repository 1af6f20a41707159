"""Element-wise accuracy checks of a GEMM's output against a float64 reference.

A whole-matrix norm (||out - ref|| / ||ref||) averages a wrong tile, a
missing bias column or one wrong element away on a large output.  This
module bounds every element's error by what a correct kernel's arithmetic
can produce for *that* element:

    |out_ij - ref_ij| <= bound_ij =
          C_IN  * u_in  * (|acc_ij| + 4 s_ij)                 operands rounded on the way in (tf32)
        + C_ACC * u_acc * g(K) * (P_ij + s_ij + |bias_j|)     fp32 / fp64 accumulation
        + u_out * |ref_ij|  (+ u_out * |acc_ij| with a bias)  rounding to the output type
        + floor_out                                           (subnormal spacing of fp16)

where acc = A @ B (float64, no bias), ref = acc + bias, s_ij =
sqrt(sum_k (a_ik b_kj)^2) (the scale of the products' independent rounding
errors) and P_ij the largest |partial sum| over 8 cumulative slices of K
(the scale of the accumulator's own rounding errors: with positive data a
partial sum grows like K, with signed random data like sqrt(K)).

* u_in: 0 for every dtype but tf32 (bf16 / fp16 products are exact in
  fp32), 2^-10 for tf32: an fp32 operand truncated to tf32 (10 stored
  mantissa bits) is off by < 2^-10 relative, rounded to nearest by <= 2^-11;
  either is within this bound, operands kept to bf16 precision (2^-8) are not.
* u_acc: 2^-24 (fp32 accumulation, every dtype but fp64), 2^-53 (fp64; the
  reference's own rounding is of the same order and is covered by C_ACC).
  g(K) = sqrt(K) for round-to-nearest accumulation (SIMT FMA chains, split-K
  and stream-K partials added in any fixed order, the CPU kernels);
  max(sqrt(K), K / 8) where tensor cores accumulate (bf16, fp16, tf32 on the
  GPU), whose adders truncate their aligned sums.
* u_out: the output type's unit roundoff (2^-8 bf16, 2^-11 fp16, 2^-24
  fp32, 2^-53 fp64); with a bias, the |acc| term admits a bias added
  after a first rounding.  Round-to-nearest's error is at most u_out times
  the result, so a correct 16-bit output comes close to this term (the
  accumulation term's own margin is what is left); one off by 2 units in
  the last place exceeds it.

Calibrated in benchmarks/research/check_calibration.py by simulating the kernels'
arithmetic (sequential FMA chains, products rounded before the add,
split-K, blocked partial sums, tensor-core-like groups of 4 or 8 exact
products added with truncation, torch's fp32 BLAS, tf32 truncated or
rounded to nearest) over shapes up to K = 16384 with random, positive,
row-scaled and cancelling data.  Worst |error| / bound: fp32 0.38, fp64
0.35, tf32 truncated 0.45, rounded 0.25; bf16 / fp16 outputs 0.996 (their
rounding, exact to within the accumulation term's margin).  Exceeding it:
tf32 operands kept to bf16 precision (1.8 rounded, 3.5 truncated), one
16-bit element 4 units in the last place off (6.5), a tile missing 16 k's,
a bias missing on 8 columns, one fp32 product missing (>= 257); see also
tests/test_checks.py.
"""
import math
from dataclasses import dataclass, field
from typing import List, Tuple

import torch

# C_IN covers the mean shift of truncated operands (|acc| term) and the
# spread of their independent errors (s term); C_ACC the tail of sqrt(K)
# random-walk accumulation errors over ~10^7 elements.
C_IN = 1.5
C_ACC = 3.0
PARTIAL_SLICES = 8

UNIT_ROUNDOFF = {
    torch.float64: 2.0 ** -53,
    torch.float32: 2.0 ** -24,
    torch.float16: 2.0 ** -11,
    torch.bfloat16: 2.0 ** -8,
}
TF32_INPUT = 2.0 ** -10
# Half the spacing of the output type's subnormals (fp16: 2^-24 apart).
OUTPUT_FLOOR = {torch.float64: 0.0, torch.float32: 2.0 ** -150, torch.float16: 2.0 ** -25, torch.bfloat16: 2.0 ** -134}


@dataclass
class Precision:
    """How a kernel computes: operand rounding, accumulator, output type."""
    u_in: float
    u_acc: float
    u_out: float
    floor: float
    tensor_core: bool  # accumulation by truncating adders (g(K) = max(sqrt(K), K / 8))

    def g(self, K: int) -> float:
        r = math.sqrt(K)
        return max(r, K / 8.0) if self.tensor_core else r


def precision(dtype: torch.dtype, tf32: bool = False, device: str = "cuda") -> Precision:
    """The arithmetic a correct kernel for `dtype` may use.  tf32 (fp32 only):
    operands rounded or truncated to tf32.  Tensor-core accumulation is
    assumed for 16-bit types and tf32 on CUDA."""
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"no precision model for {dtype}")
    if tf32 and dtype != torch.float32:
        raise ValueError("tf32 applies to float32 only")
    u_acc = UNIT_ROUNDOFF[torch.float64] if dtype == torch.float64 else UNIT_ROUNDOFF[torch.float32]
    tensor_core = str(device).startswith("cuda") and (tf32 or dtype in (torch.float16, torch.bfloat16))
    return Precision(u_in=TF32_INPUT if tf32 else 0.0, u_acc=u_acc, u_out=UNIT_ROUNDOFF[dtype],
                     floor=OUTPUT_FLOOR[dtype], tensor_core=tensor_core)


def _f64(t):
    return t.detach().to(torch.float64)


def reference_and_scales(a, b, bias=None, slices: int = PARTIAL_SLICES):
    """float64 acc = a @ b, s = sqrt((a*a) @ (b*b)) and P = max |partial
    sum| over `slices` cumulative slices of K (broadcasting like
    torch.matmul).  Returns (acc, s, P)."""
    a64, b64 = _f64(a), _f64(b)
    K = a64.shape[-1]
    s = torch.matmul(a64 * a64, b64 * b64).sqrt_()
    n = max(1, min(K, slices))
    width = -(-K // n) if K else 0
    out_numel = s.numel()
    if K == 0:
        acc = torch.matmul(a64, b64)
        return acc, s, torch.zeros_like(acc)
    if out_numel * n <= (1 << 26):
        # every slice's product in one batched matmul: [..., n, M, w] @ [..., n, w, N]
        pad = n * width - K
        ap = torch.nn.functional.pad(a64, (0, pad)) if pad else a64
        bp = torch.nn.functional.pad(b64, (0, 0, 0, pad)) if pad else b64
        M, N = ap.shape[-2], bp.shape[-1]
        parts = torch.matmul(ap.reshape(*ap.shape[:-1], n, width).movedim(-2, -3),
                             bp.reshape(*bp.shape[:-2], n, width, N))
        partial = parts.cumsum(-3)
        acc = partial.select(-3, n - 1).clone()
        peak = partial.abs_().amax(-3)
        return acc, s, peak
    acc = peak = None
    for k0 in range(0, K, width):
        part = torch.matmul(a64[..., :, k0:k0 + width], b64[..., k0:k0 + width, :])
        acc = part if acc is None else acc.add_(part)
        peak = acc.abs() if peak is None else torch.maximum(peak, acc.abs(), out=peak)
    return acc, s, peak


def error_bound(a, b, bias=None, out_dtype=None, tf32=False, device=None, scales=None):
    """(ref, bound): the float64 reference (bias included) and every
    element's admissible error (see the module's docstring)."""
    out_dtype = out_dtype or a.dtype
    device = device or a.device.type
    prec = precision(out_dtype, tf32, device)
    acc, s, peak = scales if scales is not None else reference_and_scales(a, b, bias)
    K = a.shape[-1]
    ref = acc if bias is None else acc + _f64(bias)
    bias_abs = 0.0 if bias is None else _f64(bias).abs()
    bound = prec.u_out * ref.abs() + prec.floor
    if bias is not None:  # the bias may be added to an already rounded result
        bound = bound + prec.u_out * acc.abs()
    if prec.u_in:
        bound = bound + C_IN * prec.u_in * (acc.abs() + 4.0 * s)
    if K:
        bound = bound + C_ACC * prec.u_acc * prec.g(K) * (peak + s + bias_abs)
    return ref, bound


@dataclass
class CheckResult:
    ok: bool
    worst_ratio: float  # max |out - ref| / bound over the finite elements (inf: a bound of 0 exceeded)
    bad: int  # elements out of bound or non-finite where the reference is finite, or the other way
    first_bad: List[Tuple[int, ...]] = field(default_factory=list)
    message: str = ""


def compare(out, ref, bound, mask=None, label="") -> CheckResult:
    """Element-wise comparison of `out` with `ref` within `bound` (float64
    tensors of out's shape).  A NaN where the reference is NaN and the same
    infinity where the reference (or the reference rounded to out's dtype)
    is infinite count as right; anything else non-finite is wrong.  `mask`
    (bool) limits the check to some elements."""
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, math.inf, -1, [], f"{label}shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if ref.numel() == 0:
        return CheckResult(True, 0.0, 0, [], "")
    o = _f64(out)
    err = (o - ref).abs_()
    within = err <= bound  # False where either is NaN
    if mask is None and bool(within.all()):  # the common case: every element finite and in bound
        ratio = torch.where(bound > 0, err / bound, torch.zeros_like(err))
        return CheckResult(True, float(ratio.max()), 0, [], "")
    ref_rounded = ref.to(out.dtype).to(torch.float64) if out.dtype != torch.float64 else ref
    within &= torch.isfinite(ref)
    same_special = (torch.isnan(o) & torch.isnan(ref)) | (torch.isinf(o) & (o == ref_rounded))
    good = within | same_special
    if mask is not None:
        good = good | ~mask
    bad = int((~good).sum().item())
    finite = torch.isfinite(err) & torch.isfinite(bound)
    if mask is not None:
        finite &= mask
    ratio = torch.where(finite, err / bound.clamp_min(1e-300), torch.zeros_like(err))
    ratio = torch.where(finite & (bound == 0) & (err > 0), torch.full_like(err, math.inf), ratio)
    worst = float(ratio.max().item())
    if bad == 0:
        return CheckResult(True, worst, 0, [], "")
    idx = (~good).nonzero()[:8]
    first = [tuple(int(v) for v in row) for row in idx.tolist()]
    i0 = first[0]
    msg = (f"{label}{bad} of {ref.numel()} elements out of bound; first at {list(i0)}: got {o[i0].item():.8g}, "
           f"want {ref[i0].item():.8g} (error {err[i0].item():.3g}, bound {bound[i0].item():.3g}); "
           f"worst finite error / bound {worst:.3g}; first bad {first}")
    return CheckResult(False, worst, bad, first, msg)


def check_gemm(out, a, b, bias=None, tf32=False, mask=None, label="", scales=None) -> CheckResult:
    """Checks `out` = a @ b (+ bias) element by element (float64 reference
    computed here, on out's device)."""
    ref, bound = error_bound(a, b, bias, out.dtype, tf32, out.device.type, scales=scales)
    return compare(out, ref, bound, mask=mask, label=label)


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| (the plain difference's norm when ref is 0)."""
    if ref.numel() == 0:
        return 0.0
    out = _f64(out)
    denom = ref.norm().item()
    diff = (out - ref).norm().item()
    return diff / denom if denom > 0 else diff
