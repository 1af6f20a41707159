"""Benchmark: tiled.gemm and TiledLinear against torch.matmul / nn.Linear.

    python -m torch_tiled_gemm.bench [--quick] [--out DIR]
    python -m torch_tiled_gemm.bench --corpus [--set all|tuned|heldout] [--dtype bf16,...]
    python -m torch_tiled_gemm.bench --model Llama-3-8B     (that model's GEMMs)
    python -m torch_tiled_gemm.bench --shapes 4096x4096x4096,8x197x197x64:NT

--corpus, --model and --shapes time the GEMMs of real models (or your own
shapes) with the same protocol and checks: torch_tiled_gemm/corpus_bench.py
says how, and what the files hold (ratio per model and part, the slowest).

On a GPU: the shapes and dtypes of the performance targets, every layout at
4096^3, and nn.Linear forward+backward at LLM shapes.  Each case is timed with
the paired, interleaved protocol (6 rounds; in each, ours and torch once each
with triton.testing.do_bench(warmup=5, rep=25) medians, L2 flushed,
alternating who goes first; the ratio is the median of the per-round ratios)
so clock drift cancels.  Without a GPU it runs a small CPU sweep with the
same structure: 6 rounds, alternating who goes first, each side timed per
round as the median of single calls (until they add up to 0.2 s, at most
25), each call after reading a buffer twice the last-level cache, as the
GPU's L2 is flushed; with one thread (--threads 1) the clock is the calling
thread's CPU time, which the machine's other processes do not inflate, else
wall time.  The per-call rows (tiny eager calls) report microseconds per
call: time over a loop of 2000 calls after 50 warm-up calls (the same
clock), 3 alternating rounds, medians.

Inputs are random normal, never zeros.  Every output that is timed is
checked against float64, element by element (torch_tiled_gemm/testing.py's
bound): the GEMM, TiledLinear's forward and its three gradients, the
per-call rows' outputs; a case whose output fails gets "check": "FAIL"
in the JSON, FAIL in the table, and the run exits with status 1.  torch's
errors are measured the same way, for comparison.

Writes <gpu>-<date>-<time>-<commit>.json and .md (and .png when matplotlib
is installed) to --out, by default ./tiled_gemm_results/ (or
~/.cache/torch_tiled_gemm/results when the current directory is inside the
package's own checkout).  A run never replaces an earlier run's files.
"""
import argparse
import datetime
import glob
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

from . import ops  # noqa: F401
from . import testing
from .nn import TiledLinear

GPU_SHAPES = [
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (4095, 4095, 4095), (8192, 8192, 8192),
    (16, 4096, 4096), (128, 4096, 4096), (4096, 14336, 4096), (4096, 4096, 14336),
]
QUICK_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (4095, 4095, 4095), (128, 4096, 4096)]
CPU_SHAPES = [(256, 256, 256), (512, 512, 512), (1023, 1023, 1023), (16, 2048, 2048)]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# (tokens, in_features, out_features): attention projection, MLP up and down.
LINEAR_SHAPES = [(4096, 4096, 4096), (4096, 4096, 14336), (4096, 14336, 4096), (8192, 4096, 14336)]


