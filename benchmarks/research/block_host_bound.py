"""Is an eager MLP block's training step bound by the host?

    python benchmarks/research/block_host_bound.py [--block vit-b|llama-7b] [--steps 20]

The block as benchmarks/mlp_bench.py builds it (fused + swapped, against
the unfused torch block), forward + backward on bf16: do_bench's time
(what mlp_bench reports), the time of back-to-back steps between CUDA
events, and the host's time to enqueue them.  Where the enqueue time
reaches the back-to-back time, the GPU waits for the host, and a faster
kernel shows no gain in eager mode.
"""
import argparse
import os
import sys
import time

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mlp_bench  # noqa: E402

BLOCKS = {"vit-b": (mlp_bench.Mlp, 12608, 768, 3072), "llama-7b": (mlp_bench.LlamaMLP, 4096, 4096, 11008)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", default="vit-b", choices=sorted(BLOCKS))
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    cls, tokens, d, h = BLOCKS[args.block]
    dt = torch.bfloat16
    ref = cls(d, h).to("cuda", dt)
    ours = mlp_bench.fused_copy(ref)
    x = torch.randn(tokens, d, device="cuda", dtype=dt, requires_grad=True)
    g = torch.randn(tokens, d, device="cuda", dtype=dt)
    for name, mod in (("ours", ours), ("torch", ref)):
        def step(mod=mod):
            mod(x).backward(g)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        flushed = [do_bench(step, warmup=5, rep=25, return_mode="median") for _ in range(3)]
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        t1 = time.perf_counter()
        e1.record()
        torch.cuda.synchronize()
        print(f"{args.block} {name:6s} do_bench {' '.join(f'{v:.3f}' for v in flushed)} ms  back-to-back "
              f"{e0.elapsed_time(e1) / args.steps:.3f} ms  host enqueue {(t1 - t0) / args.steps * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
