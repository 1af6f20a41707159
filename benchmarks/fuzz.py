"""Randomized differential test of tiled.gemm against torch and float64.

    python benchmarks/fuzz.py [--cases 50000] [--seed 0] [--device cuda]
                              [--max-dim 3000] [--grad-every 10] [--out fuzz.json]

Each case draws a problem: M, N, K in 0..max-dim (most small, some at
multiples of 8..128 or one off them), 2-D x 2-D, 3-D x 3-D, 3-D x 2-D or
2-D x 3-D with a batch of 0..8 (a broadcast, stride-0 batch now and then),
every dtype (tf32 on CUDA), row- or column-major operands stored in a
NaN-filled buffer with a leading dimension up to 9 elements wider than
needed and a storage offset of 0..7 elements (a read past the view poisons
the result), now and then no unit stride at all, a bias half the time, and
random normal, positive or row-scaled values.  The case fails when

* an element of ours is out of its bound (torch_tiled_gemm/testing.py),
  or non-finite where the float64 reference is finite;
* ours is more than 4x torch's error on the same inputs (norms of the
  errors over the bound's, + 0.1), tf32 included (both operands rounded
  to nearest, as cuBLAS's);
* a second run does not give the same bits;
* (every grad-every'th case) a gradient of ours fails the same tests.

Prints progress; writes {"cases", "failed", "failures": [...first 50...]}
as JSON to --out.  tests/test_fuzz.py runs a few hundred seeded cases of
the same generator in CI.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch

try:
    from torch_tiled_gemm import testing as T
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from torch_tiled_gemm import testing as T

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp64": torch.float64, "fp16": torch.float16,
          "bf16": torch.bfloat16}
# The op under test (tests swap in a damaged one to see the criterion fail).
_ours = None
TORCH_FACTOR = 4.0  # ours' error may be this many times torch's ...
TORCH_FLOOR = 0.1  # ... plus this, both as ||error|| / ||bound||


# ---------------------------------------------------------------- the generator

def draw_dim(rng, max_dim):
    r = rng.random()
    if r < 0.04:
        return 0
    if r < 0.30:
        d = rng.randint(1, 16)
    elif r < 0.62:
        d = rng.randint(17, 256)
    elif r < 0.87:
        d = rng.randint(257, 1024)
    else:
        d = rng.randint(1025, max(1025, max_dim))
    if rng.random() < 0.4:  # at or next to a tile multiple
        m = rng.choice([8, 16, 32, 64, 128])
        d = max(m, d // m * m) + rng.choice([0, 0, 0, -1, 1])
    return max(0, min(d, max_dim))


def draw_case(rng, device, max_dim=3000, max_flops=None, index=0, max_elems=None):
    """One case as a plain dict (JSON-able; build() makes the tensors).
    Shapes are redrawn until batch*M*N*K <= max_flops and every operand and
    the output hold <= max_elems elements (None: no limit)."""
    names = ["fp32", "fp64", "fp16", "bf16"] + (["tf32"] if device == "cuda" else [])
    weights = [3, 1, 2, 3] + ([3] if device == "cuda" else [])
    dtype = rng.choices(names, weights)[0]
    form = rng.choices(["2d", "3d3d", "3d2d", "2d3d"], [6, 2, 2, 1])[0]
    batch = 0 if form == "2d" else (0 if rng.random() < 0.04 else rng.randint(1, 8))
    while True:
        M, N, K = (draw_dim(rng, max_dim) for _ in range(3))
        nb = max(1, batch)
        if (max_flops is None or nb * M * N * K <= max_flops) and \
                (max_elems is None or nb * max(M * N, M * K, K * N) <= max_elems):
            break
    return {
        "index": index, "dtype": dtype, "form": form, "batch": batch, "M": M, "N": N, "K": K,
        "a": draw_layout(rng, form in ("3d3d", "3d2d")),
        "b": draw_layout(rng, form in ("3d3d", "2d3d")),
        "bias": rng.random() < 0.5, "bias_offset": rng.randint(0, 7),
        "values": rng.choices(["randn", "positive", "scaled"], [8, 1, 1])[0],
        "seed": rng.getrandbits(31),
    }


def draw_layout(rng, batched):
    return {
        "col_major": rng.random() < 0.4,
        "pad": rng.choice([0, 0, 0, rng.randint(1, 9)]),
        "offset": rng.choice([0, 0, rng.randint(1, 7)]),
        "no_unit_stride": rng.random() < 0.04,
        "broadcast": batched and rng.random() < 0.1,
        "batch_gap": rng.choice([0, 0, rng.randint(1, 5)]),
    }


def make_operand(spec, batch, rows, cols, dtype, device, gen, values):
    """A [batch?, rows, cols] view into a NaN-filled buffer laid out as spec says."""
    col = spec["col_major"]
    step = 2 if spec["no_unit_stride"] else 1
    inner, outer = (rows, cols) if col else (cols, rows)
    ld = inner * step + spec["pad"]
    mat = max(outer, 1) * ld
    bstride = 0 if spec["broadcast"] else mat + spec["batch_gap"]
    nb = max(batch, 1) if batch is not None else 1
    total = spec["offset"] + (nb - 1) * bstride + mat + 1
    store = torch.full((total,), float("nan"), dtype=dtype, device=device)
    inner_stride, outer_stride = step, ld
    strides = (outer_stride, inner_stride) if not col else (inner_stride, outer_stride)
    size = (rows, cols)
    if batch is not None:
        size, strides = (batch,) + size, (bstride,) + strides
    view = store.as_strided(size, strides, spec["offset"])
    data = torch.randn(size, generator=gen, device=device, dtype=torch.float32)
    if values == "positive":
        data = data.abs() + 0.5
    elif values == "scaled":
        data = data * torch.exp2(torch.randint(-6, 7, size[:-1] + (1,), generator=gen, device=device).float())
    with torch.no_grad():
        if batch is not None and spec["broadcast"] and batch > 0:
            view[0].copy_(data[0])  # every batch reads the same matrix
        else:
            view.copy_(data)
    return view


def build(case, device):
    """(a, b, bias) of `case` on `device`."""
    dtype = DTYPES[case["dtype"]]
    gen = torch.Generator(device=device).manual_seed(case["seed"])
    B, M, N, K = case["batch"], case["M"], case["N"], case["K"]
    a3, b3 = case["form"] in ("3d3d", "3d2d"), case["form"] in ("3d3d", "2d3d")
    a = make_operand(case["a"], B if a3 else None, M, K, dtype, device, gen, case["values"])
    b = make_operand(case["b"], B if b3 else None, K, N, dtype, device, gen, case["values"])
    bias = None
    if case["bias"]:
        store = torch.full((N + case["bias_offset"],), float("nan"), dtype=dtype, device=device)
        bias = store[case["bias_offset"]:]
        bias.copy_(torch.randn(N, generator=gen, device=device))
    return a, b, bias


# ---------------------------------------------------------------- the criterion

def torch_reference_op(a, b, bias):
    if a.dim() == 2 and b.dim() == 2 and bias is not None:
        return torch.addmm(bias, a, b)
    out = torch.matmul(a, b)
    return out if bias is None else out + bias


def norm_ratio(out, ref, bound):
    """||out - ref|| / ||bound|| over the elements where ref is finite."""
    fin = torch.isfinite(ref)
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    num = torch.where(fin, out.double() - ref, zero).norm().item()
    den = torch.where(fin, bound, zero).norm().item()
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return num / den


def judge(ours, theirs, ref, bound, label):
    """Failure reasons (empty: passed) of `ours` against the reference, its
    bound and torch's output `theirs`."""
    reasons = []
    res = T.compare(ours, ref, bound, label=label)
    if not res.ok:
        reasons.append(res.message)
    if theirs is not None and ref.numel():
        e_ours, e_torch = norm_ratio(ours, ref, bound), norm_ratio(theirs, ref, bound)
        if e_ours > TORCH_FACTOR * e_torch + TORCH_FLOOR:
            reasons.append(f"{label}error {e_ours:.3g} of the bound's norm > "
                           f"{TORCH_FACTOR} x torch's {e_torch:.3g} + {TORCH_FLOOR}")
    return reasons


