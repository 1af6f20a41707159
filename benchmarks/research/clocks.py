"""SM clock, power and temperature while ours or cuBLAS runs, in alternating
segments of one process (sampled by nvidia-smi in the background).

    python benchmarks/research/clocks.py --cases 4096x4096x4096 8192x8192x8192 [--dtype bf16] [--secs 2] [--out DIR] \
        [--variants "ours:-" "c1:128x256"]

Each case runs ours (each variant: its configuration forced by name for
its segments, as in explore.py; "c1:128x256" the 128x256 tiles without the
2-CTA cluster) and torch.matmul in turn, 3 segments each of --secs
seconds, in two modes: "flushed" (every call after the 256 MB L2 flush that
do_bench uses, the kernel timed by CUDA events: the benchmark's protocol) and
"back-to-back" (no flush, the GPU as busy as it gets).  A sample of
nvidia-smi belongs to a segment when its timestamp falls inside it; the
first 20% of a segment is left out (clocks settle).  So two kernels of the
same work can be told apart by cycles (same clock, different time) or by
power (one runs at a lower clock; back to back, power x time is the energy
of one call).  Writes clocks-<gpu>-<date>-<commit>-<dtype>.json.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from torch_tiled_gemm.bench import DTYPES as DT, _slug, env_info, operands
from torch_tiled_gemm.tune import config_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # benchmarks/explore.py
from explore import parse_variant  # noqa: E402

FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu"


def run_segment(fn, secs, flush):
    """Calls fn for `secs` seconds; returns (t0, t1, median kernel ms)."""
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda") if flush else None
    times = []
    torch.cuda.synchronize()
    t0 = time.time()
    while time.time() - t0 < secs:
        if flush:
            for _ in range(10):
                cache.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                times.append((s, e, 1))
        else:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                fn()
            e.record()
            times.append((s, e, 20))
        torch.cuda.synchronize()
    t1 = time.time()
    ms = [s.elapsed_time(e) / calls for s, e, calls in times]
    return t0, t1, statistics.median(ms)


def parse_samples(path):
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((ts, float(parts[1]), float(parts[2]), float(parts[3])))
        except ValueError:
            continue
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--dtype", default="bf16", choices=sorted(DT))
    p.add_argument("--secs", type=float, default=2.0)
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--variants", nargs="+", default=["ours:-"])
    a = p.parse_args()
    variants = dict(parse_variant(v) for v in a.variants)
    who_all = list(variants) + ["cublas"]
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
    info = env_info("cuda")
    log = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=open(log, "w"), stderr=subprocess.DEVNULL)
    segments = []
    try:
        for cs in a.cases:
            M, N, K = (int(v) for v in cs.split("x"))
            x, w = operands(M, N, K, DT[a.dtype], "NN", "cuda")
            ours = lambda: torch.ops.tiled.gemm(x, w)  # noqa: E731
            for mode in ("flushed", "back-to-back"):
                for r in range(3):
                    for who in (who_all if r % 2 == 0 else who_all[::-1]):
                        with config_env(variants.get(who, "-")):
                            fn = (lambda: torch.matmul(x, w)) if who == "cublas" else ours
                            t0, t1, ms = run_segment(fn, a.secs, mode == "flushed")
                            kernel = "torch.matmul" if who == "cublas" else torch.ops.tiled.gemm_kernel_name(x, w)
                        segments.append({"case": cs, "mode": mode, "who": who, "kernel": kernel, "t0": t0, "t1": t1,
                                         "kernel_ms": ms})
    finally:
        time.sleep(0.2)
        smi.terminate()
        smi.wait()
    samples = parse_samples(log)
    rows = []
    for seg in segments:
        lo = seg["t0"] + 0.2 * (seg["t1"] - seg["t0"])
        mine = [s for s in samples if lo <= s[0] <= seg["t1"]]
        seg["samples"] = len(mine)
        for i, key in ((1, "sm_mhz"), (2, "power_w"), (3, "temp_c")):
            seg[key] = statistics.mean(s[i] for s in mine) if mine else None
    for cs in a.cases:
        for mode in ("flushed", "back-to-back"):
            summary = {"case": cs, "mode": mode}
            for who in who_all:
                segs = [s for s in segments if s["case"] == cs and s["mode"] == mode and s["who"] == who]
                for key in ("kernel_ms", "sm_mhz", "power_w", "temp_c"):
                    vals = [s[key] for s in segs if s[key] is not None]
                    summary[f"{who}_{key}"] = statistics.median(vals) if vals else None
            rows.append(summary)
            fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
            print(f"{cs:18s} {mode:12s}\n  "
                  + "\n  ".join(f"{who:8s} {fmt(summary[who + '_kernel_ms'] * 1e3, '8.1f')} us {fmt(summary[who + '_sm_mhz'], '6.0f')} MHz "
                              f"{fmt(summary[who + '_power_w'], '5.0f')} W {fmt(summary[who + '_temp_c'], '3.0f')} C"
                              + (f"  {summary[who + '_power_w'] * summary[who + '_kernel_ms']:6.1f} mJ per call"
                                 if mode == "back-to-back" and summary[who + "_power_w"] else "")
                              for who in who_all), flush=True)
    os.makedirs(a.out, exist_ok=True)
    name = f"clocks-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}-{a.dtype}.json"
    with open(os.path.join(a.out, name), "w") as f:
        json.dump({**info, "dtype": a.dtype, "secs": a.secs, "rows": rows, "segments": segments}, f, indent=1)
    os.unlink(log)


if __name__ == "__main__":
    main()
