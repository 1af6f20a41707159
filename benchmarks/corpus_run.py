"""Times the corpus of model GEMMs (torch_tiled_gemm/corpus.py) against torch.matmul.

    python benchmarks/corpus_run.py --dtype bf16 [--set all|tuned|heldout] [--rounds 6]
        [--limit N] [--min-gflop X] [--parts fwd,dX,dW,attn,lora,generic] [--models NAME,...]
        [--time-budget SECONDS] [--out DIR]
    python benchmarks/corpus_run.py --estimate [--dtype ...] [--rounds ...]   (no GPU needed)

Each GEMM is timed with the benchmark's paired, interleaved protocol
(torch_tiled_gemm.bench.paired: per round ours and torch.matmul once each
with do_bench medians, L2 flushed before every timed call, alternating who
goes first; ratio = median of the per-round torch / ours).  Operands are
fresh random normal tensors in the GEMM's layout (bench.operands).  Each
output, ours and torch's, is checked against a float64 product on evenly
spread rows, columns and batches (all of them for small GEMMs): relative
error within TOL[dtype] (scaled by sqrt(K / 16384) past K = 16384) is
"ok", else "FAIL".

The GEMMs run in a fixed order spread over parts and sizes (by a hash of
their ids), so a run cut short by --limit or --time-budget is a sample of
the whole.  Writes DIR/corpus-<gpu>-<date>-<commit>-<dtype>.json (rewritten
as cases finish: a run stopped midway keeps what it measured) and prints a
summary: geomean ratio per set and per part, the count below 0.97, the ten
worst.
"""
import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import torch  # noqa: E402

from torch_tiled_gemm.corpus import PARTS, SETS, corpus  # noqa: E402

# Relative error bounds against float64 (||out - ref|| / ||ref||), for K up
# to TOL_K; past it the bound grows as sqrt(K / TOL_K): a dot product's
# rounding error in fp32 accumulation grows as sqrt(K) against its value
# (strict fp32 at K = 128256 lands near 1.5e-5, torch's as well).
TOL = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}
TOL_K = 16384
SLOW = 0.97  # a ratio below this counts as slower than torch
# sampled check: at most this many rows / columns / batches, and at most
# CHECK_ELEMS elements of A's (or B's) sample in float64
CHECK_ROWS, CHECK_BATCHES, CHECK_ELEMS = 1024, 8, 1 << 25


def _bench():
    """The benchmark's helpers (imported on first use: the module loads the extension)."""
    from torch_tiled_gemm import bench

    return bench


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
    from torch_tiled_gemm import testing

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


def _seed(gid):
    return int(hashlib.sha1(gid.encode()).hexdigest()[:8], 16)


def run_case(entry, dname, device="cuda", rounds=6):
    """Times one corpus entry in dtype dname against torch.matmul and checks
    both outputs; returns the result record (a dict)."""
    bench = _bench()
    dtype = bench.DTYPES[dname]
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    try:
        torch.manual_seed(_seed(entry["id"]))
        a, b = bench.operands(entry["M"], entry["N"], entry["K"], dtype, entry["layout"], device, entry["batch"])
        ours = lambda: torch.ops.tiled.gemm(a, b)  # noqa: E731
        theirs = lambda: torch.matmul(a, b)  # noqa: E731
        tf32 = dname == "tf32"
        err, check = check_error(ours(), a, b, tf32)
        err_torch, _ = check_error(theirs(), a, b, tf32)
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
        "check": "ok" if check.ok and err <= tol else "FAIL",
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


def summarize(cases):
    """Summary dict: geomean ratio per set and per part, count below SLOW, fails, the ten worst."""
    out = {"cases": len(cases), "geomean": _geo(c["ratio"] for c in cases),
           "below": sum(c["ratio"] < SLOW for c in cases), "fail": sum(c["check"] != "ok" for c in cases)}
    def group(sel):
        return {"n": len(sel), "geomean": _geo(c["ratio"] for c in sel), "below": sum(c["ratio"] < SLOW for c in sel)}

    out["per_set"] = {s: group([c for c in cases if c["set"] == s])
                      for s in ("tuned", "heldout") if any(c["set"] == s for c in cases)}
    out["per_part"] = {p: group([c for c in cases if c["part"] == p])
                       for p in PARTS if any(c["part"] == p for c in cases)}
    out["worst"] = [{k: c[k] for k in ("id", "part", "set", "model", "layer", "ratio", "kernel")}
                    for c in sorted(cases, key=lambda c: c["ratio"])[:10]]
    return out


