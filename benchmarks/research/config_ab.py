"""A dispatch change against the kernels it replaced, in one build: for each
case of a JSON list ({"id", "M", "N", "K", "batch", "layout", "old"}: the
old choice's kernel name, bf16), the default choice, the old one forced by
name (TILED_CONFIG) and torch.matmul, in interleaved rounds of do_bench
medians (L2 flushed), in bf16 and fp16, each output checked against float64.

    python benchmarks/research/config_ab.py CASES.json OUT.json [--dtypes bf16,fp16] [--rounds 5]

Used for the mid-size one-slab rule (docs/hopper.md, round 25): the cases
were the corpus GEMMs whose kernel name changed between the host drivers
(tests/host/dispatch_choice.cpp) of the two source trees."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import torch  # noqa: E402

from torch_tiled_gemm import bench, tune  # noqa: E402

def main(cases_path, out_path, dtypes=("bf16", "fp16"), rounds=5):
    cases = json.load(open(cases_path))
    out = []
    for dname in dtypes:
        dt = bench.DTYPES[dname]
        for c in cases:
            a, b = bench.operands(c["M"], c["N"], c["K"], dt, c["layout"], "cuda", c["batch"])
            old = c["old"].replace("_bf16_", "_f16_") if dname == "fp16" else c["old"]
            new_name = torch.ops.tiled.gemm_kernel_name(a, b)
            with tune.config_env(old):
                old_name = torch.ops.tiled.gemm_kernel_name(a, b)
            ref = torch.matmul(a.double(), b.double())
            err = bench.rel_err(torch.ops.tiled.gemm(a, b), ref)
            torch_err = bench.rel_err(torch.matmul(a, b), ref)
            ms = {"new": [], "old": [], "torch": []}
            for r in range(rounds):
                for k in (["new", "old", "torch"] * 2)[r % 3: r % 3 + 3]:
                    if k == "torch":
                        ms[k].append(bench.time_ms(lambda: torch.matmul(a, b), "cuda"))
                    else:
                        with tune.config_env(old if k == "old" else "-"):
                            ms[k].append(bench.time_ms(lambda: torch.ops.tiled.gemm(a, b), "cuda"))
            med = {k: sorted(v)[len(v) // 2] for k, v in ms.items()}
            rec = dict(c, dtype=dname, new_kernel=new_name, old_kernel=old_name, ms=med, rel_err=err,
                       torch_rel_err=torch_err, ratio_new=med["torch"] / med["new"], ratio_old=med["torch"] / med["old"])
            out.append(rec)
            print(f"{dname} {c['id']:22s} {old_name:28s} -> {new_name:28s} ratio {rec['ratio_old']:.3f} -> "
                  f"{rec['ratio_new']:.3f}  err {err:.1e} (torch {torch_err:.1e})", flush=True)
    json.dump(out, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases")
    ap.add_argument("out")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    main(args.cases, args.out, args.dtypes.split(","), args.rounds)
