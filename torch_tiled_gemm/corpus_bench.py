"""Model GEMMs and a user's own shapes against torch.matmul: the benchmark's
--corpus, --model and --shapes modes (python -m torch_tiled_gemm.bench).

    python -m torch_tiled_gemm.bench --corpus [--set all|tuned|heldout] [--dtype bf16,fp16,tf32,fp32]
        [--rounds 6] [--parts fwd,dX,dW,attn,lora,generic] [--min-gflop X] [--limit N] [--time-budget S]
    python -m torch_tiled_gemm.bench --model Llama-3-8B[,GPT-2]     the corpus GEMMs of these models
    python -m torch_tiled_gemm.bench --shapes 4096x4096x4096,8192x1024x4096:NT,96x197x197x64:NT
    python -m torch_tiled_gemm.bench --corpus --estimate             the run time on an H100 (no GPU needed)

A shape is MxNxK (C[M, N] = A[M, K] @ B[K, N]) or BxMxNxK (batched), with
an optional layout after a colon: NN (default), NT, TN or TT ("T": that
operand is a transposed view of a row-major tensor, as a Linear's weight
in x @ W^T).  A shape that is in the corpus (torch_tiled_gemm/corpus.py)
carries its set, model and part; any other gets "user" for all three.

Each GEMM is timed with the benchmark's paired, interleaved protocol
(bench.paired: per round ours and torch.matmul once each, alternating who
goes first; the ratio is the median of the per-round torch / ours; on a GPU
do_bench medians with the L2 flushed, on a CPU medians of single calls, the
caches flushed before each).
Operands are random normal tensors in the GEMM's layout (bench.operands),
seeded by the GEMM's id.  Both outputs are checked against float64 on evenly
spread rows, columns and batches (all of them for small GEMMs) with
torch_tiled_gemm/testing.py's element-wise bound ("check": "ok" or "FAIL");
a failed check makes the run exit with status 1.

The corpus GEMMs run in an order spread over parts and sizes (a hash of
their ids), so a run cut short by --limit or --time-budget is a sample of
the whole; --shapes run in the order given.  Writes, to the benchmark's
output folder, <gpu>-<date>-<time>-<commit>-<corpus|model|shapes>-<dtypes>
.json (rewritten as cases finish), .md (per dtype: geomean and the count
below 0.97 per set, the ratio per model and part, the ten worst) and .png
(when matplotlib is installed).
"""
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time

import torch

from . import bench
from .corpus import HELDOUT_MODELS, MODELS, PARTS, SETS, corpus, gemm_id

# Relative error bounds against float64 (||out - ref|| / ||ref||), for K up
# to TOL_K; past it the bound grows as sqrt(K / TOL_K): a dot product's
# rounding error in fp32 accumulation grows as sqrt(K) against its value
# (strict fp32 at K = 128256 lands near 1.5e-5, torch's as well).  Reported
# beside the element-wise check; a GEMM passes when both hold.
TOL = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}
TOL_K = 16384
SLOW = 0.97  # a ratio below this counts as slower than torch
WORST = 10  # how many of the slowest GEMMs the table lists
# sampled check: at most this many rows / columns / batches, and at most
# CHECK_ELEMS elements of A's (or B's) sample in float64
CHECK_ROWS, CHECK_BATCHES, CHECK_ELEMS = 1024, 8, 1 << 25
USER = "user"  # set, model and part of a shape that is not in the corpus
SET_ORDER = ("tuned", "heldout", USER)
PART_ORDER = PARTS + (USER,)
PART_COLORS = {"fwd": "tab:blue", "dX": "tab:orange", "dW": "tab:green", "attn": "tab:red",
               "lora": "tab:purple", "generic": "tab:brown", USER: "tab:gray"}


def model_names():
    """The model names --model accepts (corpus.MODELS, then "generic")."""
    return [m.name for m in MODELS] + ["generic"]


# ---------------------------------------------------------------------------
# selection

def _seed(gid):
    return int(hashlib.sha1(gid.encode()).hexdigest()[:8], 16)


def _order(entries):
    return sorted(entries, key=lambda e: (_seed(e["id"]), e["id"]))


