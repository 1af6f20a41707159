"""Calibrates torch_tiled_gemm/testing.py's element-wise bound on the CPU.

    python benchmarks/research/check_calibration.py [--quick] [--out FILE.json]

Simulates, in float64 emulation of fp32 arithmetic, the ways a correct
kernel may compute C = A @ B (+ bias), and the ways a wrong one may, and
reports for each the worst |out - ref| / bound over every element:

legit (must stay well below 1):
  fma        one fp32 FMA chain per element over K (SIMT kernels, CPU)
  nofma      products rounded to fp32, then added
  splitk4    K in 4 slices, each an FMA chain, partials added in order
  blocked    FMA chains over 256-deep blocks, block sums added in order
  tc4 / tc8  groups of 4 / 8 exact products added to the fp32 accumulator
             with truncation (round toward zero), as tensor cores' adders do
  torch      torch.matmul in fp32 (the CPU's BLAS)
  (tf32: operands truncated or rounded to nearest first; bf16 / fp16: the
  fp32 result rounded to the output type, the bias added before or after)
wrong (must exceed 1):
  tf32 operands kept to bf16 precision (truncated or rounded), one 16 x 16
  tile missing its last 16 k's, a bias missing on 8 columns, one element off
  by 4 units in the last place (16-bit outputs), a k-step dropped in one
  element (fp32).
"""
import argparse
import importlib.util
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("tiled_testing", os.path.join(HERE, "..", "..", "torch_tiled_gemm", "testing.py"))
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)


# ---------------------------------------------------------------- fp32 emulation

def rn32(x):
    return x.float().double()


def rz32(x):
    y = x.float()
    over = y.double().abs() > x.abs()
    return torch.where(over, torch.nextafter(y, torch.zeros_like(y)), y).double()


def to_tf32(x, mode):
    """fp32 -> tf32 (10 stored mantissa bits): 'trunc' chops, 'rna' rounds to nearest (ties away)."""
    bits = x.float().contiguous().view(torch.int32)
    if mode == "rna":
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


def to_bf16_precision(x, mode):
    bits = x.float().contiguous().view(torch.int32)
    if mode == "rna":
        return x.float().to(torch.bfloat16).float()
    return (bits & ~0xFFFF).view(torch.float32)


def fma_chain(a, b, k0=0, k1=None, acc=None):
    """acc + sum_k a[:, k] b[k, :] with one fp32 rounding per step (FMA)."""
    k1 = a.shape[1] if k1 is None else k1
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64) if acc is None else acc
    for k in range(k0, k1):
        acc = rn32(acc + a[:, k:k + 1] * b[k:k + 1, :])
    return acc


def nofma_chain(a, b):
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for k in range(a.shape[1]):
        acc = rn32(acc + rn32(a[:, k:k + 1] * b[k:k + 1, :]))
    return acc


