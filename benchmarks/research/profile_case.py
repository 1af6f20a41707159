"""One GEMM case, for profilers and for the memory floor of skinny shapes.

    python benchmarks/research/profile_case.py M N K [--layout NT] [--dtype bf16] [--op ours|torch] [--iters 10]
    python benchmarks/research/profile_case.py M N K --times   # do_bench with and without the L2 flush

--times prints, for ours and torch.matmul, do_bench medians with triton's
L2 flush (the benchmark protocol) and without it, and the same for a pure
read of B (a float32 sum) as the memory floor: the flush leaves L2 full of
dirty lines, so a kernel that streams B also pays for their write-back.
Run under ncu with --op to profile one side:
    ncu -k regex:skinny --launch-skip 3 --launch-count 1 python benchmarks/research/profile_case.py 16 4096 4096
"""
import argparse
import os

import torch

import torch_tiled_gemm  # noqa: F401
from torch_tiled_gemm.bench import operands

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("M", type=int)
    p.add_argument("N", type=int)
    p.add_argument("K", type=int)
    p.add_argument("--layout", default="NT")
    # defaults from PROFILE_DTYPE / PROFILE_OP, so a profiler run can set them through the environment
    p.add_argument("--dtype", default=os.environ.get("PROFILE_DTYPE", "bf16"), choices=sorted(DT))
    p.add_argument("--op", default=os.environ.get("PROFILE_OP", "ours"), choices=["ours", "torch"])
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--times", action="store_true")
    a = p.parse_args()
    dt = DT[a.dtype]
    x, w = operands(a.M, a.N, a.K, dt, a.layout, "cuda")
    ours = lambda: torch.ops.tiled.gemm(x, w)  # noqa: E731
    ref = lambda: torch.matmul(x, w)  # noqa: E731
    if not a.times:
        fn = ours if a.op == "ours" else ref
        for _ in range(a.iters):
            fn()
        torch.cuda.synchronize()
        return
    from triton.testing import do_bench

    floor = lambda: w.sum(dtype=torch.float32)  # noqa: E731
    mb = w.numel() * w.element_size() / 2**20
    print(f"{a.M}x{a.N}x{a.K} {a.layout} {a.dtype}  B = {mb:.1f} MiB  kernel {torch.ops.tiled.gemm_kernel_name(x, w)}")
    for name, fn in [("ours", ours), ("torch", ref), ("read B (sum)", floor)]:
        t_flush = do_bench(fn, warmup=25, rep=100, return_mode="median")
        # triton's do_bench always flushes; time back-to-back launches for the unflushed number
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(200):
            fn()
        end.record()
        torch.cuda.synchronize()
        t_loop = start.elapsed_time(end) / 200
        print(f"  {name:14s} flushed {t_flush * 1e3:7.1f} us ({mb / 1024 / (t_flush * 1e-3):5.0f} GiB/s of B)"
              f"   back-to-back {t_loop * 1e3:7.1f} us")


if __name__ == "__main__":
    main()
