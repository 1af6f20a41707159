"""Fused MLP blocks and model training steps against the unfused torch model.

    python benchmarks/mlp_bench.py                 # H100: the issue's cases
    python benchmarks/mlp_bench.py --quick         # tiny shapes (a smoke run, CPU too)
    python benchmarks/mlp_bench.py --out results/mlp.json

Cases (results JSON, one per line of the table):
  op "mlp_fwd_bwd"  an MLP block's forward + backward: ViT-B (12608 tokens,
                    768 -> 3072, GELU, bias) and Llama-7B (4096 tokens, 4096 ->
                    11008, SwiGLU, no bias)
  op "model_step"   one training step (forward, backward, AdamW step): a
                    Llama-style decoder (hand-written, 4 layers) and ViT-B/16
                    (timm, where installed)
each "eager" and "compiled" (torch.compile of both sides).  Ours is the same
model after fuse_mlps + swap_linear.  Timing: bench.py's paired, interleaved
protocol; "ratio" = torch time / ours (higher: ours faster); "peak_mem_ratio"
= our peak allocated memory over one step / torch's (CUDA only).
"""
import argparse
import copy
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_tiled_gemm as ttg  # noqa: E402
from torch_tiled_gemm import bench  # noqa: E402


class Mlp(nn.Module):  # timm's Mlp layout (fuse_mlps recognises the name and children)
    def __init__(self, d, h):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class LlamaMLP(nn.Module):  # transformers' LlamaMLP layout
    def __init__(self, d, h):
        super().__init__()
        self.gate_proj = nn.Linear(d, h, bias=False)
        self.up_proj = nn.Linear(d, h, bias=False)
        self.down_proj = nn.Linear(h, d, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, d, h, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.mlp = LlamaMLP(d, h)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, vocab, d, h, heads, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayer(d, h, heads) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def fused_copy(model):
    ours = copy.deepcopy(model)
    ttg.fuse_mlps(ours, warn=False)
    return ttg.swap_linear(ours)


def peak_mb(step, device):
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def measure(case, ours_step, torch_step, device):
    for s in (ours_step, torch_step):  # warm-up (and compile)
        s()
        s()
    m_ours, m_torch = peak_mb(ours_step, device), peak_mb(torch_step, device)
    t_ours, t_torch, ratio = bench.paired(ours_step, torch_step, device)
    case.update(ours_ms=t_ours, torch_ms=t_torch, ratio=ratio, ours_peak_mb=m_ours, torch_peak_mb=m_torch,
                peak_mem_ratio=(m_ours / m_torch) if m_ours and m_torch else None)
    print(f"{case['op']:12s} {case['model']:22s} {case['variant']:9s} ratio {ratio:.3f}  "
          f"ours {t_ours:.3f} ms  torch {t_torch:.3f} ms  peak mem ratio {case['peak_mem_ratio']}", flush=True)
    return case


def mlp_cases(device, dtype, quick, variants):
    shapes = [("vit-b16", Mlp, 12608, 768, 3072), ("llama-7b", LlamaMLP, 4096, 4096, 11008)]
    if quick:
        shapes = [("vit-b16", Mlp, 197, 64, 256), ("llama-7b", LlamaMLP, 128, 64, 176)]
    for name, cls, tokens, d, h in shapes:
        torch.manual_seed(0)
        ref = cls(d, h).to(device, dtype)
        ours = fused_copy(ref)
        x = torch.randn(tokens, d, device=device, dtype=dtype, requires_grad=True)
        g = torch.randn(tokens, d, device=device, dtype=dtype)
        for variant in variants:
            fo, ft = (ours, ref) if variant == "eager" else (torch.compile(ours), torch.compile(ref))

            def step(f):
                return lambda: torch.autograd.backward(f(x), g)

            yield measure({"op": "mlp_fwd_bwd", "model": name, "variant": variant, "dtype": str(dtype),
                           "shape": [tokens, d, h]}, step(fo), step(ft), device)
            x.grad = None


def train_step(model, opt, make_batch, loss_fn):
    def step():
        inp, target = make_batch()
        loss = loss_fn(model(inp), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def model_cases(device, dtype, quick, variants):
    models = []
    if quick:
        cfg = dict(vocab=64, d=64, h=176, heads=4, layers=2)
        batch, seq = 2, 32
    else:
        cfg = dict(vocab=32000, d=2048, h=5632, heads=16, layers=4)
        batch, seq = 4, 2048
    models.append(("llama-style-decoder", lambda: Decoder(**cfg),
                   lambda: (torch.randint(0, cfg["vocab"], (batch, seq), device=device),) * 2,
                   lambda out, t: F.cross_entropy(out.flatten(0, 1).float(), t.flatten())))
    try:
        import timm

        img, vb = (32, 2) if quick else (224, 64)
        kw = dict(img_size=32, patch_size=8, depth=2) if quick else {}
        models.append(("vit-b16", lambda: timm.create_model("vit_base_patch16_224", pretrained=False, **kw),
                       lambda: (torch.randn(vb, 3, img, img, device=device, dtype=dtype),
                                torch.randint(0, 1000, (vb,), device=device)),
                       lambda out, t: F.cross_entropy(out.float(), t)))
    except ImportError:
        print("timm not installed: no ViT-B/16 case", flush=True)
    for name, make, batch_fn, loss_fn in models:
        torch.manual_seed(0)
        ref = make().to(device, dtype)
        ours = fused_copy(ref)
        for variant in variants:
            mo, mt = (ours, ref) if variant == "eager" else (torch.compile(ours), torch.compile(ref))
            so = train_step(mo, torch.optim.AdamW(ours.parameters(), lr=1e-5), batch_fn, loss_fn)
            st = train_step(mt, torch.optim.AdamW(ref.parameters(), lr=1e-5), batch_fn, loss_fn)
            yield measure({"op": "model_step", "model": name, "variant": variant, "dtype": str(dtype)}, so, st,
                          device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny shapes (smoke run)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="bfloat16 (GPU default) or float32 (CPU default)")
    ap.add_argument("--variants", default="eager,compiled")
    ap.add_argument("--only", default="mlp,model", help="mlp, model or both")
    ap.add_argument("--out", default=None, help="results JSON path")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype or ("bfloat16" if args.device == "cuda" else "float32"))
    variants = args.variants.split(",")
    cases = []
    if "mlp" in args.only:
        cases += list(mlp_cases(args.device, dtype, args.quick, variants))
    if "model" in args.only:
        cases += list(model_cases(args.device, dtype, args.quick, variants))
    doc = {"env": bench.env_info(args.device), "cases": cases}
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"mlp-{'quick-' if args.quick else ''}{args.device}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
