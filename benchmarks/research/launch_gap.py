"""Is a GEMM's gap to torch.matmul in the kernel or around it?

    python benchmarks/research/launch_gap.py [--shapes 788x1024x3072:NN,...] [--dtype bf16] [--out FILE]

For each shape, ours (torch.ops.tiled.gemm, the kernel dispatch chooses) and
torch.matmul, two interleaved rounds of three timings:
  * bench:      triton's do_bench with its L2 flush (the benchmark's protocol);
  * graphflush: a CUDA graph of 20 (L2 flush, GEMM) pairs, less a graph of
                the 20 flushes alone: no host in the way, per GEMM;
  * chain:      a CUDA graph of 40 GEMMs back to back (L2 warm), per GEMM.
If the ratio holds in the graphs, the host and the launch are not the gap;
`ncu --metrics gpu__time_duration.sum` on the same shapes then says how much
of it is the kernel's own duration (docs/dispatch.md, "Small and mid-size GEMMs").
"""
import argparse
import json

import torch

import torch_tiled_gemm  # noqa: F401
from torch_tiled_gemm.bench import operands
from torch_tiled_gemm.corpus_bench import parse_shapes

DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
DEFAULT = "788x1024x3072:NN,1000x1000x1000:NN,308x2304x768:NT,2304x768x308:TN,384x1536x1576:TN,2048x1024x1024:NT"


def _graph(body):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            body()
    torch.cuda.current_stream().wait_stream(s)
    return g


def _replay_us(g, reps=20):
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000)
    return sorted(ts)[len(ts) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default=DEFAULT)
    p.add_argument("--dtype", default="bf16", choices=sorted(DT))
    p.add_argument("--out")
    a = p.parse_args()
    from triton.testing import do_bench

    cache = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    n_flush, n_chain = 20, 40
    flushes = _replay_us(_graph(lambda: [cache.zero_() for _ in range(n_flush)]))
    rows = []
    for e in parse_shapes(a.shapes):
        x, w = operands(e["M"], e["N"], e["K"], DT[a.dtype], e["layout"], "cuda", batch=e.get("batch"))
        sides = {"ours": lambda: torch.ops.tiled.gemm(x, w), "torch": lambda: torch.matmul(x, w)}
        row = {"shape": f"{e['M']}x{e['N']}x{e['K']}:{e['layout']}", "kernel": torch.ops.tiled.gemm_kernel_name(x, w)}
        for _ in range(2):
            for side, fn in sides.items():
                pairs = _graph(lambda: [(cache.zero_(), fn()) for _ in range(n_flush)])
                chain = _graph(lambda: [fn() for _ in range(n_chain)])
                row.setdefault(side + "_bench", []).append(do_bench(fn, warmup=5, rep=25, return_mode="median") * 1000)
                row.setdefault(side + "_graphflush", []).append((_replay_us(pairs) - flushes) / n_flush)
                row.setdefault(side + "_chain", []).append(_replay_us(chain) / n_chain)
        mean = {k: sum(v) / len(v) for k, v in row.items() if isinstance(v, list)}
        print(f"{row['shape']:22s} {row['kernel']:28s} " + "  ".join(
            f"{m} {mean['ours_' + m]:7.2f} / {mean['torch_' + m]:7.2f} us ({mean['torch_' + m] / mean['ours_' + m]:.2f})"
            for m in ("bench", "graphflush", "chain")), flush=True)
        rows.append(row)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
