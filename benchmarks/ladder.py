"""Benchmark of the seed ladder: every step against cuBLAS (torch.matmul),
strict fp32.

    python benchmarks/ladder.py [--sizes 4096,2048] [--out benchmarks/results]
                                [--steps 1,2,20,...] [--rounds 6]

Per size: each step timed with triton.testing.do_bench (CUDA events, L2
flushed; warmup=25, rep=150, median; the slow steps 1-4 get a shorter rep),
then the last step (simt_fast) against cuBLAS in interleaved paired rounds
(PERF.md's protocol: 6 rounds of do_bench(warmup=5, rep=25) for each side,
alternating which goes first; ratio = median of per-round cuBLAS/ours).
Writes benchmarks/results/ladder-<gpu>-<date>-<commit>.json and a .png bar
chart beside it, and prints a table.
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
    9: "simt_fast (128x128, 4 warps, 4 stages)",
    91: "cand 1: 128x128x8, 256 thr, 8x8",
    92: "cand 2: 128x128x16, 3 stages",
    93: "cand 3: simt_fast w/ __syncthreads",
}
DEFAULT_STEPS = [1, 20, 2, 3, 4, 5, 6, 7, 8, 9, 91, 92, 93]
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
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"],
                                       stderr=subprocess.DEVNULL,
                                       cwd=os.path.dirname(os.path.abspath(__file__))
                                       ).decode().strip()
    except Exception:
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
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    steps = [int(s) for s in args.steps.split(",") if s]
    dev = torch.cuda.get_device_name()
    cases = []
    for (m, n, k) in parse_sizes(args.sizes):
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

    date = datetime.date.today().isoformat()
    commit = git_commit()
    gpu_slug = re.sub(r"[^A-Za-z0-9]+", "-", dev).strip("-").lower()
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"ladder-{gpu_slug}-{date}-{commit}")
    result = {"benchmark": "ladder", "gpu": dev, "torch": torch.__version__,
              "cuda": torch.version.cuda, "commit": commit, "date": date,
              "timing": "triton.testing.do_bench median (warmup=25, rep=150; steps 1-4: 10/40); "
                        "paired: PERF.md protocol", "cases": cases}
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=2)
    print(f"\nwrote {stem}.json")

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
