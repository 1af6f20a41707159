"""Does an operand's row stride (its bytes mod 32 / 64 / 128) or base
pointer decide how fast the sm90 kernels read it?  NT problems C = A @ B^T,
A [M, K] and B [N, K] row-major with row strides lda / ldb >= K (views of
wider buffers, so K and the strides move apart), each timed against
torch.matmul in interleaved rounds of do_bench medians (L2 flushed), the
output checked against float64.

    python benchmarks/research/stride_probe.py [--out FILE.json] [--rounds 3]
        [--cases 3072x3072x3000:3008:3000,...]    # MxNxK[:lda[:ldb]]

Run it with TILED_DISABLE_KERNELS=table to see the rules' kernels.  The
default cases are those of docs/dispatch.md, "Rows 16 bytes off a 32-byte
boundary": K around 3000 in steps of 8, K = 3000 from padded rows, 2048^2
at K around 1000 ... 5000."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import torch  # noqa: E402

from torch_tiled_gemm import bench  # noqa: E402

DEFAULT = ([f"3072x3072x{k}" for k in range(2984, 3072, 8)]
           + [f"3072x3072x3000:{a}:{b}" for a, b in ((3008, 3000), (3000, 3008), (3008, 3008), (3016, 3016),
                                                     (3040, 3040), (3072, 3072))]
           + [f"2048x2048x{k}" for k in (1000, 1008, 1016, 1024, 2000, 2008, 2040, 2048, 4008, 4096, 5000, 5008)])


def run(M, N, K, lda, ldb, rounds):
    a = torch.randn(M, lda, device="cuda", dtype=torch.bfloat16)[:, :K]
    b = torch.randn(N, ldb, device="cuda", dtype=torch.bfloat16)[:, :K].t()
    ref = a.double() @ b.double()
    err = bench.rel_err(torch.ops.tiled.gemm(a, b), ref)
    ours, theirs, _ = bench.paired(lambda: torch.ops.tiled.gemm(a, b), lambda: torch.matmul(a, b), "cuda", rounds)
    return dict(M=M, N=N, K=K, lda=lda, ldb=ldb, lda_bytes_mod_128=lda * 2 % 128, ldb_bytes_mod_128=ldb * 2 % 128,
                kernel=torch.ops.tiled.gemm_kernel_name(a, b), ours_ms=ours, torch_ms=theirs,
                ratio=theirs / ours, rel_err=err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(DEFAULT))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = []
    for case in args.cases.split(","):
        dims, *lds = case.split(":")
        M, N, K = (int(v) for v in dims.split("x"))
        lda = int(lds[0]) if lds else K
        ldb = int(lds[1]) if len(lds) > 1 else lda
        rec = run(M, N, K, lda, ldb, args.rounds)
        out.append(rec)
        print(f"{M}x{N}x{K} lda {lda} ({rec['lda_bytes_mod_128']:3d} mod 128) ldb {ldb} ({rec['ldb_bytes_mod_128']:3d}) "
              f"{rec['kernel']:28s} ours {rec['ours_ms'] * 1e3:7.1f} us torch {rec['torch_ms'] * 1e3:7.1f} us "
              f"ratio {rec['ratio']:.3f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
