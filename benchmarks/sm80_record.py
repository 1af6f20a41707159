"""The sm80 (mma.sync) family's record on a Hopper GPU with the Hopper
family off: its TFLOP/s as a fraction of the measured mma.sync peak, on the
named shapes and on the corpus's GEMMs of at least 2 GFLOP.

    python benchmarks/sm80_record.py --out DIR [--dtype bf16,tf32] [--rounds 3]
        [--time-budget S] [--peak-json FILE]

Builds and runs benchmarks/research/micro/mma_sync_peak.cu (nvcc) unless
--peak-json gives its output.  Every GEMM runs through
torch_tiled_gemm.corpus_bench.run_case (the benchmark's paired protocol
against torch.matmul, both outputs checked against float64), here with
TILED_DISABLE_KERNELS=hopper set before the extension loads, so dispatch
takes the sm80 family wherever it takes a problem at all (M, N > 64: the
skinny kernel keeps the rest).  The corpus GEMMs run in corpus_bench's
hash order, so a run cut by --time-budget (per dtype) is a sample.

Writes DIR/sm80-<gpu>-<date>-<commit>.json: the benchmark's header, the
peak as "mma_sync_peak_tflops" ({dtype: TFLOP/s}), cases with "op":
"gemm_sm80" and "peak_fraction", and "summary": per dtype the named
shapes' fractions and the corpus geomean fraction (sm80 cases only).
Exit status 1 when a check fails.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

os.environ["TILED_DISABLE_KERNELS"] = "hopper"  # read once, when the extension loads

import torch  # noqa: E402

from torch_tiled_gemm import bench, corpus_bench  # noqa: E402
from torch_tiled_gemm.corpus import corpus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NAMED = "4096x4096x4096,4096x4096x4096:NT,4096x4096x4096:TN,4096x4096x4096:TT,8192x4096x4096,4096x14336x4096"
MIN_GFLOP = 2.0
PEAK_KEY = {"bf16": "bf16", "fp16": "f16", "tf32": "tf32"}


def measure_peak():
    src = os.path.join(HERE, "research", "micro", "mma_sync_peak.cu")
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "peak")
        subprocess.check_call(["nvcc", "-O3", "-std=c++17", "-arch=native", src, "-o", exe])
        return json.loads(subprocess.check_output([exe], text=True))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", default="bf16,tf32")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--time-budget", type=float, default=0.0, help="seconds per dtype for the corpus part (0: all)")
    p.add_argument("--peak-json", default=None)
    args = p.parse_args()
    peak = json.load(open(args.peak_json)) if args.peak_json else measure_peak()
    peaks = peak["mma_sync_peak_tflops"]
    info = bench.env_info("cuda")
    info["what"] = ("the sm80 (mma.sync) family on a Hopper GPU with the Hopper family off "
                    "(TILED_DISABLE_KERNELS=hopper): benchmarks/sm80_record.py; peak_fraction = our TFLOP/s / "
                    "the measured mma.sync peak of its dtype (benchmarks/research/micro/mma_sync_peak.cu)")
    info["protocol"] = corpus_bench.protocol("cuda", args.rounds)
    info["mma_sync_peak_tflops"] = peaks
    info["mma_sync_low_toggle_burst_tflops"] = peak.get("low_toggle_burst_tflops")
    named = corpus_bench.parse_shapes(NAMED)
    big = corpus_bench._order(corpus("all", MIN_GFLOP, None, None))
    cases, summary = [], {}
    for dname in args.dtype.split(","):
        pk = peaks[PEAK_KEY[dname]]
        t0 = time.time()
        for i, e in enumerate(named + big):
            if i >= len(named) and args.time_budget and time.time() - t0 > args.time_budget:
                break
            c = corpus_bench.run_case(e, dname, "cuda", args.rounds)
            c["op"] = "gemm_sm80"
            c["named"] = i < len(named)
            c["peak_fraction"] = c["ours_tflops"] / pk
            cases.append(c)
            torch.cuda.empty_cache()
            print(f"{dname} {e['id']:<40} {c['kernel']:<28} {c['ours_tflops']:7.1f} TFLOP/s "
                  f"{c['peak_fraction']:.3f} of peak  {c['check']}", flush=True)
        mine = [c for c in cases if c["dtype"] == dname and c["kernel"].startswith("sm80_")]
        corp = [c["peak_fraction"] for c in mine if not c["named"]]
        summary[dname] = {
            "named": {c["id"]: round(c["peak_fraction"], 4) for c in mine if c["named"]},
            "corpus_cases": len(corp), "corpus_planned": len(big),
            "corpus_geomean_fraction": geomean(corp),
            "corpus_other_kernels": sum(1 for c in cases if c["dtype"] == dname and not c["named"]
                                        and not c["kernel"].startswith("sm80_")),
        }
        print(dname, json.dumps(summary[dname]), flush=True)
    info["cases"], info["summary"] = cases, summary
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"sm80-{bench._slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}.json")
    with open(path, "w") as f:
        json.dump(info, f, indent=1)
    print("wrote", path)
    failed = [c for c in cases if c["check"] != "ok"]
    for c in failed:
        print(f"FAIL {c['dtype']} {c['id']} {c['kernel']}: " + "; ".join(c["check_failures"]), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
