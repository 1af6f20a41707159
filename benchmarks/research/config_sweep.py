"""Several configurations forced by name against the rules' choice and
torch.matmul, shape by shape: where does a family of tiles win, before a
rule is written for it?

    python benchmarks/research/config_sweep.py --shapes 48x512x1024:TN,1024x64x2048:NN \
        --configs 64x32,64x48,64x64,64x32sw,64x64sw [--dtype bf16] [--rounds 3] [--out FILE.json]

For each shape (MxNxK or BxMxNxK, ":LAYOUT", NN by default): the rules'
kernel, then each configuration forced through TILED_CONFIG as
sm90_<dtype>_<config>_<layout>, or <family>_<dtype>_<config>_<layout> for a
configuration written "family:config" (e.g. sm80:128x128x32s3), or the
bare name for one written "any:config" (e.g. any:32x128sk4, a skinny
variant in whichever orientation the shape runs) (those that cannot run the
shape are left out: forcing them picks another kernel), all timed with torch.matmul in
interleaved rounds of do_bench medians (L2 flushed, the order reversed
every other round), each output checked against torch's.  Run it with
TILED_DISABLE_KERNELS=table to see the rules rather than the shipped table.
"""
import argparse
import json

import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from torch_tiled_gemm import bench, tune


# The dtype as kernel names spell it (sm90_f16_128x128_nn, skinny_tf32_...).
KERNEL_TAG = {"bf16": "bf16", "fp16": "f16", "tf32": "tf32"}


def parse_shape(text):
    dims, _, layout = text.partition(":")
    sizes = [int(v) for v in dims.split("x")]
    batch, (M, N, K) = (sizes[0], sizes[1:]) if len(sizes) == 4 else (None, sizes)
    return M, N, K, batch, (layout or "NN").upper()


def sweep_one(M, N, K, batch, layout, dname, configs, rounds):
    dt = bench.DTYPES[dname]
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    a, b = bench.operands(M, N, K, dt, layout, "cuda", batch)
    names = {"rules": "-"}
    for c in configs:
        family, _, tile = c.rpartition(":")
        n = tile if family == "any" else f"{family or 'sm90'}_{KERNEL_TAG[dname]}_{tile}_{layout.lower()}"
        with tune.config_env(n):
            got = torch.ops.tiled.gemm_kernel_name(a, b)
            if got == n or (family == "any" and f"_{tile}_" in got):
                names[c] = n
    ref = torch.matmul(a, b).double()
    err = {}
    for k, n in names.items():
        with tune.config_env(n):
            err[k] = ((torch.ops.tiled.gemm(a, b).double() - ref).norm() / ref.norm()).item()
    keys = list(names) + ["torch"]
    runs = {k: [] for k in keys}
    for r in range(rounds):
        for k in (keys if r % 2 == 0 else keys[::-1]):
            if k == "torch":
                runs[k].append(bench.time_ms(lambda: torch.matmul(a, b), "cuda"))
            else:
                with tune.config_env(names[k]):
                    runs[k].append(bench.time_ms(lambda: torch.ops.tiled.gemm(a, b), "cuda"))
    med = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    return dict(M=M, N=N, K=K, batch=batch, layout=layout, dtype=dname, rules_kernel=torch.ops.tiled.gemm_kernel_name(a, b),
                ms=med, ratio={k: med["torch"] / v for k, v in med.items() if k != "torch"}, rel_err_vs_torch=err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--configs", required=True, help="comma list of tile names, e.g. 64x32,64x64sw,sm80:128x128x32s3")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "tf32"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    out = []
    for s in args.shapes.split(","):
        rec = sweep_one(*parse_shape(s), args.dtype, configs, args.rounds)
        out.append(rec)
        best = max(rec["ratio"], key=rec["ratio"].get)
        print(f"{rec['layout']} {s.split(':')[0]} rules {rec['rules_kernel']:30s} {rec['ratio']['rules']:.3f}  " +
              " ".join(f"{k} {v:.3f}" for k, v in rec["ratio"].items() if k != "rules") + f"  best {best}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
