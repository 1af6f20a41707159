"""Which kernels cuBLAS runs (and for how long) next to ours, shape by shape.

    python benchmarks/research/cublas_kernels.py [--dtype bf16] [--out DIR] MxNxK[:LAYOUT] ...

For each case: torch.matmul's kernels under torch.profiler (names, grid,
block, CUDA time of one call after warm-up) and our dispatch's kernel name.
Names tell the tile, the cluster and whether cuBLAS splits K or runs a
stream-K schedule, which is what the wave-quantization choices are measured
against.  Writes cublas-kernels-<gpu>-<commit>.json when --out is given.
"""
import argparse
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tiled_gemm  # noqa: F401
from torch_tiled_gemm.bench import _slug, env_info, operands

ITERS = 3
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}


def kernels_of(fn, iters=ITERS):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], record_shapes=False) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        r = rows.setdefault(e.name, {"name": e.name, "calls": 0, "us": 0.0})
        r["calls"] += 1
        r["us"] += e.time_range.elapsed_us()
    for r in rows.values():
        r["us"] /= iters
    return sorted(rows.values(), key=lambda r: -r["us"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cases", nargs="+")
    p.add_argument("--dtype", default="bf16", choices=sorted(DT))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
    out = []
    for c in a.cases:
        shape, _, layout = c.partition(":")
        M, N, K = (int(v) for v in shape.split("x"))
        layout = layout or "NN"
        x, w = operands(M, N, K, DT[a.dtype], layout, "cuda")
        theirs = kernels_of(lambda: torch.matmul(x, w))
        ours = kernels_of(lambda: torch.ops.tiled.gemm(x, w))
        name = torch.ops.tiled.gemm_kernel_name(x, w)
        print(f"{M}x{N}x{K} {layout} {a.dtype}: ours {name} "
              f"{sum(r['us'] for r in ours):.1f} us")
        for r in theirs:
            print(f"    cuBLAS {r['us']:8.1f} us  x{r['calls'] // ITERS}  {r['name'][:150]}")
        out.append({"M": M, "N": N, "K": K, "layout": layout, "dtype": a.dtype,
                    "ours": name, "ours_kernels": ours, "cublas_kernels": theirs})
    if a.out:
        env = env_info("cuda")
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, f"cublas-kernels-{_slug(env['gpu'])}-{env['commit']}-{a.dtype}.json")
        with open(path, "w") as f:
            json.dump({"env": env, "cases": out}, f, indent=1)
        print("wrote", path)


if __name__ == "__main__":
    main()
