"""Configuration A/B on a few shapes, in one process, paired against torch.matmul.

    python benchmarks/explore.py --cases 4096x4096x4096 128x4096x4096:NT 8x16x4096x4096 \
        --variants "base:-" "coop:128x256" [--dtype bf16] [--out DIR]

For each case, every variant is timed with the paired, interleaved protocol
of the main benchmark (6 rounds, do_bench medians, L2 flushed, alternating
order); a configuration forced by name (TILED_CONFIG) is read on every call,
so the variants run side by side in one process (same clocks, same inputs).
A variant is "tag:NAME[,NAME]" (configuration names as ttg.kernel_name
reports them or their variants, docs/dispatch.md; "-" for the rules' choice).  Prints one row per
(case, variant) and writes explore-<gpu>-<date>-<commit>-<dtype><tag>.json.
"""
import argparse
import json
import os

import torch

from torch_tiled_gemm.bench import DTYPES as DT, _slug, env_info, operands, paired, rel_err
from torch_tiled_gemm.tune import config_env


def parse_case(s):
    """"MxNxK[:LAYOUT]", or "BxMxNxK[:LAYOUT]" for B batched products."""
    shape, _, layout = s.partition(":")
    dims = [int(v) for v in shape.split("x")]
    batch = dims.pop(0) if len(dims) == 4 else None
    M, N, K = dims
    return M, N, K, (layout or "NN").upper(), batch


def parse_variant(s):
    tag, _, config = s.partition(":")
    return tag, config or "-"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--variants", nargs="+", default=["base:-"])
    p.add_argument("--dtype", default="bf16", choices=sorted(DT))
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--tag", default="")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
    dt = DT[a.dtype]
    info = env_info("cuda")
    rows = []
    for cs in a.cases:
        M, N, K, layout, batch = parse_case(cs)
        x, w = operands(M, N, K, dt, layout, "cuda", batch)
        ref = torch.matmul(x.double(), w.double())
        for vs in a.variants:
            tag, envs = parse_variant(vs)
            with config_env(envs):
                out = torch.ops.tiled.gemm(x, w)
                err = rel_err(out, ref)
                t_ours, t_torch, ratio = paired(lambda: torch.ops.tiled.gemm(x, w), lambda: torch.matmul(x, w), "cuda")
                kernel = torch.ops.tiled.gemm_kernel_name(x, w)
            r = {"M": M, "N": N, "K": K, "batch": batch, "layout": layout, "dtype": a.dtype, "variant": tag, "env": envs,
                 "kernel": kernel, "ours_us": t_ours * 1e3, "torch_us": t_torch * 1e3, "ratio": ratio, "rel_err": err}
            rows.append(r)
            print(f"{(str(batch) + 'x') if batch else ''}{M}x{N}x{K} {layout} {tag:12s} ours {t_ours * 1e3:8.1f} us  torch {t_torch * 1e3:8.1f} us  "
                  f"ratio {ratio:5.3f}  err {err:.1e}  {kernel}", flush=True)
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"explore-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}-{a.dtype}{a.tag}")
    with open(base + ".json", "w") as f:
        json.dump({**info, "dtype": a.dtype, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
