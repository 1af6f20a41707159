"""Shape sweeps against torch.matmul: ratio vs M, and vs misalignment.

    python benchmarks/sweep.py [--dtype bf16] [--out benchmarks/results]

* M sweep: M in powers of two 1..8192 and odd values, N = K = 4096 (and
  N = 14336), NN.
* misalignment sweep: 4096 + d for d in 0..8 on each of M, N, K (leading
  dimensions that are not multiples of 16 bytes).
* odd shapes: sizes one off a power of two, primes, and tile counts that
  leave the last wave mostly empty (1536x1536, 3000x5000).
Same paired, interleaved protocol as the main benchmark; every case's
output (ours, and torch's for comparison) is checked against float64 element
by element first (torch_tiled_gemm/testing.py): "check": "ok" / "FAIL" in
the JSON, FAIL on the printed line, exit status 1 if any failed.  Writes
sweep-<gpu>-<date>-<commit>.json and a two-panel PNG.
"""
import argparse
import json
import os
import sys

import torch

from torch_tiled_gemm.bench import DTYPES as DT, Checks, _slug, env_info, operands, paired

M_VALUES = [1, 2, 3, 4, 8, 16, 17, 31, 32, 64, 100, 128, 255, 256, 512, 777, 1024, 2048, 4096, 8192]


ODD_SHAPES = [(4097, 4097, 4097), (8191, 4096, 4095), (4093, 4099, 4091), (2039, 6143, 1021),
              (1536, 1536, 1536), (3000, 5000, 4096), (4096, 4096, 4095), (4095, 4095, 4095)]


def case(M, N, K, dname, device, layout="NN"):
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    a, b = operands(M, N, K, DT[dname], layout, device)  # NT: B column-major, the weight of x @ W.T
    checks = Checks()
    err, err_torch = checks.gemm("C", torch.ops.tiled.gemm(a, b), torch.matmul(a, b), a, b, tf32=dname == "tf32")
    torch.cuda.empty_cache()
    t_ours, t_torch, ratio = paired(lambda: torch.ops.tiled.gemm(a, b), lambda: torch.matmul(a, b), device)
    flops = 2.0 * M * N * K
    return {"M": M, "N": N, "K": K, "dtype": dname, "layout": layout, "ours_tflops": flops / t_ours / 1e9,
            "torch_tflops": flops / t_torch / 1e9, "ratio": ratio,
            "kernel": torch.ops.tiled.gemm_kernel_name(a, b), "rel_err": err, "torch_rel_err": err_torch,
            **checks.fields()}


def mark(r):
    return "" if r["check"] == "ok" else "  FAIL: " + "; ".join(r["check_failures"])


def plot(base, info, dtype, m_sweep, mis):
    """Two panels: ratio vs M (per layout and N), ratio vs misalignment."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for lay in ("NN", "NT"):
        for N in (4096, 14336):
            rows = [r for r in m_sweep if r["N"] == N and r["layout"] == lay]
            ax1.plot([r["M"] for r in rows], [r["ratio"] for r in rows], "o-", label=f"{lay} N={N}, K=4096")
    ax1.set_xscale("log", base=2)
    ax1.axhline(1.0, color="k", lw=1)
    ax1.set_xlabel("M")
    ax1.set_ylabel("ratio (torch time / ours)")
    ax1.legend()
    for dim in "MNK":
        rows = [r for r in mis if r["dim"] == dim]
        ax2.plot([r["offset"] for r in rows], [r["ratio"] for r in rows], "o-", label=f"{dim} = 4096 + d")
    ax2.axhline(1.0, color="k", lw=1)
    ax2.set_xlabel("d (elements)")
    ax2.legend()
    fig.suptitle(f"{info['gpu']} {dtype} {info['commit']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(base + ".png", dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="bf16", choices=sorted(DT))
    p.add_argument("--out", default=os.path.join("benchmarks", "results"))
    p.add_argument("--parts", default="m,mis,odd", help="comma list of m, mis, odd")
    p.add_argument("--m-values", default=None, help="comma list of M for the M sweep")
    p.add_argument("--tag", default="", help="suffix of the output file names")
    args = p.parse_args()
    parts = set(args.parts.split(","))
    m_values = [int(v) for v in args.m_values.split(",")] if args.m_values else M_VALUES
    device = "cuda"
    info = env_info(device)
    m_sweep = [case(M, N, 4096, args.dtype, device, lay) for lay in ("NN", "NT") for N in (4096, 14336)
               for M in m_values] if "m" in parts else []
    odd = [case(M, N, K, args.dtype, device) for (M, N, K) in ODD_SHAPES] if "odd" in parts else []
    mis = []
    for d in range(9 if "mis" in parts else 0):
        for which in "MNK":
            s = {"M": 4096, "N": 4096, "K": 4096}
            s[which] += d
            mis.append(dict(case(s["M"], s["N"], s["K"], args.dtype, device), offset=d, dim=which))
    info.update({"dtype": args.dtype, "m_sweep": m_sweep, "misalignment": mis, "odd": odd})
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"sweep-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}{args.tag}")
    with open(base + ".json", "w") as f:
        json.dump(info, f, indent=1)
    for r in m_sweep:
        print(f"{r['layout']} M={r['M']:5d} N={r['N']:5d}  ours {r['ours_tflops']:7.1f}  torch {r['torch_tflops']:7.1f}  "
              f"ratio {r['ratio']:.2f}  {r['kernel']}{mark(r)}")
    for r in mis:
        print(f"{r['dim']}+{r['offset']}  ratio {r['ratio']:.2f}  {r['kernel']}{mark(r)}")
    for r in odd:
        print(f"{r['M']}x{r['N']}x{r['K']}  ours {r['ours_tflops']:7.1f}  torch {r['torch_tflops']:7.1f}  "
              f"ratio {r['ratio']:.2f}  {r['kernel']}{mark(r)}")
    if m_sweep and mis:  # a partial sweep (--parts) gets no plot
        plot(base, info, args.dtype, m_sweep, mis)
    print(f"wrote {base}.json")
    failed = sum(r["check"] != "ok" for r in m_sweep + mis + odd)
    if failed:
        print(f"{failed} of {len(m_sweep) + len(mis) + len(odd)} cases FAILED the accuracy check", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
