"""The offline tuner: measures the dispatch choices on the corpus of model
GEMMs and writes the per-GPU dispatch table shipped in the package.

    python -m torch_tiled_gemm.tune [--dtypes bf16,fp16,tf32] [--rounds 3] [--confirm-rounds 6] [--limit N]
        [--min-gflop X] [--time-budget SECONDS] [--raw FILE.jsonl] [--table FILE.tsv]
    python -m torch_tiled_gemm.tune --table-only [--raw FILE.jsonl] [--table FILE.tsv]

(--table-only needs no GPU where the raw file measured one GPU only: the
table is that GPU's.  A run stopped by SIGTERM, e.g. by `timeout`, finishes
the GEMM it is timing and writes the table from what was measured.)

For each GEMM of the corpus's tuning part (torch_tiled_gemm/corpus.py; the
held-out part is never timed here) and each dtype, the extension names the
GEMM's dispatch class and the configurations worth timing for it
(torch.ops.tiled.gemm_tuning: configuration names, "-" for the rules' own
choice), each forced in turn through TILED_CONFIG.  Names that pick the
same kernel (a name that cannot run the GEMM picks the rules' one) are
timed once.  The
distinct kernels and torch.matmul are timed in interleaved rounds (do_bench
medians with L2 flushed, the order rotating every round) on fresh random
operands, and every output is compared with torch's.  Each GEMM's
measurements are appended to the raw file (JSON lines) as soon as they
exist, so a run cut short resumes where it stopped.  A GEMM whose rules'
choice has changed since it was measured (a rule was added or moved) is
measured again: its entries were timed against a kernel the rules no longer
pick; each GEMM counts with its latest measurement.

The table is then rebuilt from every raw measurement of this GPU: per
class, the configuration (the kernel name, less a "staged_*+" prefix) with
the best geometric mean speedup over the rules' choice across the class's
GEMMs (where a GEMM's fastest kernel led the rules' by MIN_GAIN - 0.01 or
more, the two were timed again against each other, A B B A, and that ratio
counts),
kept only where that mean reaches MIN_GAIN
and no GEMM of the class gets slower than MAX_LOSS; classes where the rules
already win get no line.  Each line also names the rules' choices (kernel
names) its class's GEMMs ran, which the entry was measured against:
dispatch reads the table at run time (csrc/cuda/autotune.h) and applies a
class's entry only to a problem the rules would run on one of those;
docs/dispatch.md describes the whole loop.
Raw files of the older format (candidates keyed by the run-time switch
settings that the configuration names replaced) are read the same way: the
table is built from the kernels they timed.
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import signal
import sys
import time

import torch

MIN_GAIN = 1.03  # a class's entry must speed its GEMMs up by this much (geomean) ...
MAX_LOSS = 0.98  # ... and slow none of them below this
# Relative difference from torch.matmul's output above which a kernel's
# output is suspect (both are approximations of the same product).
TOL = {"tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}


def table_name(gpu):
    """The table's file name for a GPU name, as the extension looks it up
    (autotune.cpp's table_path): runs of non-alphanumerics become one '-'."""
    out = []
    for ch in gpu:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif out and out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-") + ".tsv"


def default_table(gpu):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables", table_name(gpu))


@contextlib.contextmanager
def config_env(config):
    """TILED_CONFIG set to `config` (a configuration name, or a comma list)
    for the block; "-", "" or None: unset, the rules' own choice (the
    extension reads it on every call)."""
    saved = os.environ.get("TILED_CONFIG")
    if config in (None, "", "-"):
        os.environ.pop("TILED_CONFIG", None)
    else:
        os.environ["TILED_CONFIG"] = config
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TILED_CONFIG", None)
        else:
            os.environ["TILED_CONFIG"] = saved


def config_of(kernel):
    """The configuration a kernel name runs: the name less a staging prefix
    ("staged_a+sm90_bf16_128x128_nn" -> "sm90_bf16_128x128_nn")."""
    return kernel.split("+")[-1]


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _operands(entry, dname):
    """Fresh random operands of a corpus GEMM (or a raw record of one) in a dtype."""
    from . import bench

    return bench.operands(entry["M"], entry["N"], entry["K"], bench.DTYPES[dname], entry["layout"], "cuda",
                          entry["batch"])


def measure(entry, dname, rounds, confirm_rounds=0):
    """One corpus GEMM in one dtype: its class, each candidate configuration's
    kernel, each kernel's median time and whether its output agrees with
    torch's; with confirm_rounds, a lead re-timed against the rules' kernel
    (confirm)."""
    a, b = _operands(entry, dname)
    key, *cands = torch.ops.tiled.gemm_tuning(a, b)
    kernel_of = {}
    for s in cands:
        with config_env(s):
            kernel_of[s] = torch.ops.tiled.gemm_kernel_name(a, b)
    kernels = list(dict.fromkeys(kernel_of.values()))
    rec = {"id": entry["id"], "dtype": dname, "key": key, "set": entry["set"], "part": entry["part"],
           "M": entry["M"], "N": entry["N"], "K": entry["K"], "batch": entry["batch"], "layout": entry["layout"],
           "settings": kernel_of, "ms": {}, "ok": {}}
    if len(kernels) < 2:
        return rec  # nothing to choose
    first = {k: next(s for s in cands if kernel_of[s] == k) for k in kernels}
    ref = torch.matmul(a, b)
    ref_norm = ref.double().norm().item() or 1.0
    for k in kernels:
        with config_env(first[k]):
            out = torch.ops.tiled.gemm(a, b)
        rec["ok"][k] = bool((out.double() - ref.double()).norm().item() / ref_norm <= TOL[dname])
    order = kernels + ["torch"]
    rec["ms"] = _median_times(a, b, first, rounds, lambda r: order[r % len(order):] + order[:r % len(order)])
    confirm(rec, a, b, first, confirm_rounds)
    return rec


def _median_times(a, b, first, rounds, order):
    """{kernel or "torch": median ms} over `rounds` rounds, round r timing
    order(r) in turn (a kernel forced through its first configuration name)."""
    from . import bench

    runs = {}
    for r in range(rounds):
        for k in order(r):
            if k == "torch":
                t = bench.time_ms(lambda: torch.matmul(a, b), "cuda")
            else:
                with config_env(first[k]):
                    t = bench.time_ms(lambda: torch.ops.tiled.gemm(a, b), "cuda")
            runs.setdefault(k, []).append(t)
    return {k: sorted(v)[len(v) // 2] for k, v in runs.items()}


def _best_kernel(rec):
    """The fastest kernel of a record whose output agreed with torch's (the
    rules' own where none did)."""
    return min((k for k in rec["ms"] if k != "torch" and rec["ok"].get(k)), key=rec["ms"].get,
               default=rec["settings"]["-"])


def confirm(rec, a, b, first, rounds):
    """A lead re-timed: where the fastest correct kernel beats the rules'
    by MIN_GAIN - 0.01 or more, it and the rules' kernel are timed again against
    each other in `rounds` rounds of the order A B B A ... (kernels within
    ~5% of each other on 0.3-5 ms GEMMs rank by the power state of the
    moment: the first pass's +5.6% of 128x256sw over 128x256c2 measured
    0.994x paired, docs/dispatch.md).  Stored as rec["confirm"] = {kernel:
    median ms}; build_table takes that pair's ratio from it."""
    rk = rec["settings"]["-"]
    if rounds <= 0 or not rec["ok"].get(rk):
        return
    best = _best_kernel(rec)
    if best == rk or rec["ms"][rk] / rec["ms"][best] < MIN_GAIN - 0.01:
        return
    rec["confirm"] = _median_times(a, b, first, rounds, lambda r: (rk, best) if r % 2 == 0 else (best, rk))


def latest(records):
    """Each (dtype, GEMM)'s last record: the raw file is appended to, so a
    GEMM measured again supersedes what was measured before."""
    out = {}
    for r in records:
        out[(r["dtype"], r["id"])] = r
    return list(out.values())


def stale(records, rules_kernel):
    """The (dtype, id) of the records whose rules' choice the rules no longer
    make: rules_kernel(record) names the kernel they pick now.  Records of the
    older format (kernels named as they were then) are left as they are."""
    return {(r["dtype"], r["id"]) for r in records
            if not any("=" in k for k in r["settings"]) and rules_kernel(r) != r["settings"].get("-")}


def _rules_kernel_now(rec):
    """The kernel the rules pick for a record's GEMM in this process (the
    table is off in the tuner, TILED_CONFIG unset)."""
    torch.backends.cuda.matmul.allow_tf32 = rec["dtype"] == "tf32"
    try:
        return torch.ops.tiled.gemm_kernel_name(*_operands(rec, rec["dtype"]))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _ratio(r, rules_kernel, kernel):
    """The rules' time over `kernel`'s on record r: from the confirming
    re-timing where it timed both, else from the first pass."""
    c = r.get("confirm") or {}
    if rules_kernel in c and kernel in c:
        return c[rules_kernel] / c[kernel]
    return r["ms"][rules_kernel] / r["ms"][kernel]


def build_table(records):
    """{class key: (configuration, gain, worst, count, ratio rules -> chosen vs
    torch, the rules' configurations it was measured against or None)} for
    the classes whose best configuration passes MIN_GAIN / MAX_LOSS.  Works
    from the kernels each record timed, so records of the older format
    (candidates named by switches) count as well."""
    by_key = {}
    for r in records:
        if r["ms"]:
            by_key.setdefault(r["key"], []).append(r)
    table = {}
    for key, recs in sorted(by_key.items()):
        rules = [r["settings"]["-"] for r in recs]
        # per GEMM, configuration -> the kernel timed for it, where that agreed with torch
        timed = [{config_of(k): k for k in r["ms"] if k != "torch" and r["ok"].get(k, False)} for r in recs]
        common = set.intersection(*(set(t) for t in timed))
        # A table entry applies to its class's own layout: a configuration of
        # another (one that ran on a copy staged for it) cannot be reproduced.
        layout = dict(kv.split("=", 1) for kv in key.split(";") if "=" in kv).get("layout")
        if layout:
            common = {c for c in common if c.endswith("_" + layout)}
        best = None
        for c in sorted(common):
            gains = [_ratio(r, rk, t[c]) for r, rk, t in zip(recs, rules, timed)]
            g = _geomean(gains)
            if best is None or g > best[1]:
                best = (c, g, min(gains))
        if best and best[1] >= MIN_GAIN and best[2] >= MAX_LOSS:
            c = best[0]
            before = _geomean([r["ms"]["torch"] / r["ms"][rk] for r, rk in zip(recs, rules)])
            after = _geomean([r["ms"]["torch"] / r["ms"][rk] * _ratio(r, rk, t[c]) for r, rk, t in zip(recs, rules, timed)])
            # (Records of the older format name the rules' choice as kernels were
            # named then, which dispatch would not recognize: such an entry keeps
            # applying to its whole class, as the tables it built did.)
            old = any("=" in s for r in recs for s in r["settings"])
            # (where the rules already ran `c` the entry changes nothing: not listed)
            over = None if old else ",".join(sorted({config_of(rk) for rk in rules} - {c}))
            table[key] = (c, best[1], best[2], len(recs), before, after, over)
    return table


def write_table(path, table, gpu, records):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    n = len({(r["dtype"], r["id"]) for r in records})
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    with open(path, "w") as f:
        f.write(f"# Dispatch table for {gpu}: python -m torch_tiled_gemm.tune, {stamp}, from {n} corpus GEMMs\n")
        f.write("# (the tuning part; docs/dispatch.md).  class key <TAB> configuration <TAB> what it measured:\n")
        f.write(f"# geomean speedup over the rules' choice (>= {MIN_GAIN}), the worst GEMM's (>= {MAX_LOSS}),\n")
        f.write("# the class's GEMMs, and their geomean torch.matmul time / ours before -> after;\n")
        f.write("# <TAB> over: the rules' choices it was measured against (dispatch applies the entry to those only;\n")
        f.write("# a line without it, from measurements that named kernels as they were named then, to its class).\n")
        for key, (s, g, worst, count, before, after, over) in table.items():
            f.write(f"{key}\t{s}\tgain {g:.3f} worst {worst:.3f} n {count} vs-torch {before:.3f}->{after:.3f}"
                    + (f"\tover {over}\n" if over else "\n"))


def load_raw(path, gpu):
    """The raw file's records of `gpu` (None: of every GPU)."""
    recs = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a stopped run
                if gpu is None or r.get("gpu") == gpu:
                    recs.append(r)
    return recs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="bf16,fp16,tf32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--confirm-rounds", type=int, default=6,
                   help="rounds re-timing a lead against the rules' kernel (0: none)")
    p.add_argument("--limit", type=int, default=None, help="at most this many GEMMs per dtype")
    p.add_argument("--min-gflop", type=float, default=0.0)
    p.add_argument("--time-budget", type=float, default=None, help="stop timing after this many seconds")
    p.add_argument("--raw", default=None, help="measurements, JSON lines (default: tune-<gpu>.jsonl here)")
    p.add_argument("--table", default=None, help="the table to write (default: the package's for this GPU)")
    p.add_argument("--table-only", action="store_true", help="rebuild the table from the raw file, time nothing")
    args = p.parse_args(argv)

    # The rules' own choice is what every configuration is measured against:
    # the shipped table must not stand in for it, nor a configuration forced
    # by hand or a user's autotuning cache.  (TILED_DISABLE_KERNELS is read
    # once per process: set before any GEMM.)
    dis = [d for d in os.environ.get("TILED_DISABLE_KERNELS", "").split(",") if d]
    os.environ["TILED_DISABLE_KERNELS"] = ",".join(dis + ["table"])
    for k in ("TILED_CONFIG", "TILED_AUTOTUNE_CACHE"):
        os.environ.pop(k, None)
    from . import corpus
    import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)

    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name()
    elif args.table_only and args.raw:
        # without a GPU: the one GPU the raw file measured
        gpus = sorted({r.get("gpu") for r in load_raw(args.raw, None)})
        if len(gpus) != 1:
            sys.exit(f"tune: --table-only without a GPU needs a raw file of one GPU ({args.raw}: {gpus})")
        gpu = gpus[0]
    else:
        sys.exit("tune: needs a CUDA GPU (the table is per GPU; --table-only --raw FILE runs without one)")
    raw = args.raw or f"tune-{table_name(gpu)[:-4]}.jsonl"
    table_path = args.table or default_table(gpu)
    records = latest(load_raw(raw, gpu))
    if not args.table_only:
        # SIGTERM (a `timeout`): stop after the GEMM being timed, then write the table
        term = []
        on_term = signal.signal(signal.SIGTERM, lambda *_: term.append(True))
        moved = stale(records, _rules_kernel_now)
        torch.cuda.empty_cache()
        if moved:
            print(f"{len(moved)} measured GEMMs whose rules' choice has changed since: measured again", flush=True)
        done = {(r["dtype"], r["id"]) for r in records} - moved
        entries = corpus.corpus("tuned", min_gflop=args.min_gflop)
        t0 = time.time()
        stopped = False
        for dname in [d for d in args.dtypes.split(",") if d]:
            todo = [e for e in entries if (dname, e["id"]) not in done][: args.limit]
            torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
            for i, e in enumerate(todo):
                if term or (args.time_budget and time.time() - t0 > args.time_budget):
                    stopped = True
                    break
                rec = dict(measure(e, dname, args.rounds, args.confirm_rounds), gpu=gpu)
                records.append(rec)
                with open(raw, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                torch.cuda.empty_cache()
                if rec["ms"]:
                    rk = rec["settings"]["-"]
                    best = _best_kernel(rec)
                    again = f", {_ratio(rec, rk, best):.3f}x the rules' re-timed" if "confirm" in rec else ""
                    print(f"[{dname} {i + 1}/{len(todo)}] {e['id']}: rules {rk} "
                          f"{rec['ms']['torch'] / rec['ms'][rk]:.3f}x torch, best {best} "
                          f"{rec['ms']['torch'] / rec['ms'][best]:.3f}x{again}", flush=True)
            torch.backends.cuda.matmul.allow_tf32 = False
            if stopped:
                why = "stopped" if term else "time budget reached"
                print(f"{why}: {raw} holds what was measured; run again to go on", flush=True)
                break
        signal.signal(signal.SIGTERM, on_term)
    records = latest(records)
    table = build_table(records)
    write_table(table_path, table, gpu, records)
    print(f"{len(table)} classes in {table_path} (from {len(records)} measured GEMMs in {raw})")
    for key, (s, g, worst, count, before, after, over) in table.items():
        print(f"  {key}: {s} over {over}  gain {g:.3f} (worst {worst:.3f}, {count} GEMMs) "
              f"vs torch {before:.3f} -> {after:.3f}")


if __name__ == "__main__":
    main()