SHAPE_RE = re.compile(r"^(\d+)x(\d+)x(\d+)(?:x(\d+))?(?::([NT]{2}))?$")


def parse_shapes(text):
    """Entries for --shapes: 'MxNxK[:LAYOUT]' or 'BxMxNxK[:LAYOUT]', comma-separated."""
    known = {(e["M"], e["N"], e["K"], e["batch"], e["layout"]): e for e in corpus()}
    out = []
    for spec in (s.strip() for s in text.split(",")):
        if not spec:
            continue
        m = SHAPE_RE.match(spec.replace("×", "x").replace(" ", ""))
        if not m or not all(int(v) > 0 for v in m.groups()[:4] if v is not None):
            raise SystemExit(f"--shapes: cannot read {spec!r} (want MxNxK or BxMxNxK, each > 0, with an "
                             f"optional :NN, :NT, :TN or :TT, e.g. 4096x4096x4096 or 96x197x197x64:NT)")
        dims = [int(v) for v in m.groups()[:4] if v is not None]
        batch, (M, N, K) = (dims[0], dims[1:]) if len(dims) == 4 else (None, dims)
        layout = m.group(5) or "NN"
        key = (M, N, K, batch, layout)
        e = known.get(key)
        if e is None:
            e = dict(id=gemm_id(*key), model=USER, models=[USER], layer=spec, layers=[spec], part=USER,
                     M=M, N=N, K=K, batch=batch, layout=layout, set=USER,
                     gflop=2.0 * M * N * K * (batch or 1) / 1e9)
        out.append(e)
    if not out:
        raise SystemExit("--shapes: no shape given")
    return out


def resolve_models(text):
    """The model names in a --model list (case-insensitive), or SystemExit naming the available ones."""
    names = {n.lower(): n for n in model_names()}
    out = []
    for raw in (s.strip() for s in text.split(",")):
        if not raw:
            continue
        if raw.lower() not in names:
            raise SystemExit(f"unknown model {raw!r}; the corpus has: {', '.join(model_names())}")
        out.append(names[raw.lower()])
    if not out:
        raise SystemExit(f"--model: no name given; the corpus has: {', '.join(model_names())}")
    return out


def select(args):
    """(mode, entries): the GEMMs the arguments name, in the order they run."""
    if args.shapes:
        entries = parse_shapes(args.shapes)
        mode = "shapes"
    else:
        parts = args.parts.split(",") if args.parts else None
        for p in parts or ():
            if p not in PARTS:
                raise SystemExit(f"unknown part {p!r} (parts: {', '.join(PARTS)})")
        models = resolve_models(args.model) if args.model else None
        entries = _order(corpus(args.set, args.min_gflop, parts, models))
        if models:  # attribute each GEMM to the first named model that produces it
            for e in entries:
                e["model"] = next(m for m in e["models"] if m in models)
        mode = "model" if models and not args.corpus else "corpus"
    return mode, (entries[:args.limit] if args.limit else entries)


# ---------------------------------------------------------------------------
# one GEMM

def _spread(n, k, device):
    """k indices spread evenly over range(n), first and last included; None: all."""
    if n <= k:
        return None
    return torch.linspace(0, n - 1, k, device=device).round().long().unique()