def splitk(a, b, slices=4):
    K = a.shape[1]
    edges = [K * i // slices for i in range(slices + 1)]
    total = None
    for k0, k1 in zip(edges[:-1], edges[1:]):
        part = fma_chain(a, b, k0, k1)
        total = part if total is None else rn32(total + part)
    return total


def blocked(a, b, block=256):
    K = a.shape[1]
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for k0 in range(0, K, block):
        total = rn32(total + fma_chain(a, b, k0, min(K, k0 + block)))
    return total


def tensor_core(a, b, group):
    """Groups of `group` products, exact, added to the accumulator with one
    round-toward-zero to fp32 per group."""
    K = a.shape[1]
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
    for k0 in range(0, K, group):
        acc = rz32(acc + a[:, k0:k0 + group] @ b[k0:k0 + group, :])
    return acc


LEGIT_FP32 = {
    "fma": fma_chain, "nofma": nofma_chain, "splitk4": splitk, "blocked": blocked,
    "tc4": lambda a, b: tensor_core(a, b, 4), "tc8": lambda a, b: tensor_core(a, b, 8),
    "torch": lambda a, b: (a.float() @ b.float()).double(),
}


# ---------------------------------------------------------------- data

def operands(M, N, K, kind, gen):
    a = torch.randn(M, K, generator=gen)
    b = torch.randn(K, N, generator=gen)
    if kind == "positive":
        a, b = a.abs() + 0.5, b.abs() + 0.5
    elif kind == "scaled":  # rows and columns over 2^-8 .. 2^8
        a = a * torch.exp2(torch.randint(-8, 9, (M, 1), generator=gen).float())
        b = b * torch.exp2(torch.randint(-8, 9, (1, N), generator=gen).float())
    elif kind == "cancel":  # first half of K positive, second half its negation-ish
        h = K // 2
        a = a.abs() + 0.5
        b = b.abs() + 0.5
        b[h:2 * h] = -b[:h] * (1 + 1e-3 * torch.randn(h, N, generator=gen))
    return a, b


def worst(out, a, b, bias, dtype, tf32, device, scales):
    ref, bound = T.error_bound(a, b, bias, dtype, tf32, device, scales=scales)
    res = T.compare(out, ref, bound)
    return res.worst_ratio, res.ok


def run(quick):
    gen = torch.Generator().manual_seed(0)
    shapes = [(256, 256, 64), (256, 256, 777), (64, 64, 4096), (16, 16, 16384), (300, 200, 5)]
    if quick:
        shapes = [(128, 128, 64), (32, 32, 2048), (8, 8, 8192)]
    kinds = ["randn", "positive", "scaled", "cancel"]
    legit = {}   # (case) -> worst ratio
    wrong = {}   # (case) -> worst ratio (should be > 1)

    def note(table, key, value):
        table[key] = max(table.get(key, 0.0), value)

    for (M, N, K) in shapes:
        for kind in kinds:
            t0 = time.time()
            a32, b32 = operands(M, N, K, kind, gen)
            bias32 = torch.randn(N, generator=gen)
            # fp64: a plain float64 chain (no FMA) against torch's float64
            # reference: both roundings must fit the bound
            a64, b64, bias64 = a32.double(), b32.double(), bias32.double()
            acc = torch.zeros(M, N, dtype=torch.float64)
            for k in range(K):
                acc = acc + a64[:, k:k + 1] * b64[k:k + 1, :]
            for bias in (None, bias64):
                out = acc if bias is None else acc + bias
                r, _ = worst(out, a64, b64, bias, torch.float64, False, "cpu",
                             T.reference_and_scales(a64, b64, bias))
                note(legit, f"fp64 chain bias={bias is not None}", r)
                note(legit, f"fp64 {kind} K={K}", r)
            for variant in ("fp32", "tf32_trunc", "tf32_rna", "bf16", "fp16"):
                if variant.startswith("tf32"):
                    mode = variant.split("_")[1]
                    a_in, b_in = a32, b32
                    a_k, b_k = to_tf32(a32, mode).double(), to_tf32(b32, mode).double()
                    out_dtype, tf32, device = torch.float32, True, "cuda"
                elif variant in ("bf16", "fp16"):
                    dt = torch.bfloat16 if variant == "bf16" else torch.float16
                    a_in, b_in = a32.to(dt), b32.to(dt)
                    a_k, b_k = a_in.double(), b_in.double()
                    out_dtype, tf32, device = dt, False, "cuda"
                else:
                    a_in, b_in = a32, b32
                    a_k, b_k = a32.double(), b32.double()
                    out_dtype, tf32, device = torch.float32, False, "cpu"
                bias_in = bias32.to(out_dtype)
                bias_k = bias_in.double()
                scales = T.reference_and_scales(a_in, b_in, bias_in)
                models = dict(LEGIT_FP32)
                if device == "cpu":  # strict fp32: no tensor-core accumulation
                    models.pop("tc4"), models.pop("tc8")
                if K > 4096:  # long chains: the emulation is slow; keep the distinct ones
                    for m in ("nofma", "blocked"):
                        models.pop(m, None)
                for name, fn in models.items():
                    acc = fn(a_k, b_k)
                    for bias_mode in ("none", "before", "after"):
                        if out_dtype == torch.float32 and bias_mode == "after":
                            continue
                        if bias_mode == "none":
                            out, bias = acc.to(out_dtype), None
                        elif bias_mode == "before":
                            out, bias = rn32(acc + bias_k).to(out_dtype), bias_in
                        else:
                            out, bias = (acc.to(out_dtype).double() + bias_k).to(out_dtype), bias_in
                        r, _ = worst(out, a_in, b_in, bias, out_dtype, tf32, device,
                                     scales if bias is None else T.reference_and_scales(a_in, b_in, bias))
                        note(legit, f"{variant} {name} bias={bias_mode}", r)
                        note(legit, f"{variant} {kind} K={K}", r)
                # ---- wrong kernels
                good = rn32(fma_chain(a_k, b_k) if K <= 4096 else (a_k.float() @ b_k.float()).double())
                if variant.startswith("tf32"):
                    for mode in ("trunc", "rna"):
                        a_w, b_w = to_bf16_precision(a32, mode).double(), to_bf16_precision(b32, mode).double()
                        out = (a_w.float() @ b_w.float()).double().float()
                        r, ok = worst(out, a_in, b_in, None, out_dtype, tf32, device, scales)
                        note(wrong, f"tf32 operands at bf16 precision ({mode})", -r if ok else r)
                if M >= 32 and N >= 32 and K >= 32:
                    out = good.clone()
                    # one 16x16 tile missing its last 16 k's
                    tile = fma_chain(a_k[16:32], b_k[:, 16:32], 0, K - 16)
                    out[16:32, 16:32] = tile
                    r, ok = worst(out.to(out_dtype), a_in, b_in, None, out_dtype, tf32, device, scales)
                    note(wrong, f"{variant} tile missing 16 k's", -r if ok else r)
                if N >= 16:
                    # bias missing on 8 columns
                    bias_scales = T.reference_and_scales(a_in, b_in, bias_in)
                    out = rn32(good + bias_k)
                    out[:, 3:11] = good[:, 3:11]
                    r, ok = worst(out.to(out_dtype), a_in, b_in, bias_in, out_dtype, tf32, device, bias_scales)
                    note(wrong, f"{variant} bias missing on 8 columns", -r if ok else r)
                if out_dtype != torch.float32:
                    # one element 4 ulps off
                    o = good.to(out_dtype)
                    i, j = M // 2, N // 3
                    bits = o.view(torch.int16)
                    bits[i, j] += 4
                    r, ok = worst(o, a_in, b_in, None, out_dtype, tf32, device, scales)
                    note(wrong, f"{variant} one element +4 ulps", -r if ok else r)
                elif not tf32:
                    out = good.clone()
                    i, j = M // 2, N // 3
                    k = int(torch.argmax((a_k[i] * b_k[:, j]).abs()))
                    out[i, j] = rn32(out[i, j] - a_k[i, k] * b_k[k, j])
                    r, ok = worst(out.to(out_dtype), a_in, b_in, None, out_dtype, tf32, device, scales)
                    note(wrong, f"fp32 one element missing its largest product", -r if ok else r)
            print(f"{M}x{N}x{K} {kind}: {time.time() - t0:.1f}s", file=sys.stderr)
    return legit, wrong


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    legit, wrong = run(args.quick)
    print("legit: worst |err| / bound (must be < 1)")
    for k, v in sorted(legit.items(), key=lambda kv: -kv[1]):
        print(f"  {v:7.3f}  {k}")
    print("wrong: worst |err| / bound (must be > 1; negative: passed the check, i.e. missed)")
    for k, v in sorted(wrong.items(), key=lambda kv: kv[1]):
        print(f"  {v:9.3g}  {k}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"legit": legit, "wrong": wrong, "C_IN": T.C_IN, "C_ACC": T.C_ACC}, f, indent=1)


if __name__ == "__main__":
    main()
