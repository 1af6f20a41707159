"""Benchmark of the seed ladder: every step against cuBLAS (torch.matmul),
strict fp32.

    python benchmarks/ladder.py [--sizes 4096,2048] [--out benchmarks/results]
                                [--steps 1,2,20,...] [--rounds 6]

Per size: each step timed with triton.testing.do_bench (CUDA events, L2
flushed; warmup=25, rep=150, median; the slow steps 1-4 get a shorter rep),
then the last step (simt_fast) against cuBLAS in interleaved paired rounds
(PERF.md's protocol: 6 rounds of do_bench(warmup=5, rep=25) for each side,
alternating which goes first; ratio = median of per-round cuBLAS/ours).
Then simt_fast (step 9, its size dispatch) and its configs alone (96 / 97
sliced-K 64x64 / 32x32, 101 the 128x128 lean pipeline, 109 the large
config) against cuBLAS with the same paired protocol on CANDIDATE_CASES: the
four layouts at 4096^3, and 2048^3, 8192^3, 1024^3, 128x4096x4096,
16x4096x4096 and two 14336-deep / -wide shapes.  Operand layouts come from strides (transposed views, no
copies), for cuBLAS too.  The compact candidate table is printed last.
Writes benchmarks/results/ladder-<gpu>-<date>-<commit>.json and a .png bar
chart beside it; <commit> is git's short HEAD, else $TILED_COMMIT (set by the
device script: the GPU machine's copy has no .git), else "nocommit".  About 2-3 minutes on an H100/H200.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess

import torch
import triton.testing

import torch_tiled_gemm  # noqa: F401  (loads torch.ops.tiled)

# Mirror of ladder_step_name() in csrc/cuda/ladder/ladder.cu.
STEP_NAMES = {
    1: "naive",
    2: "smem tiling (TILE 32)",
    20: "smem tiling (TILE 16)",
    3: "thread tiling (4x4)",
    4: "two-level tiling (64x64, 4x4)",
    5: "vectorized 128-bit loads (128x128, 8x8)",
    6: "warp tiling (256x128, 64x64 warps)",
    7: "cp.async 4-stage pipeline",
    8: "hilbert block order",
    9: "simt_fast (size dispatch)",
    96: "simt_fast: sliced-K 64x64, 4 warps x k/4",
    97: "simt_fast: sliced-K 32x32, 4 warps x k/4",
    101: "simt_fast: lean pipeline 128x128x16",
    109: "simt_fast: 128x256x16, FFMAs in 2x2 quads",
}
DEFAULT_STEPS = [1, 20, 2, 3, 4, 5, 6, 7, 8, 9, 96, 97, 101, 109]
# simt_fast and its configs, paired against cuBLAS: (M, N, K, layouts, steps).
CANDIDATE_CASES = [
    (4096, 4096, 4096, ["NN", "NT", "TN", "TT"], [9, 101, 109]),
    (2048, 2048, 2048, ["NN", "NT"], [9, 101, 109]),
    (8192, 8192, 8192, ["NN"], [9, 109]),
    (4096, 14336, 4096, ["NN", "NT"], [9, 109]),
    (4096, 4096, 14336, ["NN", "NT"], [9, 109]),
    (1024, 1024, 1024, ["NN"], [9, 96, 97, 101]),
    (128, 4096, 4096, ["NN"], [9, 96, 97]),
    (16, 4096, 4096, ["NN"], [9, 96, 97]),
]
SLOW_STEPS = {1, 2, 20, 3, 4}
FINAL_STEP = 9


def parse_sizes(text):
    sizes = []
    for item in text.split(","):
        dims = [int(x) for x in re.split(r"[x*]", item.strip()) if x]
        if len(dims) == 1:
            dims = dims * 3
        if len(dims) != 3:
            raise SystemExit(f"bad size {item!r}: use N or MxNxK")
        sizes.append(tuple(dims))
    return sizes


def git_commit():
    """Short commit for file names: $TILED_COMMIT when set (the device script
    sets it: its snapshot may sit inside another checkout), else git's HEAD,
    else "nocommit"."""
    env = re.sub(r"[^A-Za-z0-9._-]+", "", os.environ.get("TILED_COMMIT", "").strip())
    if env:
        return env[:40]
    try:
        out = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"],
                                      stderr=subprocess.DEVNULL,
                                      cwd=os.path.dirname(os.path.abspath(__file__))
                                      ).decode().strip()
        if out:
            return out
    except Exception:
        pass
    return "nocommit"


def tflops(m, n, k, ms):
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def bench(fn, slow=False):
    if slow:
        return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def paired(ours, theirs, rounds):
    ratios, t_ours, t_theirs = [], [], []
    for r in range(rounds):
        order = [("ours", ours), ("theirs", theirs)]
        if r % 2:
            order.reverse()
        t = {}
        for name, fn in order:
            t[name] = triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median")
        ratios.append(t["theirs"] / t["ours"])
        t_ours.append(t["ours"])
        t_theirs.append(t["theirs"])
    return statistics.median(ratios), statistics.median(t_ours), statistics.median(t_theirs), ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096,2048")
    ap.add_argument("--out", default=os.path.join("benchmarks", "results"))
    ap.add_argument("--steps", default=",".join(map(str, DEFAULT_STEPS)))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--no-candidates", action="store_true", help="skip the candidate comparison")
    ap.add_argument("--candidates-only", action="store_true", help="only the candidate comparison")
    args = ap.parse_args()
    if args.candidates_only:
        args.sizes = ""

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    steps = [int(s) for s in args.steps.split(",") if s]
    dev = torch.cuda.get_device_name()
    cases = []
    for (m, n, k) in (parse_sizes(args.sizes) if args.sizes else []):
        g = torch.Generator(device="cuda")
        g.manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=g)
        b = torch.randn(k, n, device="cuda", generator=g)
        ref = torch.matmul(a, b)
        ms_cublas = bench(lambda: torch.matmul(a, b))
        rows = []
        for step in steps:
            fn = lambda s=step: torch.ops.tiled.gemm_ladder(a, b, s)  # noqa: E731
            try:
                out = fn()
            except RuntimeError as e:  # e.g. a candidate that refuses this shape
                rows.append({"step": step, "name": STEP_NAMES.get(step, "?"), "error": str(e)})
                continue
            err = ((out - ref).norm() / ref.norm()).item()
            ms = bench(fn, slow=step in SLOW_STEPS)
            rows.append({"step": step, "name": STEP_NAMES.get(step, "?"), "ms": ms,
                         "tflops": tflops(m, n, k, ms), "pct_cublas": 100.0 * ms_cublas / ms,
                         "rel_err_vs_cublas": err})
        case = {"M": m, "N": n, "K": k, "dtype": "float32", "allow_tf32": False,
                "cublas_ms": ms_cublas, "cublas_tflops": tflops(m, n, k, ms_cublas), "steps": rows}
        if FINAL_STEP in steps:
            final = lambda: torch.ops.tiled.gemm(a, b, None)  # noqa: E731  (dispatches simt_fast)
            ratio, t_o, t_c, ratios = paired(final, lambda: torch.matmul(a, b), args.rounds)
            case["paired_final"] = {"op": "torch.ops.tiled.gemm (simt_fast)", "ratio_cublas_over_ours": ratio,
                                    "ours_ms": t_o, "cublas_ms": t_c, "round_ratios": ratios,
                                    "ours_tflops": tflops(m, n, k, t_o), "cublas_tflops": tflops(m, n, k, t_c)}
        cases.append(case)

        print(f"\n{m}x{n}x{k} fp32 (strict)   cuBLAS {case['cublas_tflops']:.1f} TFLOP/s")
        print(f"{'step':>5}  {'name':<42} {'TFLOP/s':>8} {'% cuBLAS':>9} {'rel err':>9}")
        for r in rows:
            if "error" in r:
                print(f"{r['step']:>5}  {r['name']:<42} {'refused: ' + r['error']}")
            else:
                print(f"{r['step']:>5}  {r['name']:<42} {r['tflops']:8.2f} {r['pct_cublas']:8.1f}% "
                      f"{r['rel_err_vs_cublas']:9.1e}")
        if "paired_final" in case:
            p = case["paired_final"]
            print(f"paired ({args.rounds} rounds) simt_fast vs cuBLAS: ratio {p['ratio_cublas_over_ours']:.3f} "
                  f"({p['ours_tflops']:.1f} vs {p['cublas_tflops']:.1f} TFLOP/s)")

    cand_rows = [] if args.no_candidates else run_candidates(args.rounds)

    date = datetime.date.today().isoformat()
    commit = git_commit()
    gpu_slug = re.sub(r"[^A-Za-z0-9]+", "-", dev).strip("-").lower()
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"ladder-{gpu_slug}-{date}-{commit}")
    result = {"benchmark": "ladder", "gpu": dev, "torch": torch.__version__,
              "cuda": torch.version.cuda, "commit": commit, "date": date,
              "timing": "triton.testing.do_bench median (warmup=25, rep=150; steps 1-4: 10/40); "
                        "paired: PERF.md protocol", "cases": cases,
              "candidates": cand_rows}
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=2)
    print(f"\nwrote {stem}.json")
    try:
        plot(cases, dev, stem)
    except Exception as e:  # the plot is a convenience; never lose the table for it
        print(f"no plot: {e}")
    print_candidate_table(cand_rows, args.rounds, dev)


def _operands(m, n, k, layout, gen):
    """A (m x k) and B (k x n) with the layout carried by strides: 'T' is a
    column-major view of a contiguous transposed buffer."""
    a = (torch.randn(k, m, device="cuda", generator=gen).t() if layout[0] == "T"
         else torch.randn(m, k, device="cuda", generator=gen))
    b = (torch.randn(n, k, device="cuda", generator=gen).t() if layout[1] == "T"
         else torch.randn(k, n, device="cuda", generator=gen))
    return a, b


def run_candidates(rounds):
    rows = []
    for (m, n, k, layouts, steps) in CANDIDATE_CASES:
        for layout in layouts:
            g = torch.Generator(device="cuda")
            g.manual_seed(1)
            a, b = _operands(m, n, k, layout, g)
            ref = torch.matmul(a, b)
            cublas = lambda: torch.matmul(a, b)  # noqa: E731
            for step in steps:
                row = {"M": m, "N": n, "K": k, "layout": layout, "step": step,
                       "name": STEP_NAMES.get(step, "?")}
                fn = lambda s=step: torch.ops.tiled.gemm_ladder(a, b, s)  # noqa: E731
                try:
                    out = fn()
                    row["rel_err_vs_cublas"] = ((out - ref).norm() / ref.norm()).item()
                    ratio, t_o, t_c, ratios = paired(fn, cublas, rounds)
                except RuntimeError as e:
                    row["error"] = str(e)[:120]
                    rows.append(row)
                    print(f"candidate {m}x{n}x{k} {layout} step {step}: {row['error']}", flush=True)
                    continue
                row.update({"ratio_cublas_over_ours": ratio, "ours_ms": t_o, "cublas_ms": t_c,
                            "ours_tflops": tflops(m, n, k, t_o),
                            "cublas_tflops": tflops(m, n, k, t_c), "round_ratios": ratios})
                rows.append(row)
                print(f"candidate {m}x{n}x{k} {layout} step {step:>2}: {row['ours_tflops']:6.1f} TFLOP/s, "
                      f"ratio {ratio:.3f}", flush=True)
            del a, b, ref
    return rows


def print_candidate_table(rows, rounds, dev):
    if not rows:
        return
    print(f"\n== simt_fast candidates vs cuBLAS, strict fp32, {dev} "
          f"(paired, {rounds} rounds; ratio = cuBLAS time / ours, >1 = faster than cuBLAS)")
    print(f"{'shape':<15} {'lay':<3} {'step':>4}  {'name':<32} {'TFLOP/s':>7} {'cuBLAS':>7} "
          f"{'ratio':>6} {'rel err':>8}")
    nn = {}
    for r in rows:
        if r["layout"] == "NN" and "ratio_cublas_over_ours" in r:
            nn[(r["M"], r["N"], r["K"], r["step"])] = r["ours_tflops"]
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        if "error" in r:
            print(f"{shape:<15} {r['layout']:<3} {r['step']:>4}  {r['name']:<32} refused: {r['error'][:60]}")
            continue
        vs_nn = ""
        base = nn.get((r["M"], r["N"], r["K"], r["step"]))
        if r["layout"] != "NN" and base:
            vs_nn = f"  ({100.0 * r['ours_tflops'] / base:.0f}% of NN)"
        print(f"{shape:<15} {r['layout']:<3} {r['step']:>4}  {r['name']:<32} {r['ours_tflops']:7.1f} "
              f"{r['cublas_tflops']:7.1f} {r['ratio_cublas_over_ours']:6.3f} "
              f"{r['rel_err_vs_cublas']:8.1e}{vs_nn}")


def plot(cases, dev, stem):
    if not cases:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot")
        return
    fig, axes = plt.subplots(len(cases), 1, figsize=(11, 4 * len(cases)), squeeze=False)
    for ax, case in zip(axes[:, 0], cases):
        ok = [r for r in case["steps"] if "tflops" in r]
        labels = [f"{r['step']}: {r['name']}" for r in ok] + ["cuBLAS (torch.matmul)"]
        vals = [r["tflops"] for r in ok] + [case["cublas_tflops"]]
        colors = ["tab:blue"] * len(ok) + ["tab:gray"]
        ax.barh(range(len(vals)), vals, color=colors)
        ax.set_yticks(range(len(vals)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:.1f}", va="center", fontsize=8)
        ax.set_xlabel("TFLOP/s")
        ax.set_title(f"{case['M']}x{case['N']}x{case['K']} fp32 strict, {dev}")
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=120)
    print(f"wrote {stem}.png")


if __name__ == "__main__":
    main()