def check_error(out, a, b, tf32=False):
    """(relative error, element-wise check) of out = a @ b against float64
    on a spread sample of batches, rows and columns (every tile row and
    column for M, N <= 32 K at 1024 samples; all of out where it is small).
    The check is torch_tiled_gemm.testing's per-element bound, as in the
    benchmark; the relative error is reported beside it."""
    from . import testing

    K = a.shape[-1]
    lim = max(16, min(CHECK_ROWS, CHECK_ELEMS // max(K, 1)))
    rows, cols = _spread(a.shape[-2], lim, a.device), _spread(b.shape[-1], lim, a.device)
    if a.dim() == 3:
        bi = _spread(a.shape[0], CHECK_BATCHES, a.device)
        if bi is not None:
            a, b, out = a[bi], b[bi], out[bi]
    if rows is not None:
        a, out = a[..., rows, :], out[..., rows, :]
    if cols is not None:
        b, out = b[..., cols], out[..., cols]
    ref, bound = testing.error_bound(a, b, None, out.dtype, tf32, out.device.type)
    err = testing.relative_error(out, ref)
    return (err if math.isfinite(err) else float("inf")), testing.compare(out, ref, bound)


def tolerance(dname, K):
    return TOL[dname] * math.sqrt(max(1.0, K / TOL_K))


def run_case(entry, dname, device="cuda", rounds=bench.ROUNDS):
    """Times one GEMM (a corpus entry or a parsed shape) in dtype dname
    against torch.matmul and checks both outputs; returns its record."""
    dtype = bench.DTYPES[dname]
    tf32 = dname == "tf32"
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        torch.manual_seed(_seed(entry["id"]))
        a, b = bench.operands(entry["M"], entry["N"], entry["K"], dtype, entry["layout"], device, entry["batch"])
        ours = lambda: torch.ops.tiled.gemm(a, b)  # noqa: E731
        theirs = lambda: torch.matmul(a, b)  # noqa: E731
        err, check = check_error(ours(), a, b, tf32)
        err_torch, check_torch = check_error(theirs(), a, b, tf32)
        kernel = torch.ops.tiled.gemm_kernel_name(a, b)
        t_ours, t_torch, ratio = bench.paired(ours, theirs, device, rounds=rounds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    flop = entry["gflop"] * 1e9
    tol = tolerance(dname, entry["K"])
    return {
        "op": "gemm", "dtype": dname, "M": entry["M"], "N": entry["N"], "K": entry["K"], "batch": entry["batch"],
        "layout": entry["layout"], "ratio": ratio, "ours_us": t_ours * 1e3, "torch_us": t_torch * 1e3,
        "ours_tflops": flop / t_ours / 1e9, "torch_tflops": flop / t_torch / 1e9,
        "set": entry["set"], "model": entry["model"], "models": entry["models"], "part": entry["part"],
        "layer": entry["layer"], "id": entry["id"], "gflop": entry["gflop"], "kernel": kernel,
        "rel_err": err, "torch_rel_err": err_torch, "tol": tol, "err_over_bound": check.worst_ratio,
        "torch_err_over_bound": check_torch.worst_ratio,
        "check": "ok" if check.ok and err <= tol else "FAIL",
        "check_failures": ([check.message] if not check.ok else []) +
                          ([f"relative error {err:.3g} > {tol:.3g}"] if err > tol else []),
    }


# ---------------------------------------------------------------------------
# run-time estimate (H100 SXM; no GPU needed)

# Sustained throughput (FLOP/s) and bandwidth guessed for the H100, the
# do_bench call's L2 flush (256 MB memset + launch) and host costs (s).
EST_PEAK = {"bf16": 650e12, "fp16": 650e12, "tf32": 330e12, "fp32": 45e12}
EST_BW, EST_FLUSH, EST_CALL, EST_SETUP = 2.8e12, 110e-6, 15e-6, 0.03


def estimate_case_s(entry, dname, rounds):
    """Seconds one paired case takes: 2 * rounds do_bench calls of (1 + 5 + n_warmup
    + n_repeat) calls for a kernel time from the guessed throughput, plus setup
    (operands, float64 checks, kernel name)."""
    size = 2 if dname in ("bf16", "fp16") else 4
    M, N, K = entry["M"], entry["N"], entry["K"]
    nbytes = size * (entry["batch"] or 1) * (M * K + K * N + M * N)
    t = max(entry["gflop"] * 1e9 / EST_PEAK[dname], nbytes / EST_BW) + 5e-6
    est = max(t + EST_FLUSH, EST_CALL)
    n_warm, n_rep = max(1, int(5e-3 / est)), max(1, int(25e-3 / est))
    one = t + 5 * est + n_warm * max(t, EST_CALL) + n_rep * est + 2e-3
    return EST_SETUP + 4 * t + 2 * rounds * one


def estimate_s(entries, dname, rounds):
    return sum(estimate_case_s(e, dname, rounds) for e in entries)


# ---------------------------------------------------------------------------
# summary

def _geo(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(statistics.mean(math.log(x) for x in xs)) if xs else float("nan")


def _group(sel):
    return {"n": len(sel), "geomean": _geo(c["ratio"] for c in sel), "below": sum(c["ratio"] < SLOW for c in sel),
            "min": min((c["ratio"] for c in sel), default=float("nan"))}


def _models_in_order(cases, only=None):
    """The models whose rows the table and plot show: every producer of a
    case (or those of `only` that produce one), in corpus.MODELS' order."""
    order = {n: i for i, n in enumerate(model_names())}
    names = {m for c in cases for m in c["models"] if only is None or m in only}
    return sorted(names, key=lambda m: (order.get(m, len(order)), m))


def _in(c, key, group):
    """Whether case c belongs to a row: its part, or any model that runs it."""
    return group in c["models"] if key == "model" else c[key] == group


def summarize(cases, models=None):
    """Summary of one dtype's cases: geomean ratio, count below SLOW and fails,
    per set, part and model (a GEMM counts for every model that runs it;
    `models`: only these rows); the WORST slowest."""
    out = {"cases": len(cases), "geomean": _geo(c["ratio"] for c in cases),
           "below": sum(c["ratio"] < SLOW for c in cases), "fail": sum(c["check"] != "ok" for c in cases)}
    out["per_set"] = {s: _group([c for c in cases if c["set"] == s]) for s in SET_ORDER
                      if any(c["set"] == s for c in cases)}
    out["per_part"] = {p: _group([c for c in cases if c["part"] == p]) for p in PART_ORDER
                       if any(c["part"] == p for c in cases)}
    out["per_model"] = {m: _group([c for c in cases if m in c["models"]]) for m in _models_in_order(cases, models)}
    out["worst"] = [{k: c[k] for k in ("id", "part", "set", "model", "layer", "ratio", "kernel", "check")}
                    for c in sorted(cases, key=lambda c: c["ratio"])[:WORST]]
    return out


def print_summary(s, dname, file=sys.stdout):
    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(f"\n{dname}: {s['cases']} GEMMs, geomean ratio {s['geomean']:.3f}, {s['below']} below {SLOW}, "
      f"{s['fail']} failed the check")
    p("| group | GEMMs | geomean | below %.2f |\n|---|---:|---:|---:|" % SLOW)
    for kind in ("set", "part"):
        for name, g in s["per_" + kind].items():
            p(f"| {kind} {name} | {g['n']} | {g['geomean']:.3f} | {g['below']} |")
    p(f"\nthe {min(WORST, s['cases'])} slowest:")
    for w in s["worst"]:
        p(f"  {w['ratio']:.3f}  {w['id']:<26} {w['part']:<7} {w['set']:<7} {w['model']}: {w['layer']}  "
          f"[{w['kernel']}]{'  FAIL' if w['check'] != 'ok' else ''}")


def _shape(c):
    return (f"{c['batch']}×" if c.get("batch") else "") + f"{c['M']}×{c['N']}×{c['K']} {c['layout']}"


def markdown(cases, dname, every=False, models=None):
    """The .md section of one dtype: geomean per set, the ratio per model and
    part (geomean, GEMMs in brackets; `models`: only these rows), the WORST
    slowest (every GEMM when `every`)."""
    s = summarize(cases, models)
    lines = [f"## {dname}: {s['cases']} GEMMs, geomean {s['geomean']:.3f}, {s['below']} below {SLOW}, "
             f"{s['fail']} failed the check", "",
             f"| set | GEMMs | geomean | below {SLOW} | lowest |", "|---|---:|---:|---:|---:|"]
    for name, g in s["per_set"].items():
        lines.append(f"| {name} | {g['n']} | {g['geomean']:.3f} | {g['below']} | {g['min']:.3f} |")
    lines.append(f"| **all** | {s['cases']} | **{s['geomean']:.3f}** | {s['below']} | "
                 f"{min(c['ratio'] for c in cases):.3f} |")
    parts = list(s["per_part"])
    lines += ["", "Ratio per model and part: geomean (GEMMs); lowest and count below "
              f"{SLOW} over the model's GEMMs. A GEMM that several models run counts for each; the "
              "last row counts each GEMM once.", "",
              "| model | " + " | ".join(parts) + f" | all | lowest | below {SLOW} |",
              "|---|" + "---:|" * (len(parts) + 3)]

    def cell(sel):
        return f"{_geo(c['ratio'] for c in sel):.3f} ({len(sel)})" if sel else ""

    for m, g in s["per_model"].items():
        mine = [c for c in cases if m in c["models"]]
        held = " (held out)" if m in HELDOUT_MODELS else ""
        lines.append(f"| {m}{held} | " + " | ".join(cell([c for c in mine if c["part"] == p]) for p in parts) +
                     f" | {cell(mine)} | {g['min']:.3f} | {g['below']} |")
    lines.append("| **all** | " + " | ".join(f"**{cell([c for c in cases if c['part'] == p])}**" for p in parts) +
                 f" | **{cell(cases)}** | {min(c['ratio'] for c in cases):.3f} | {s['below']} |")
    shown = cases if every else sorted(cases, key=lambda c: c["ratio"])[:WORST]
    title = "Every GEMM" if every else f"The {len(shown)} slowest"
    lines += ["", f"{title} (ratio = torch time / ours, higher = ours faster):", "",
              "| ratio | GEMM (batch×M×N×K layout) | part | set | model: layer | ours µs | torch µs | err/bound "
              "| check | kernel |", "|---:|---|---|---|---|---:|---:|---:|---|---|"]
    for c in shown:
        layer = c["layer"] if c["model"] == USER else f"{c['model']}: {c['layer']}"
        lines.append(f"| {c['ratio']:.3f} | {_shape(c)} | {c['part']} | {c['set']} | {layer} | {c['ours_us']:.1f} | "
                     f"{c['torch_us']:.1f} | {c['err_over_bound']:.2f} | "
                     f"{'**FAIL**' if c['check'] != 'ok' else 'ok'} | {c['kernel']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# plot

def _ticks(ax, left, right):
    from matplotlib.ticker import FixedLocator, NullLocator

    candidates = [0.125, 0.25, 0.33, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4, 8]
    ticks = [t for t in candidates if left <= t <= right]
    if len(ticks) > 9:
        ticks = [t for t in ticks if t in (0.125, 0.25, 0.5, 0.8, 1, 1.25, 2, 4, 8)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{t:g}×" for t in ticks], fontsize=7)


def _strip(ax, cases, key, groups, rank, left, right):
    """One dot per GEMM on the row of its group, the group's geomean as a
    black bar with its value at the right, the slowest ringed and numbered."""
    for i, g in enumerate(groups):
        sel = [c for c in cases if _in(c, key, g)]
        ys = [-i + ((_seed(c["id"]) % 1000) / 1000 - 0.5) * 0.5 for c in sel]
        xs = [c["ratio"] for c in sel]
        colors = [PART_COLORS.get(c["part"], "k") for c in sel]
        ax.scatter(xs, ys, s=14, c=["none" if c["set"] == "heldout" else col for c, col in zip(sel, colors)],
                   edgecolors=colors, linewidths=0.8, zorder=3)
        geo = _geo(xs)
        ax.plot([geo, geo], [-i - 0.38, -i + 0.38], color="k", lw=2.2, zorder=4)
        below = sum(x < SLOW for x in xs)
        ax.text(1.01, -i, f"{geo:.3f}" + (f"  {below}<{SLOW}" if below else ""), va="center", fontsize=7,
                transform=ax.get_yaxis_transform())
        for c, y in zip(sel, ys):
            if c["id"] in rank:
                ax.scatter([c["ratio"]], [y], s=70, facecolors="none", edgecolors="crimson", linewidths=1.3, zorder=5)
                ax.annotate(str(rank[c["id"]]), (c["ratio"], y), xytext=(0, 5), textcoords="offset points",
                            ha="center", fontsize=6.5, color="crimson", fontweight="bold", zorder=6)
            if c["check"] != "ok":
                ax.annotate("FAIL", (c["ratio"], y), xytext=(4, -2), textcoords="offset points", fontsize=6.5,
                            color="crimson")
    ax.set_yticks([-i for i in range(len(groups))])
    counts = {g: sum(_in(c, key, g) for c in cases) for g in groups}
    held = {g: " (held out)" if key == "model" and g in HELDOUT_MODELS else "" for g in groups}
    ax.set_yticklabels([f"{g}{held[g]} ({counts[g]})" for g in groups], fontsize=7)
    ax.set_ylim(-len(groups) + 0.45, 0.55)
    ax.set_xscale("log", base=2)
    ax.set_xlim(left, right)
    _ticks(ax, left, right)
    ax.axvline(1.0, color="k", lw=1.0, zorder=2)
    ax.axvline(SLOW, color="0.5", lw=0.8, ls="--", zorder=2)
    ax.grid(axis="x", color="0.88", lw=0.6)
    ax.set_axisbelow(True)


def figure(cases, title, worst=5, models=None):
    """The corpus plot: per dtype (a column), one dot per GEMM on its part's
    row and on the row of each model that runs it (`models`: only these rows;
    held out of tuning: hollow), each row's geomean as a
    black bar (value at the right), lines at 1.0 and SLOW, the `worst`
    slowest ringed, numbered and listed below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dtypes = list(dict.fromkeys(c["dtype"] for c in cases))
    parts = [p for p in PART_ORDER if any(c["part"] == p for c in cases)]
    models = _models_in_order(cases, models)
    panels = [("part", parts)] + ([("model", models)] if len(models) > 1 else [])
    heights = [len(g) + 1.2 for _, g in panels] + [0.35 * worst + 0.6]
    fig, axes = plt.subplots(len(heights), len(dtypes), squeeze=False, gridspec_kw={"height_ratios": heights},
                             figsize=(1.5 + 5.2 * len(dtypes), 1.0 + 0.24 * sum(heights)))
    ratios = [c["ratio"] for c in cases]
    left, right = min(ratios + [SLOW]) / 1.12, max(ratios + [1.0]) * 1.12
    for j, d in enumerate(dtypes):
        mine = [c for c in cases if c["dtype"] == d]
        slowest = sorted(mine, key=lambda c: c["ratio"])[:worst]
        rank = {c["id"]: n for n, c in enumerate(slowest, 1)}
        for i, (key, groups) in enumerate(panels):
            ax = axes[i][j]
            _strip(ax, mine, key, [g for g in groups if any(_in(c, key, g) for c in mine)], rank, left, right)
            ax.set_xlabel(bench.RATIO_LABEL, fontsize=8)
            if i == 0:
                ax.set_title(f"{d}: {len(mine)} GEMMs, geomean {_geo(c['ratio'] for c in mine):.3f}, "
                             f"{sum(c['ratio'] < SLOW for c in mine)} below {SLOW}", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"by {key}", fontsize=8)
        tax = axes[-1][j]
        tax.axis("off")
        text = ["slowest:"] + [f"{n}. {c['ratio']:.2f}×  {_shape(c)}  {c['part']}, "
                               f"{c['layer'] if c['model'] == USER else c['model'] + ': ' + c['layer']}"[:95]
                               + f"\n      {c['kernel']}" for n, c in enumerate(slowest, 1)]
        tax.text(0, 1, "\n".join(text), va="top", ha="left", fontsize=6.5, color="crimson", family="monospace",
                 transform=tax.transAxes)
    handles = [plt.Line2D([], [], ls="", marker="o", color=PART_COLORS[p], label=p) for p in parts]
    if any(c["set"] == "heldout" for c in cases):
        handles.append(plt.Line2D([], [], ls="", marker="o", markerfacecolor="none", color="0.3",
                                  label="held out of tuning"))
    handles += [plt.Line2D([], [], color="k", lw=2.2, label="geomean of the row"),
                plt.Line2D([], [], color="0.5", ls="--", lw=0.8, label=f"{SLOW}")]
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=min(len(handles), 5), frameon=False)
    fig.suptitle(title, fontsize=9, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def plot(cases, path, title, mode, models=None):
    """Writes the plot: per-GEMM bars (bench.figure) for --shapes, the grouped strip plot otherwise."""
    fig = bench.figure(cases, title) if mode == "shapes" else figure(cases, title, models=models)
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------
# main

def add_arguments(p):
    import textwrap

    g = p.add_argument_group(
        "model GEMMs and own shapes (--corpus, --model, --shapes)",
        textwrap.fill("The GEMMs of torch_tiled_gemm/corpus.py, or given shapes, against torch.matmul (see "
                      "torch_tiled_gemm/corpus_bench.py and docs/corpus.md). Models: " + ", ".join(model_names())
                      + ".", 78))
    g.add_argument("--corpus", action="store_true", help="the corpus of model GEMMs (426)")
    g.add_argument("--model", default=None, metavar="NAME[,NAME]",
                   help="the corpus GEMMs these models produce (names above; an unknown name lists them)")
    g.add_argument("--shapes", default=None, metavar="MxNxK[:LAYOUT][,...]",
                   help="own shapes: MxNxK or BxMxNxK (batched), layout NN (default), NT, TN or TT")
    g.add_argument("--dtype", default="bf16", help="bf16, fp16, tf32 or fp32; a comma-separated list runs each")
    g.add_argument("--set", default="all", choices=SETS, help="corpus part: all, tuned or heldout")
    g.add_argument("--parts", default=None, help="comma-separated parts: " + ",".join(PARTS) + " (default: all)")
    g.add_argument("--min-gflop", type=float, default=0.0, help="skip corpus GEMMs smaller than this")
    g.add_argument("--rounds", type=int, default=bench.ROUNDS, help="paired rounds per GEMM (3: a quick pass)")
    g.add_argument("--limit", type=int, default=0, help="at most this many GEMMs (0: all)")
    g.add_argument("--time-budget", type=float, default=0.0, metavar="S",
                   help="seconds: start no GEMM that would end past it, write what is done (0: none)")
    g.add_argument("--estimate", action="store_true", help="print the estimated run time on an H100 and exit")


CORPUS_ONLY = ("dtype", "set", "parts", "min_gflop", "rounds", "limit", "time_budget", "estimate")


def used(args):
    return bool(args.corpus or args.model or args.shapes)


def stray(args, defaults):
    """The corpus-mode options given without --corpus, --model or --shapes."""
    return ["--" + k.replace("_", "-") for k in CORPUS_ONLY if getattr(args, k) != defaults[k]]


def protocol(device, rounds):
    return (f"Paired interleaved, {rounds} round{'s' if rounds != 1 else ''}, each side per round "
            f"{bench.timing_words(device)}, alternating who goes first; ratio = median of per-round "
            f"(torch time / ours), higher = ours faster. Operands random normal in the GEMM's layout; both "
            f"outputs checked against float64 on spread rows, columns and batches (torch_tiled_gemm/testing.py's "
            f"element-wise bound).")


def run(args, device, out):
    """The --corpus / --model / --shapes run; returns the exit status."""
    dnames = args.dtype.split(",")
    for d in dnames:
        if d not in TOL:
            raise SystemExit(f"unknown dtype {d!r} (dtypes: {', '.join(TOL)})")
    if args.shapes and (args.corpus or args.model):
        raise SystemExit("--shapes runs the given shapes: not with --corpus or --model")
    mode, entries = select(args)
    only = resolve_models(args.model) if args.model else None  # the model rows shown
    if not entries:
        raise SystemExit("no GEMM selected")
    if args.estimate:
        for d in dnames:
            s = estimate_s(entries, d, args.rounds)
            print(f"{d}: {len(entries)} GEMMs, rounds={args.rounds}: about {s / 60:.1f} min on an H100 "
                  f"({s / max(len(entries), 1):.2f} s a GEMM)")
        return 0
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device (--device cpu runs on the CPU; --estimate gives the H100 run time)")
    info = bench.env_info(device)
    info["protocol"] = protocol(device, args.rounds)
    info.update(kind=mode, dtypes=dnames, rounds=args.rounds, set=args.set, tol={d: TOL[d] for d in dnames},
                selection={"corpus": args.corpus, "model": args.model, "shapes": args.shapes, "parts": args.parts,
                           "min_gflop": args.min_gflop, "limit": args.limit, "time_budget": args.time_budget,
                           "planned": len(entries)},
                tag=args.tag, env={k: v for k, v in os.environ.items() if k.startswith("TILED_")})
    os.makedirs(out, exist_ok=True)
    stamp = info["date"][:10] + "-" + info["date"][11:19].replace(":", "")
    what = mode + (f"-{bench._slug(args.model)}" if mode == "model" else "")
    stem = (f"{bench._slug(info['gpu'])}-{stamp}-{info['commit']}-{what}-{'-'.join(dnames)}"
            + (f"-{args.tag}" if args.tag else ""))
    base = bench.unique_base(out, stem)
    open(base + ".json", "x").close()  # claimed at once: a run started in the same second takes -2
    print(f"results go to {base}.json/.md", file=sys.stderr)
    cases, stopped = [], None

    def write():
        info["cases"], info["stopped"] = cases, stopped
        info["summary"] = {d: summarize(sel, only) for d in dnames if (sel := [c for c in cases if c["dtype"] == d])}
        with open(base + ".json.tmp", "w") as f:
            json.dump(info, f, indent=1)
        os.replace(base + ".json.tmp", base + ".json")
        sel = info["selection"]
        what = (f"shapes {sel['shapes']}" if mode == "shapes" else
                f"corpus (set {args.set}" + (f", models {sel['model']}" if sel["model"] else "") +
                (f", parts {sel['parts']}" if sel["parts"] else "") +
                (f", ≥ {sel['min_gflop']:g} GFLOP" if sel["min_gflop"] else "") + ")")
        md = [f"# {info['gpu']} — torch {info['torch']} (CUDA {info['cuda']}) — commit {info['commit']} — "
              f"{info['date']}", "", f"{what}: {len(cases)} of {len(entries) * len(dnames)} planned cases."
              + (f" Stopped early: {stopped}." if stopped else ""), "", info["protocol"]]
        for d in dnames:
            sel = [c for c in cases if c["dtype"] == d]
            if sel:
                md += ["", markdown(sel, d, every=mode == "shapes" or len(sel) <= WORST, models=only)]
        failed = [c for c in cases if c["check"] != "ok"]
        if failed:
            md += ["", f"**{len(failed)} of {len(cases)} GEMMs FAILED the accuracy check** (see check_failures in "
                   "the JSON)"]
        with open(base + ".md", "w") as f:
            f.write("\n".join(md) + "\n")

    write()
    t0 = last = time.time()
    durations = []
    bar = bench.Progress(len(entries) * len(dnames), mode)
    for dname in dnames:
        for e in entries:
            if args.time_budget and time.time() - t0 + (statistics.mean(durations) if durations else 0) > \
                    args.time_budget:
                stopped = f"time budget {args.time_budget:g} s: {len(cases)} of {len(entries) * len(dnames)} done"
                break
            t = time.time()
            c = run_case(e, dname, device, args.rounds)
            durations.append(time.time() - t)
            cases.append(c)
            bar.step(f"{dname} {e['id']} {e['part']} {c['ratio']:.3f} {c['check']}")
            if device == "cuda":
                torch.cuda.empty_cache()
            if time.time() - last > 15:
                write()
                last = time.time()
        if stopped:
            break
    bar.close()
    write()
    written = [base + ".json", base + ".md"]
    if cases and bench.try_plot(plot, cases, base + ".png", f"{info['gpu']}  torch {info['torch']}  {info['commit']}  "
                                f"{info['date']}  {mode}, {args.rounds} rounds", mode, only):
        written.append(base + ".png")
    if stopped:
        print(stopped, file=sys.stderr)
    for d, s in info["summary"].items():
        print_summary(s, d)
    print("wrote " + ", ".join(written))
    failed = [c for c in cases if c["check"] != "ok"]
    for c in failed:
        print(f"FAIL {c['dtype']} {c['id']} {c['kernel']}: " + "; ".join(c["check_failures"]), file=sys.stderr)
    if failed:
        print(f"{len(failed)} of {len(cases)} GEMMs FAILED the accuracy check", file=sys.stderr)
        return 1
    return 0