class Progress:
    """A tqdm bar on stderr when tqdm is installed, else one line per case."""

    def __init__(self, total, desc=None):
        self.total, self.done, self.t0 = total, 0, time.time()
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=total, desc=desc, unit="case", file=sys.stderr, dynamic_ncols=True)

    def close(self):
        """Ends the bar (also before the last case: a run stopped early)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def step(self, label):
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label)
            self.bar.update(1)
            if self.done == self.total:
                self.close()
            return
        elapsed = time.time() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        print(f"[{self.done}/{self.total}] {elapsed:.0f}s, eta {eta:.0f}s: {label}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# timing

ROUNDS = 6  # paired rounds per case (GPU and CPU)
GPU_WARMUP, GPU_REP = 5, 25  # do_bench's warm-up and measuring time, ms
CPU_MIN_RUN_S, CPU_MAX_CALLS = 0.2, 25  # per side and round: timed calls until this much time, or this many
CALLS, CALL_ROUNDS = 2000, 3  # per-call rows: calls per loop, alternating rounds


def _cpu_clock():
    """The clock of CPU timings.  With one thread every call runs on the
    calling thread (torch's, MKL's and ours), so that thread's CPU time is
    the call's time without the slices the scheduler gives other processes:
    on a shared 2-core machine those made wall times 1.5-3x longer, by an
    amount that changed within a run.  With more threads, wall time."""
    if torch.get_num_threads() == 1:
        return time.thread_time, "the calling thread's CPU time (time.thread_time; one thread)"
    return time.perf_counter, "wall time"


def _llc_bytes():
    """The largest cache of CPU 0 (Linux sysfs), 0 where unknown."""
    sizes = [0]
    for f in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            text = open(f).read().strip().upper()
            sizes.append(int(text.rstrip("KMG")) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1))
        except (OSError, ValueError, IndexError):
            pass
    return max(sizes)


_flush_buf = []


def _cpu_flush():
    """Reads a buffer twice the size of the last-level cache (at least
    64 MB), so that the next call finds its operands in memory, not in a
    cache that other processes on the machine may or may not have emptied
    (on the shared 2-core machine, 16 x 2048 x 2048 bf16 took 4.0-4.8 ms
    with its 8 MB B left in the 16 MB L3 and 7.4-7.5 after a flush, and
    runs landed on either)."""
    if not _flush_buf:
        _flush_buf.append(torch.ones(max(2 * _llc_bytes(), 64 << 20) // 4))
    _flush_buf[0].sum()


def _cpu_time_ms(fn, min_run_time=CPU_MIN_RUN_S, max_calls=CPU_MAX_CALLS):
    """Median time of single calls, each after _cpu_flush (not timed), on
    _cpu_clock's clock: calls until they add up to `min_run_time` seconds or
    `max_calls` were made."""
    clock = _cpu_clock()[0]
    times = []
    while sum(times) < min_run_time and len(times) < max_calls:
        _cpu_flush()
        t = clock()
        fn()
        times.append(clock() - t)
    return statistics.median(times) * 1e3


def time_ms(fn, device, warmup=GPU_WARMUP, rep=GPU_REP):
    if device == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
    return _cpu_time_ms(fn)


def timing_words(device):
    """How one side is timed in one round, in words."""
    if device == "cuda":
        return f"triton.testing.do_bench(warmup={GPU_WARMUP}, rep={GPU_REP}) median, L2 flushed"
    return (f"median of single calls (until {CPU_MIN_RUN_S} s or {CPU_MAX_CALLS} calls), each after reading a "
            f"buffer twice the last-level cache (caches flushed), {torch.get_num_threads()} threads, "
            f"{_cpu_clock()[1]}")


def protocol(device):
    """The timing protocol this run uses, in words (the header of the .md)."""
    each = timing_words(device)
    return (f"GEMM and linear rows: paired interleaved, {ROUNDS} rounds, each side per round {each}, "
            f"alternating who goes first; ratio = median of per-round (torch time / ours), higher = ours faster. "
            f"Per-call rows: µs per call, {'wall time' if device == 'cuda' else _cpu_clock()[1]} over {CALLS} "
            f"calls after 50 warm-up calls, one sync at the end, {CALL_ROUNDS} alternating rounds, medians.")


def paired(ours, theirs, device, rounds=ROUNDS):
    """Median times of both and the median of per-round ratios theirs/ours."""
    t_ours, t_theirs, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            a, b = time_ms(ours, device), time_ms(theirs, device)
        else:
            b, a = time_ms(theirs, device), time_ms(ours, device)
        t_ours.append(a)
        t_theirs.append(b)
        ratios.append(b / a)
    return statistics.median(t_ours), statistics.median(t_theirs), statistics.median(ratios)


# ---------------------------------------------------------------------------
# environment

def env_info(device):
    # TILED_COMMIT wins: a snapshot of the tree (no .git of its own) may sit
    # inside another checkout whose HEAD is not what was built.
    try:
        if os.environ.get("TILED_COMMIT"):
            raise LookupError
        commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True,
                                         stderr=subprocess.DEVNULL, cwd=os.path.dirname(__file__)).strip()
        # ":/" paths from the top of the checkout (plain ones would be read
        # inside the package folder, and nothing would ever be dirty)
        dirty = subprocess.call(["git", "diff", "--quiet", "HEAD", "--", ":/csrc", ":/torch_tiled_gemm"],
                                cwd=os.path.dirname(__file__), stderr=subprocess.DEVNULL) != 0
        commit += "-dirty" if dirty else ""
    except Exception:
        commit = os.environ.get("TILED_COMMIT", "unknown")
    gpu = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu"
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": device,
        "protocol": protocol(device),
    }


def _slug(s):
    return "".join(c if c.isalnum() else "-" for c in s).strip("-").replace("--", "-")


# ---------------------------------------------------------------------------
# cases

def _layout(t, ch):
    return t if ch == "N" else t.transpose(-1, -2).contiguous().transpose(-1, -2)


def operands(M, N, K, dtype, layout, device, batch=None):
    """Random A [M, K] and B [K, N] (each with a leading `batch` dimension
    when given) in `layout` ("NN", "NT", ...: N row-major, T column-major)."""
    lead = () if batch is None else (batch,)
    return (_layout(torch.randn(*lead, M, K, device=device, dtype=dtype), layout[0]),
            _layout(torch.randn(*lead, K, N, device=device, dtype=dtype), layout[1]))


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


class Checks:
    """Element-wise checks of a case's outputs (ours, and torch's for
    comparison) against float64; `fields()` is what the case records:
    "check" ("ok" / "FAIL"), the worst |error| / bound of ours and of torch
    over every output checked, and what failed."""

    def __init__(self):
        self.ok, self.worst, self.torch_worst, self.failed = True, 0.0, 0.0, []

    def gemm(self, what, ours, theirs, a, b, bias=None, tf32=False):
        ref, bound = testing.error_bound(a, b, bias, ours.dtype, tf32, ours.device.type)
        mine = testing.compare(ours, ref, bound, label=f"{what}: ")
        self.worst = max(self.worst, mine.worst_ratio)
        if not mine.ok:
            self.ok = False
            self.failed.append(mine.message)
        if theirs is not None:
            self.torch_worst = max(self.torch_worst, testing.compare(theirs, ref, bound).worst_ratio)
        return testing.relative_error(ours, ref), (testing.relative_error(theirs, ref) if theirs is not None else 0.0)

    def fields(self):
        return {"check": "ok" if self.ok else "FAIL", "err_over_bound": self.worst,
                "torch_err_over_bound": self.torch_worst, "check_failures": self.failed[:4]}


def gemm_case(M, N, K, dname, layout, device):
    dtype = DTYPES[dname]
    tf32 = dname == "tf32"
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a, b = operands(M, N, K, dtype, layout, device)
        ours = lambda: torch.ops.tiled.gemm(a, b)  # noqa: E731
        theirs = lambda: torch.matmul(a, b)  # noqa: E731
        checks = Checks()
        err_ours, err_torch = checks.gemm("C", ours(), theirs(), a, b, tf32=tf32)
        _free(device)
        t_ours, t_torch, ratio = paired(ours, theirs, device)
        kernel = torch.ops.tiled.gemm_kernel_name(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    flops = 2.0 * M * N * K
    return {
        "op": "gemm", "dtype": dname, "M": M, "N": N, "K": K, "batch": 1, "layout": layout,
        "ours_ms": t_ours, "torch_ms": t_torch,
        "ours_tflops": flops / t_ours / 1e9, "torch_tflops": flops / t_torch / 1e9, "ratio": ratio,
        "max_rel_err": err_ours, "torch_rel_err": err_torch, "kernel": kernel, **checks.fields(),
    }


def _free(device):
    if device == "cuda":
        torch.cuda.empty_cache()


def linear_checks(mod, ref_mod, x, g, tf32=False):
    """One forward + backward of `mod` (and of `ref_mod`, torch's) on x with
    grad_output g, each output checked as the GEMM it is: y = x W^T + b,
    dx = g W, dW = g^T x, db = the column sums of g.  Returns (Checks,
    forward and gradient relative errors of ours and torch's)."""
    outs = []
    for m in (mod, ref_mod):
        xi = x.detach().clone().requires_grad_()
        for p in m.parameters():
            p.grad = None
        y = m(xi)
        y.backward(g)
        outs.append((y.detach(), xi.grad, m.weight.grad.clone(), None if m.bias is None else m.bias.grad.clone()))
        for p in m.parameters():
            p.grad = None
    (y, dx, dw, db), (ty, tdx, tdw, tdb) = outs
    x2, g2 = x.detach().reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    w = mod.weight.detach()
    bias = None if mod.bias is None else mod.bias.detach()
    checks = Checks()
    fwd = checks.gemm("y", y.reshape(-1, y.shape[-1]), ty.reshape(-1, ty.shape[-1]), x2, w.t(), bias, tf32)
    grads = [checks.gemm("dx", dx.reshape(-1, dx.shape[-1]), tdx.reshape(-1, tdx.shape[-1]), g2, w, None, tf32),
             checks.gemm("dW", dw, tdw, g2.t(), x2, None, tf32)]
    if db is not None:
        ones = torch.ones(1, g2.shape[0], device=g2.device, dtype=g2.dtype)
        grads.append(checks.gemm("db", db.unsqueeze(0), tdb.unsqueeze(0), ones, g2, None, False))
    return checks, fwd, (max(e[0] for e in grads), max(e[1] for e in grads))


def linear_case(tokens, fin, fout, dname, device):
    dtype = DTYPES[dname]
    torch.manual_seed(0)
    ref_mod = torch.nn.Linear(fin, fout, device=device, dtype=dtype)
    ours_mod = TiledLinear.from_linear(ref_mod)
    x = torch.randn(tokens, fin, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(tokens, fout, device=device, dtype=dtype)

    def step(mod):
        def run():
            x.grad = None
            mod.weight.grad = None
            mod.bias.grad = None
            mod(x).backward(g)
        return run

    # the forward output and all three gradients the timed step produces
    checks, (err, err_torch), (gerr, gerr_torch) = linear_checks(ours_mod, ref_mod, x, g)
    _free(device)
    t_ours, t_torch, ratio = paired(step(ours_mod), step(ref_mod), device)
    flops = 3 * 2.0 * tokens * fin * fout
    return {
        "op": "linear_fwd_bwd", "dtype": dname, "M": tokens, "N": fout, "K": fin, "batch": 1, "layout": "NT",
        "ours_ms": t_ours, "torch_ms": t_torch,
        "ours_tflops": flops / t_ours / 1e9, "torch_tflops": flops / t_torch / 1e9, "ratio": ratio,
        "max_rel_err": err, "torch_rel_err": err_torch, "grad_rel_err": gerr, "torch_grad_rel_err": gerr_torch,
        "kernel": "TiledLinear", **checks.fields(),
    }


def host_us_per_call(fn, device, calls=CALLS):
    """Wall time per call over a loop of `calls` (after 50 warm-up calls),
    one sync at the end: the host cost of a call whose GPU work is shorter.
    On the CPU, time on _cpu_clock's clock."""
    clock = time.perf_counter if device == "cuda" else _cpu_clock()[0]
    for _ in range(50):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t = clock()
    for _ in range(calls):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (clock() - t) / calls * 1e6


def overhead_case(kind, device, n=64, calls=CALLS):
    """Per-call host cost of tiny eager calls (decode-style M): wall time per
    call over a loop of `calls`, one sync at the end; the GPU work is a few
    microseconds, so this measures dispatch, checks, autograd and launch."""
    torch.manual_seed(0)
    x = torch.randn(n, n, device=device, requires_grad=(kind == "linear_fwd_bwd_call"))
    lin = torch.nn.Linear(n, n, device=device)
    tl = TiledLinear.from_linear(lin)
    b = torch.randn(n, n, device=device)
    if kind == "gemm_call":
        ours, theirs = (lambda: torch.ops.tiled.gemm(x, b)), (lambda: torch.mm(x, b))
    elif kind == "linear_call":
        ours, theirs = (lambda: tl(x)), (lambda: lin(x))
    else:
        ours, theirs = (lambda: tl(x).sum().backward()), (lambda: lin(x).sum().backward())

    # what the timed calls compute, checked (the backward rows: the forward
    # and its gradients for a grad_output of ones, what .sum().backward() gives)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the rows time strict fp32 (the setting they run under)
    try:
        if kind == "gemm_call":
            checks = Checks()
            err, err_torch = checks.gemm("C", ours(), theirs(), x, b)
        elif kind == "linear_call":
            checks = Checks()
            with torch.no_grad():
                err, err_torch = checks.gemm("y", tl(x), lin(x), x, lin.weight.t(), lin.bias)
        else:
            checks, (err, err_torch), _ = linear_checks(tl, lin, x, torch.ones(n, n, device=device))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    x.grad = None
    for p in lin.parameters():
        p.grad = None

    # CALL_ROUNDS rounds, alternating which goes first
    rounds = []
    for r in range(CALL_ROUNDS):
        if r % 2 == 0:
            o = host_us_per_call(ours, device, calls)
            t = host_us_per_call(theirs, device, calls)
        else:
            t = host_us_per_call(theirs, device, calls)
            o = host_us_per_call(ours, device, calls)
        rounds.append((o, t))
    t_ours = statistics.median(r[0] for r in rounds)
    t_theirs = statistics.median(r[1] for r in rounds)
    return {
        "op": kind, "dtype": "fp32", "M": n, "N": n, "K": n, "batch": 1, "layout": "NN",
        "ours_ms": t_ours / 1e3, "torch_ms": t_theirs / 1e3, "ours_us_per_call": t_ours, "torch_us_per_call": t_theirs,
        "ratio": statistics.median(r[1] / r[0] for r in rounds),
        "max_rel_err": err, "torch_rel_err": err_torch, "kernel": "per-call host overhead", **checks.fields(),
    }


def plan(device, quick):
    if device != "cuda":
        return [("gemm", s, d, "NN") for s in CPU_SHAPES for d in ("fp32", "bf16")] + \
               [("gemm", (512, 512, 512), d, lay) for d in ("fp32", "bf16") for lay in ("NT", "TN", "TT")] + \
               [(k, (64, 64, 64), "fp32", "NN") for k in ("gemm_call", "linear_call", "linear_fwd_bwd_call")]
    shapes = QUICK_SHAPES if quick else GPU_SHAPES
    cases = [("gemm", s, d, "NN") for d in DTYPES for s in shapes]
    cases += [("gemm", (4096, 4096, 4096), d, lay) for d in DTYPES for lay in ("NT", "TN", "TT")]
    if not quick:  # a small N: a head / router (x @ W.T, NT), LoRA's backward dY @ B (NN), its dW (TN)
        cases += [("gemm", (4096, 64, 4096), d, lay) for d in ("bf16", "fp16") for lay in ("NT", "NN", "TN")]
    lin = LINEAR_SHAPES[:1] if quick else LINEAR_SHAPES
    cases += [("linear", s, "bf16", "NT") for s in lin]
    cases += [(k, (64, 64, 64), "fp32", "NN") for k in ("gemm_call", "linear_call", "linear_fwd_bwd_call")]
    return cases


# ---------------------------------------------------------------------------
# output

def _speed(c, side):
    """The table's speed cell: µs per call for the per-call rows, else TFLOP/s."""
    if c["op"].endswith("_call"):
        return f"{c[side + '_us_per_call']:.1f} µs/call"
    return f"{c[side + '_tflops']:.4g} TFLOP/s"


def table(cases):
    head = ("| op | dtype | M×N×K | layout | ours | torch | ratio torch/ours | rel err ours | rel err torch "
            "| err/bound ours | err/bound torch | check | kernel |\n"
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    rows = [head]
    for c in cases:
        check = c.get("check", "")
        rows.append(f"| {c['op']} | {c['dtype']} | {c['M']}×{c['N']}×{c['K']} | {c['layout']} | "
                    f"{_speed(c, 'ours')} | {_speed(c, 'torch')} | {c['ratio']:.3f} | "
                    f"{c['max_rel_err']:.1e} | {c['torch_rel_err']:.1e} | {c.get('err_over_bound', 0):.2f} | "
                    f"{c.get('torch_err_over_bound', 0):.2f} | {'**FAIL**' if check == 'FAIL' else check} | "
                    f"{c['kernel']} |")
    failed = [c for c in cases if c.get("check") == "FAIL"]
    if failed:
        rows.append(f"\n**{len(failed)} of {len(cases)} cases FAILED the accuracy check** (err/bound > 1 or "
                    f"non-finite; see check_failures in the JSON)")
    return "\n".join(rows)


DTYPE_COLORS = {"fp32": "tab:blue", "tf32": "tab:cyan", "fp16": "tab:orange", "bf16": "tab:red", "fp64": "tab:gray"}
OP_ORDER = ["gemm", "linear_fwd_bwd", "gemm_call", "linear_call", "linear_fwd_bwd_call"]
RATIO_LABEL = "torch time / ours (higher = ours faster)"


def case_label(c):
    batch = f"{c['batch']}×" if c.get("batch") not in (None, 1) else ""
    return f"{c['op']} {c['dtype']} {batch}{c['M']}×{c['N']}×{c['K']} {c['layout']}"


def plot_order(cases):
    """Cases grouped by dtype (DTYPE_COLORS' order), then op, shape, layout."""
    dt = list(DTYPE_COLORS)

    def key(c):
        return (dt.index(c["dtype"]) if c["dtype"] in dt else len(dt), c["dtype"],
                OP_ORDER.index(c["op"]) if c["op"] in OP_ORDER else len(OP_ORDER), c["op"],
                c["M"] * c["N"] * c["K"], c["M"], c["N"], c["K"], c["layout"])
    return sorted(cases, key=key)


def figure(cases, title, worst=3):
    """The ratio plot: one horizontal bar per case, grouped by dtype then
    shape, a line at 1.0, the `worst` lowest ratios called out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    ordered = plot_order(cases)
    labels, seen = [], {}
    for c in ordered:  # unique labels (a repeated case gets " #2", ...)
        lab = case_label(c)
        seen[lab] = seen.get(lab, 0) + 1
        labels.append(lab if seen[lab] == 1 else f"{lab} #{seen[lab]}")
    # y positions: top to bottom, a gap between dtype groups
    ys, y, prev = [], 0.0, None
    for c in ordered:
        if prev is not None and c["dtype"] != prev:
            y += 0.8
        ys.append(-y)
        y += 1
        prev = c["dtype"]
    ratios = [c["ratio"] for c in ordered]
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.24 * max(len(ordered), 4)))
    # bars start at 1.0: to the right when ours is faster, to the left when slower
    ax.barh(ys, [r - 1.0 for r in ratios], left=1.0, height=0.8,
            color=[DTYPE_COLORS.get(c["dtype"], "k") for c in ordered])
    ax.set_xscale("log", base=2)
    lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
    left, right = lo / (10 if lo < 1 else 2), hi * 3.5  # room for the value labels
    ax.set_xlim(left, right)
    if right / left <= 12:
        candidates = [0.25, 0.33, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4]
    else:
        candidates = [2.0 ** e for e in range(-20, 21)]
    ticks = [t for t in candidates if left <= t <= right]
    if len(ticks) > 10:  # every k-th power of 2, 1.0 kept
        k = math.ceil(len(ticks) / 10)
        ticks = [t for t in ticks if round(math.log2(t)) % k == 0]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:g}×" if t >= 0.25 else f"1/{1 / t:g}×" for t in ticks], fontsize=8)
    ax.grid(axis="x", color="0.85", lw=0.6)
    ax.set_axisbelow(True)
    ax.axvline(1.0, color="k", lw=1.2)
    ax.set_xlabel(RATIO_LABEL)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(min(ys) - 0.8, 0.8)
    rank = {i: n for n, i in enumerate(sorted(range(len(ordered)), key=lambda i: ratios[i])[:worst], 1)}
    for i, (yy, c) in enumerate(zip(ys, ordered)):
        text = f"{c['ratio']:.2f}×"
        if i in rank:
            text = f"worst #{rank[i]}: {text}"
        if c.get("check") == "FAIL":
            text += " FAIL"
        faster = c["ratio"] >= 1
        ax.text(c["ratio"] * (1.04 if faster else 1 / 1.04), yy, text, va="center",
                ha="left" if faster else "right", fontsize=7 if i in rank else 6,
                fontweight="bold" if i in rank else "normal",
                color="crimson" if i in rank or c.get("check") == "FAIL" else "0.2")
    present = [d for d in DTYPE_COLORS if any(c["dtype"] == d for c in ordered)]
    present += sorted({c["dtype"] for c in ordered} - set(present))
    handles = [plt.Rectangle((0, 0), 1, 1, color=DTYPE_COLORS.get(d, "k")) for d in present]
    ax.legend(handles, present, fontsize=8, loc="lower right", title="dtype", title_fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def try_plot(plot_fn, cases, path, *args):
    """plot_fn(cases, path, *args), saying on stderr why there is no plot
    (no matplotlib, or a failure: the numbers are written already and are
    not lost to it); whether the file exists afterwards."""
    try:
        plot_fn(cases, path, *args)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    except Exception as e:
        print(f"plot failed ({type(e).__name__}: {e}): no plot", file=sys.stderr)
    return os.path.exists(path)


def plot(cases, path, title):
    fig = figure(cases, title)
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


def _checkout_root():
    """The folder of the checkout this package sits in (its git top level),
    or the package's parent folder when it is not in a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True, cwd=here,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return os.path.dirname(here)


def default_out():
    """./tiled_gemm_results, unless the current directory is inside the
    package's own checkout: then ~/.cache/torch_tiled_gemm/results (a run
    writes nothing into the source tree unless --out says so)."""
    cwd, root = os.path.realpath(os.getcwd()), os.path.realpath(_checkout_root())
    if cwd == root or cwd.startswith(root + os.sep):
        return os.path.join(os.path.expanduser("~"), ".cache", "torch_tiled_gemm", "results")
    return os.path.join(cwd, "tiled_gemm_results")


def unique_base(folder, stem, exts=(".json", ".md", ".png")):
    """folder/stem, or folder/stem-2, -3, ... : the first whose files do not
    exist yet (an earlier run's files are never replaced)."""
    base, n = os.path.join(folder, stem), 1
    while any(os.path.exists(base + e) for e in exts):
        n += 1
        base = os.path.join(folder, f"{stem}-{n}")
    return base


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for the result files (default: ./tiled_gemm_results, "
                   "or ~/.cache/torch_tiled_gemm/results inside the package's checkout)")
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tag", default="", help="suffix for the result files (e.g. a variant's name)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads (torch.set_num_threads); default: torch's default")
    from . import corpus_bench

    corpus_bench.add_arguments(p)
    args = p.parse_args(argv)
    device = args.device
    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or default_out()
    if corpus_bench.used(args):
        return corpus_bench.run(args, device, out)
    extra = corpus_bench.stray(args, vars(p.parse_args([])))
    if extra:
        p.error(f"{', '.join(extra)}: only with --corpus, --model or --shapes")
    torch.manual_seed(0)
    cases_plan = plan(device, args.quick)
    info = env_info(device)
    results = []
    os.makedirs(out, exist_ok=True)
    stamp = info["date"][:10] + "-" + info["date"][11:19].replace(":", "")
    stem = f"{_slug(info['gpu'])}-{stamp}-{info['commit']}" + (f"-{args.tag}" if args.tag else "")
    info["tag"] = args.tag
    info["env"] = {k: v for k, v in os.environ.items() if k.startswith("TILED_")}
    base = unique_base(out, stem)
    open(base + ".json", "x").close()  # the name is claimed at once: a run started in the same second takes -2
    print(f"results go to {base}.json/.md", file=sys.stderr)

    def write():
        info["cases"] = results
        with open(base + ".json", "w") as f:
            json.dump(info, f, indent=1)
        md = (f"# {info['gpu']} — torch {info['torch']} (CUDA {info['cuda']}) — commit {info['commit']} — "
              f"{info['date']}\n\n{info['protocol']}\n\n{table(results)}\n")
        with open(base + ".md", "w") as f:
            f.write(md)
        return md

    write()  # the header and protocol before the first case
    bar = Progress(len(cases_plan))
    for kind, shape, dname, layout in cases_plan:
        label = f"{kind} {dname} {'x'.join(map(str, shape))} {layout}"
        if kind == "gemm":
            results.append(gemm_case(*shape, dname, layout, device))
        elif kind == "linear":
            results.append(linear_case(*shape, dname, device))
        else:
            results.append(overhead_case(kind, device))
        write()  # after every case: a run cut short still leaves its numbers
        bar.step(label)
        if device == "cuda":
            torch.cuda.empty_cache()
    md = write()
    written = [base + ".json", base + ".md"]
    geo = math.exp(statistics.mean(math.log(c["ratio"]) for c in results))
    if try_plot(plot, results, base + ".png", f"{info['gpu']}  torch {info['torch']}  {info['commit']}  "
                f"{info['date']}  geometric-mean ratio {geo:.3f}"):
        written.append(base + ".png")
    print(md)
    print(f"geometric-mean ratio over {len(results)} cases: {geo:.3f}")
    print("wrote " + ", ".join(written))
    failed = [c for c in results if c.get("check") == "FAIL"]
    for c in failed:
        print(f"FAIL {c['op']} {c['dtype']} {c['M']}x{c['N']}x{c['K']} {c['layout']} {c['kernel']}: "
              + "; ".join(c["check_failures"]), file=sys.stderr)
    if failed:
        print(f"{len(failed)} of {len(results)} cases FAILED the accuracy check", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