def summed_bound(a, b, out_dtype, tf32, device, dim):
    """Reference and bound of a @ b summed over batch dim `dim` of a 3-D
    product: each batch's product rounded to out_dtype first (the backward of
    a broadcast operand reduces per-batch gradients), then the sum rounded."""
    ref_b, bound_b = T.error_bound(a, b, None, out_dtype, tf32, device)
    ref = ref_b.sum(dim)
    prec = T.precision(out_dtype, tf32, device)
    # each batch's bound (its rounding included), the sum's accumulation over
    # the batch and its rounding to out_dtype
    batches = ref_b.shape[dim]
    bound = bound_b.sum(dim) + T.C_ACC * prec.u_acc * batches * ref_b.abs().sum(dim) + prec.u_out * ref.abs()
    return ref, bound


def grad_checks(case, a, b, bias, device, tf32):
    """Backward of ours and of torch on the same grad_output: each gradient
    within its bound, not over 4x torch's error."""
    dtype = a.dtype
    gemm = _ours or torch.ops.tiled.gemm
    leaves = [t.detach().clone().requires_grad_() for t in (a, b)] + \
             ([bias.detach().clone().requires_grad_()] if bias is not None else [])
    ta, tb = leaves[0], leaves[1]
    tbias = leaves[2] if bias is not None else None
    out = gemm(ta, tb, tbias)
    gen = torch.Generator(device=device).manual_seed(case["seed"] + 7)
    g = torch.randn(out.shape, generator=gen, device=device).to(dtype)
    grads = torch.autograd.grad(out, leaves, g)
    tl = [t.detach().clone().requires_grad_() for t in leaves]
    tout = torch_reference_op(tl[0], tl[1], tl[2] if bias is not None else None)
    tgrads = torch.autograd.grad(tout, tl, g)
    reasons = []
    a0, b0 = a.detach(), b.detach()
    # grad_a = g @ b^T (summed over the batch when a is 2-D and b 3-D)
    if a0.dim() == 2 and b0.dim() == 3:
        ref, bound = summed_bound(g, b0.transpose(-1, -2), dtype, tf32, device, 0)
    else:
        ref, bound = T.error_bound(g, b0.transpose(-1, -2), None, dtype, tf32, device)
    reasons += judge(grads[0], tgrads[0], ref, bound, "grad_a: ")
    # grad_b = a^T @ g: one GEMM over every row when a is 3-D and b 2-D
    if a0.dim() == 3 and b0.dim() == 2:
        ref, bound = T.error_bound(a0.flatten(0, 1).t(), g.flatten(0, 1), None, dtype, tf32,
                                   device)
    elif a0.dim() == 2 and b0.dim() == 3:
        ref, bound = T.error_bound(a0.t(), g, None, dtype, tf32, device)
    else:
        ref, bound = T.error_bound(a0.transpose(-1, -2), g, None, dtype, tf32, device)
    reasons += judge(grads[1], tgrads[1], ref, bound, "grad_b: ")
    if bias is not None:
        rows = g.flatten(0, -2) if g.dim() == 3 else g
        ones = torch.ones(1, rows.shape[0], dtype=dtype, device=device)
        ref, bound = T.error_bound(ones, rows, None, dtype, False, device)
        reasons += judge(grads[2].unsqueeze(0), tgrads[2].unsqueeze(0), ref, bound, "grad_bias: ")
    return reasons