def print_summary(s, dname, file=sys.stdout):
    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(f"\n{dname}: {s['cases']} GEMMs, geomean ratio {s['geomean']:.3f}, {s['below']} below {SLOW}, "
      f"{s['fail']} failed the check")
    p("| group | GEMMs | geomean | below %.2f |\n|---|---:|---:|---:|" % SLOW)
    for name, g in list(s["per_set"].items()) + list(s["per_part"].items()):
        p(f"| {name} | {g['n']} | {g['geomean']:.3f} | {g['below']} |")
    p("\nten worst:")
    for w in s["worst"]:
        p(f"  {w['ratio']:.3f}  {w['id']:<26} {w['part']:<7} {w['set']:<7} {w['model']}: {w['layer']}  [{w['kernel']}]")


# ---------------------------------------------------------------------------
# main

def _order(entries):
    return sorted(entries, key=lambda e: (_seed(e["id"]), e["id"]))


def select(args):
    parts = args.parts.split(",") if args.parts else None
    models = args.models.split(",") if args.models else None
    for p in parts or ():
        if p not in PARTS:
            raise SystemExit(f"unknown part {p!r} (parts: {', '.join(PARTS)})")
    entries = _order(corpus(args.set, args.min_gflop, parts, models))
    return entries[:args.limit] if args.limit else entries


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="bf16", help="bf16, fp16, tf32 or fp32; a comma-separated list runs each")
    p.add_argument("--set", default="all", choices=SETS)
    p.add_argument("--rounds", type=int, default=6, help="paired rounds per GEMM (3 for a quick pass)")
    p.add_argument("--limit", type=int, default=0, help="at most this many GEMMs (0: all)")
    p.add_argument("--min-gflop", type=float, default=0.0)
    p.add_argument("--parts", default=None, help="comma-separated parts (default: all)")
    p.add_argument("--models", default=None, help="comma-separated model names (GEMMs any of them produces)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds: start no GEMM that would end past it; write what is done (0: none)")
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--estimate", action="store_true", help="print the estimated run time on an H100 and exit")
    args = p.parse_args(argv)
    dnames = args.dtype.split(",")
    for d in dnames:
        if d not in TOL:
            raise SystemExit(f"unknown dtype {d!r} (dtypes: {', '.join(TOL)})")
    entries = select(args)
    if args.estimate:
        for d in dnames:
            s = estimate_s(entries, d, args.rounds)
            print(f"{d}: {len(entries)} GEMMs, rounds={args.rounds}: about {s / 60:.1f} min on an H100 "
                  f"({s / max(len(entries), 1):.2f} s a GEMM)")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device (use --estimate for a run-time estimate, --device cpu to try it on the CPU)")
    bench = _bench()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    for dname in dnames:
        info = bench.env_info(args.device)
        info["protocol"] = info["protocol"].replace("6 rounds", f"{args.rounds} rounds")
        info.update(kind="corpus", dtype=dname, rounds=args.rounds, set=args.set, tol=TOL[dname],
                    selection={"limit": args.limit, "min_gflop": args.min_gflop, "parts": args.parts,
                               "models": args.models, "planned": len(entries)},
                    env={k: v for k, v in os.environ.items() if k.startswith("TILED_")})
        stem = f"corpus-{bench._slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}-{dname}"
        path = os.path.join(args.out, stem + ".json")
        cases, durations, stopped = [], [], None
        last_write = time.time()

        def write():
            info["cases"] = cases
            info["stopped"] = stopped
            info["summary"] = summarize(cases) if cases else None
            with open(path + ".tmp", "w") as f:
                json.dump(info, f, indent=1)
            os.replace(path + ".tmp", path)

        bar = _bench().Progress(len(entries), f"corpus {dname}")
        for e in entries:
            elapsed = time.time() - t0
            if args.time_budget and elapsed + (statistics.mean(durations) if durations else 0) > args.time_budget:
                stopped = f"time budget {args.time_budget:g}s: {len(cases)} of {len(entries)} done"
                break
            t = time.time()
            c = run_case(e, dname, args.device, args.rounds)
            durations.append(time.time() - t)
            cases.append(c)
            bar.step(f"{e['id']} {e['part']} {c['ratio']:.3f} {c['check']}")
            if args.device == "cuda":
                torch.cuda.empty_cache()
            if time.time() - last_write > 15:
                write()
                last_write = time.time()
        bar.close()
        write()
        if stopped:
            print(stopped, file=sys.stderr)
        if cases:
            print_summary(info["summary"], dname)
        print(f"wrote {path} ({time.time() - t0:.0f}s so far)")
        if stopped:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
