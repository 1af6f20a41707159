"""Per-CTA timeline (globaltimer) of the 16-bit NN 128x256 kernels under
TILED_SM90_TIMELINE=1 (diagnostic instantiations that printf one line per
consumer warpgroup).  Runs each case after the benchmark's 256 MB L2 flush
(or warm: right after a run of the same GEMM) and prints the lines; parse
with --parse LOG."""
import ctypes
import os
import statistics
import sys

import torch


def run(cases):
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    for spec in cases:
        shape, cluster, mode = spec.split(":")
        M, N, K = (int(v) for v in shape.split("x"))
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        os.environ["TILED_SM90_CLUSTER"] = cluster
        for _ in range(3):
            torch.ops.tiled.gemm(a, b)
        torch.cuda.synchronize()
        for rep in range(4):
            if mode == "flushed":
                cache.zero_()
            else:
                torch.ops.tiled.gemm(a, b)
            torch.cuda.synchronize()
            ctypes.CDLL(None).fflush(None)
            print(f"CASE {spec} {rep} {torch.ops.tiled.gemm_kernel_name(a, b)}", flush=True)
            os.environ["TILED_SM90_TIMELINE"] = "1"
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.ops.tiled.gemm(a, b)
            e.record()
            torch.cuda.synchronize()
            ctypes.CDLL(None).fflush(None)  # the device printf lines before the next Python line
            os.environ["TILED_SM90_TIMELINE"] = "0"
            print(f"EVENT {s.elapsed_time(e) * 1e3:.1f}", flush=True)


def parse(path):
    case, rows, ev = None, [], None

    def emit():
        if not rows:
            return
        t0 = min(r[3] for r in rows)
        q = lambda xs: f"{min(xs):6.2f} {statistics.median(xs):6.2f} {max(xs):6.2f}"  # noqa: E731
        us = lambda i, j: [(r[j] - r[i]) / 1e3 for r in rows]  # noqa: E731
        start = [(r[3] - t0) / 1e3 for r in rows]
        print(f"{case}  event {ev} us  CTAs {len(rows)}  span {(max(r[7] for r in rows) - t0) / 1e3:.2f} us")
        print(f"   entry after first          {q(start)}")
        print(f"   entry -> first stage full  {q(us(3, 4))}")
        print(f"   mainloop (full -> done)    {q(us(4, 5))}")
        print(f"   epilogue (issue)           {q(us(5, 6))}")
        print(f"   stores drain               {q(us(6, 7))}")
        print(f"   end (after first entry)    {q([(r[7] - t0) / 1e3 for r in rows])}")

    for line in open(path):
        p = line.split()
        if not p:
            continue
        if p[0] == "CASE":
            emit()
            case, rows, ev = " ".join(p[1:]), [], None
        elif p[0] == "EVENT":
            ev = p[1]
        elif p[0] == "TL":
            r = [int(v) for v in p[1:]]
            if r[1] == 0:  # consumer warpgroup 0
                rows.append(r)
    emit()


if __name__ == "__main__":
    if sys.argv[1] == "--parse":
        parse(sys.argv[2])
    else:
        run(sys.argv[1:])