def run_case(case, device, grads=False):
    """Runs one case; returns its failure reasons (empty: passed)."""
    tf32 = case["dtype"] == "tf32"
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a, b, bias = build(case, device)
        gemm = _ours or torch.ops.tiled.gemm
        try:
            ours = gemm(a, b, bias)
            again = gemm(a, b, bias)
        except RuntimeError as e:  # every case here is a valid problem
            return [f"raised: {str(e).splitlines()[0]}"]
        theirs = torch_reference_op(a, b, bias)
        ref, bound = T.error_bound(a, b, bias, ours.dtype, tf32, device)
        reasons = judge(ours, theirs, ref, bound, "")
        if ours.numel() and not torch.equal(_bits(ours), _bits(again)):
            reasons.append("a second run gave other bits")
        if grads and not reasons:
            try:
                reasons += grad_checks(case, a, b, bias, device, tf32)
            except RuntimeError as e:
                reasons.append(f"backward raised: {str(e).splitlines()[0]}")
        return reasons
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _bits(t):
    ints = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
            torch.bfloat16: torch.int16}[t.dtype]
    return t.contiguous().view(ints)


def describe(case):
    B = f"{case['batch']} x " if case["form"] != "2d" else ""
    lay = lambda s: ("T" if s["col_major"] else "N") + (f" ld+{s['pad']}" if s["pad"] else "") + \
        (f" off{s['offset']}" if s["offset"] else "") + (" step2" if s["no_unit_stride"] else "") + \
        (" bcast" if s["broadcast"] else "")  # noqa: E731
    return (f"#{case['index']} {case['dtype']} {case['form']} {B}{case['M']}x{case['N']}x{case['K']} "
            f"a[{lay(case['a'])}] b[{lay(case['b'])}]{' +bias' if case['bias'] else ''} {case['values']}")


