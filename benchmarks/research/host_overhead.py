"""Host time per call: what a decode step without CUDA graphs pays to launch.

    python benchmarks/research/host_overhead.py [--out DIR] [--calls 2000]

For problems whose GPU time is a few microseconds, a loop of calls is bound
by the host: wall time / calls is the cost of one call (checks, dispatch,
allocation of the output, the launch).  Rows, each the median of 7 rounds in
alternating order:
  torch.matmul, torch.ops.tiled.gemm, torch.ops.tiled.gemm_kernel_name (the
  same checks and dispatch decision without the output or the launch),
  torch.empty of the output (the allocator alone), TiledLinear / nn.Linear;
and the same again with 200 extra environment variables: the dispatch reads
its TILED_* switches from the environment on every call, so a cost that grows
with the environment shows up there.  Writes host-<gpu>-<date>-<commit>.json.
"""
import argparse
import json
import os
import statistics

import torch

import torch_tiled_gemm  # noqa: F401  (loads the ops)
from torch_tiled_gemm.bench import _slug, env_info, host_us_per_call
from torch_tiled_gemm.nn import TiledLinear


def gpu_us(fn, calls=200):
    """Per call, the time between CUDA events recorded around `calls` calls
    (rows' "gpu_us").  The GPU runs each kernel in a few microseconds and then
    waits for the next launch, so for a host-bound loop this equals the host
    time; it would exceed it only if the kernels were the bottleneck."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def measure(fns, calls, rounds=7):
    times = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            times[k].append(host_us_per_call(fns[k], "cuda", calls))
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--calls", type=int, default=2000)
    a = p.parse_args()
    info = env_info("cuda")
    rows = []
    for M, N, K in [(1, 64, 64), (16, 256, 256)]:
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        lin = torch.nn.Linear(K, N, device="cuda", dtype=torch.bfloat16)
        tlin = TiledLinear.from_linear(lin)
        fns = {
            "torch.matmul": lambda: torch.matmul(x, w),
            "tiled.gemm": lambda: torch.ops.tiled.gemm(x, w),
            "tiled.gemm_kernel_name": lambda: torch.ops.tiled.gemm_kernel_name(x, w),
            "torch.empty": lambda: torch.empty(M, N, device="cuda", dtype=torch.bfloat16),
            "nn.Linear": lambda: lin(x),
            "TiledLinear": lambda: tlin(x),
        }
        with torch.no_grad():
            for env in ("as is", "+200 variables"):
                added = []
                if env != "as is":
                    for i in range(200):
                        k = f"HOST_OVERHEAD_PAD_{i}"
                        os.environ[k] = "x" * 24
                        added.append(k)
                try:
                    t = measure(fns, a.calls)
                finally:
                    for k in added:
                        del os.environ[k]
                g = {k: gpu_us(fns[k]) for k in ("torch.matmul", "tiled.gemm")}
                row = {"M": M, "N": N, "K": K, "dtype": "bf16", "environment": env, "env_vars": len(os.environ) + len(added),
                       "host_us": t, "gpu_us": g, "kernel": torch.ops.tiled.gemm_kernel_name(x, w)}
                rows.append(row)
                print(f"{M}x{N}x{K} bf16, environment {env} ({row['env_vars']} variables), "
                      f"kernel {row['kernel']}; event-timed us/call: ours {g['tiled.gemm']:.2f}, torch {g['torch.matmul']:.2f}")
                for k, v in t.items():
                    print(f"  {k:24s} {v:7.2f} us/call")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"host-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}.json")
    with open(path, "w") as f:
        json.dump({**info, "calls": a.calls, "rows": rows}, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
