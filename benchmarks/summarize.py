"""Summarise a benchmark JSON (benchmarks/results/*.json) as the README's tables.

    python benchmarks/summarize.py benchmarks/results/NVIDIA-H200-....json
"""
import json
import sys


def main(path):
    run = json.load(open(path))
    cases = run["cases"]
    print(f"{run['gpu']}, torch {run['torch']} (CUDA {run['cuda']}), commit {run['commit']}, {run['date'][:10]}; "
          "ratio = torch time / ours, paired interleaved medians.\n")
    # (Shapes run in several layouts besides NN, other than 4096^3: their own table.)
    other = {(c["M"], c["N"], c["K"]) for c in cases if c["op"] == "gemm" and c["layout"] != "NN"} - {(4096,) * 3}
    gemm = [c for c in cases if c["op"] == "gemm" and c["layout"] == "NN" and (c["M"], c["N"], c["K"]) not in other]
    shapes = []
    for c in gemm:
        s = (c["M"], c["N"], c["K"])
        if s not in shapes:
            shapes.append(s)
    dtypes = [d for d in ("fp32", "tf32", "fp16", "bf16") if any(c["dtype"] == d for c in gemm)]
    print("| M×N×K (NN) | " + " | ".join(f"{d} TFLOP/s (ratio)" for d in dtypes) + " |")
    print("|---|" + "---:|" * len(dtypes))
    for s in shapes:
        row = []
        for d in dtypes:
            c = next((c for c in gemm if c["dtype"] == d and (c["M"], c["N"], c["K"]) == s), None)
            row.append(f"{c['ours_tflops']:.0f} ({c['ratio']:.2f}×)" if c else "")
        print(f"| {s[0]}×{s[1]}×{s[2]} | " + " | ".join(row) + " |")
    lay = [c for c in cases if c["op"] == "gemm" and c["M"] == c["N"] == c["K"] == 4096]
    if lay:
        print("\n| 4096³ layout | " + " | ".join(dtypes) + " |")
        print("|---|" + "---:|" * len(dtypes))
        for L in ("NN", "NT", "TN", "TT"):
            row = []
            for d in dtypes:
                c = next((c for c in lay if c["dtype"] == d and c["layout"] == L), None)
                row.append(f"{c['ratio']:.2f}×" if c else "")
            print(f"| {L} | " + " | ".join(row) + " |")
    small = [c for c in cases if c["op"] == "gemm" and (c["M"], c["N"], c["K"]) in other]
    if small:
        sdt = [d for d in ("fp32", "tf32", "fp16", "bf16") if any(c["dtype"] == d for c in small)]
        print("\n| M×N×K | layout | " + " | ".join(f"{d} TFLOP/s (ratio)" for d in sdt) + " |")
        print("|---|---|" + "---:|" * len(sdt))
        for s, L in dict.fromkeys(((c["M"], c["N"], c["K"]), c["layout"]) for c in small):
            row = []
            for d in sdt:
                c = next((c for c in small if c["dtype"] == d and c["layout"] == L and (c["M"], c["N"], c["K"]) == s), None)
                row.append(f"{c['ours_tflops']:.0f} ({c['ratio']:.2f}×) {c['kernel']}" if c else "")
            print(f"| {s[0]}×{s[1]}×{s[2]} | {L} | " + " | ".join(row) + " |")
    lin = [c for c in cases if c["op"] == "linear_fwd_bwd"]
    if lin:
        print("\n| TiledLinear fwd+bwd vs nn.Linear (bf16), tokens×in→out | TFLOP/s | ratio |")
        print("|---|---:|---:|")
        for c in lin:
            print(f"| {c['M']}×{c['K']}→{c['N']} | {c['ours_tflops']:.0f} | {c['ratio']:.2f}× |")
    calls = [c for c in cases if c["op"].endswith("_call")]
    if calls:
        print("\n| per-call host cost, 64×64×64 fp32 eager | ours µs | torch µs |")
        print("|---|---:|---:|")
        for c in calls:
            print(f"| {c['op']} | {c['ours_us_per_call']:.1f} | {c['torch_us_per_call']:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