def fuzz(cases, seed, device, max_dim, grad_every, max_flops=None, progress=None, max_elems=None):
    """Runs `cases` cases; returns (count, failures as dicts)."""
    rng = random.Random(seed)
    failures = []
    for i in range(cases):
        case = draw_case(rng, device, max_dim, max_flops, index=i, max_elems=max_elems)
        reasons = run_case(case, device, grads=grad_every > 0 and i % grad_every == 0)
        if reasons:
            failures.append({"case": case, "what": describe(case), "reasons": reasons})
        if progress:
            progress(i + 1, len(failures), case)
    return cases, failures


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=50000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-dim", type=int, default=3000)
    p.add_argument("--max-flops", type=float, default=None,
                   help="redraw shapes above batch*M*N*K (default: 2e9 on CUDA, 5e7 on the CPU)")
    p.add_argument("--max-elems", type=float, default=None,
                   help="redraw shapes with an operand or output above this (default: none on CUDA, 3e5 on the CPU)")
    p.add_argument("--grad-every", type=int, default=10, help="check gradients on every n-th case (0: never)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)

    max_flops = args.max_flops or (2e9 if args.device == "cuda" else 5e7)
    max_elems = args.max_elems or (None if args.device == "cuda" else 3e5)
    t0 = time.time()
    last = [0.0]

    def progress(done, failed, case):
        now = time.time()
        if now - last[0] > 5 or done == args.cases:
            last[0] = now
            rate = done / max(now - t0, 1e-9)
            sys.stderr.write(f"\r{done}/{args.cases} cases, {failed} failed, {rate:.0f}/s, "
                             f"eta {(args.cases - done) / max(rate, 1e-9):.0f}s   ")
            sys.stderr.flush()

    n, failures = fuzz(args.cases, args.seed, args.device, args.max_dim, args.grad_every, max_flops, progress,
                       max_elems)
    sys.stderr.write("\n")
    result = {"cases": n, "failed": len(failures), "seed": args.seed,
              "device": args.device,
              "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
              "seconds": round(time.time() - t0, 1), "failures": failures[:50]}
    for f in failures[:20]:
        print(f["what"], "\n   ", "\n    ".join(f["reasons"]))
    print(f"{n} cases, {len(failures)} failed ({result['seconds']} s)")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print("wrote", args.out)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
