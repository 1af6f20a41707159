"""The GEMMs that public models run: a corpus to measure (and tune) against.

    python -m torch_tiled_gemm.corpus [--set all|tuned|heldout] [--min-gflop X] [--parts fwd,dW] [--list]

Every entry is one GEMM C = A @ B, A [M, K], B [K, N] (with a leading batch
dimension for the attention-style products), with the layout in which a
training step meets it ("N": row-major, "T": a transposed view of a row-major
tensor, as torch_tiled_gemm.bench.operands builds them):

* fwd   y  = x @ W^T      M = tokens, N = out, K = in      "NT"
* dX    dx = dy @ W       M = tokens, N = in,  K = out     "NN"
* dW    dW = dy^T @ x     M = out,    N = in,  K = tokens  "TN"
* attn  S = Q @ K^T       batch = B * heads, M = N = seq, K = head_dim  "NT"
        O = P @ V         batch = B * heads, M = seq, N = head_dim, K = seq  "NN"
* lora  the down (x @ A^T) and up (h @ B^T) products of a LoRA adapter and
        their four gradients (dB, dh, dA, dx)
* generic  mid-size shapes (M, N, K around 1000-3000, none a multiple of 256)
        and low-K shapes (K <= 1024 against large M and N)

The Linear sizes come from the models' published configurations, written
below as numbers (nothing is downloaded).  Identical (M, N, K, batch, layout)
are kept once, with every model that produces them in "models".

Held out of tuning (see HELDOUT_MODELS and heldout_rule()): every GEMM that
only held-out models produce, and, of the rest, those whose id hashes into
the lowest HELDOUT_PERCENT of 100 buckets.  The split is a pure function of
the data in this file.
"""
import argparse
import collections
import hashlib
import math

# ---------------------------------------------------------------------------
# the models
#
# hidden, ffn: model and MLP widths; heads, kv: attention and key/value heads
# (kv < heads: grouped-query attention); head_dim; vocab: the output
# embedding's size (used only where lm_tokens is set).
# kind, the Linears of one block:
#   vit    qkv (h -> 3 h fused), fc1 (h -> ffn), fc2 (ffn -> h); the output
#          projection (h -> h) is left to the encoders' q / k / v of the same widths
#   enc    q / k / v (h -> heads * hd), o (heads * hd -> h), fc1, fc2
#   gated  q, k / v (h -> kv * hd), o, gate / up (h -> ffn), down (ffn -> h)
#   fused  qkv (h -> (heads + 2 kv) * hd), o, gate_up (h -> 2 ffn), down
#   moe    attention as gated, router (h -> experts); the experts' gate / up
#          and down, alternating over the token counts, on tokens * top_k /
#          experts (one expert's share of the tokens)
# tokens: the token counts (M of the forward) the block's Linears are taken at:
#   its i-th distinct Linear shape at tokens[i % len(tokens)], so each model
#   covers its 1-3 counts without every Linear at each.
# lm_tokens: the output projection (h -> vocab) at this token count (0: none).
# tp: (ways, tokens) tensor-parallel shards, Megatron-style fused: column-
#   parallel qkv and gate_up with out / ways, row-parallel o and down with in / ways.
Model = collections.namedtuple(
    "Model", "name family hidden ffn heads kv head_dim vocab kind tokens lm_tokens tp")

MODELS = [
    # name, family, hidden, ffn, heads, kv, head_dim, vocab, kind, tokens, lm_tokens, tp
    # Vision transformers at 224 px: 196 patches + 1 class token (DeiT: + 1
    # distillation token); token counts are images * tokens per image.
    Model("ViT-S/16", "vit", 384, 1536, 6, 6, 64, 0, "vit", (197 * 8, 197 * 64), 0, ()),
    Model("ViT-B/16", "vit", 768, 3072, 12, 12, 64, 0, "vit", (197 * 2, 197 * 16, 197 * 64), 0, ()),
    Model("ViT-L/16", "vit", 1024, 4096, 16, 16, 64, 0, "vit", (197 * 4, 197 * 32), 0, ()),
    Model("ViT-H/14", "vit", 1280, 5120, 16, 16, 80, 0, "vit", (257 * 2, 257 * 16), 0, ()),
    Model("DeiT-B/16-distilled", "vit", 768, 3072, 12, 12, 64, 0, "vit", (198 * 8, 198 * 32), 0, ()),
    # CLIP ViT-L/14: image tower at 224 px (257 tokens) and 336 px (577), text tower (77 tokens).
    Model("CLIP-ViT-L/14-vision", "clip", 1024, 4096, 16, 16, 64, 0, "vit", (257 * 16, 577 * 8), 0, ()),
    Model("CLIP-ViT-L/14-text", "clip", 768, 3072, 12, 12, 64, 49408, "vit", (77 * 4, 77 * 64), 0, ()),
    # Encoders at sequences of 128 and 512; masked-LM heads over the vocabulary.
    Model("BERT-base", "bert", 768, 3072, 12, 12, 64, 30522, "enc", (512, 4096, 16384), 4096, ()),
    Model("BERT-large", "bert", 1024, 4096, 16, 16, 64, 30522, "enc", (2048, 8192), 0, ()),
    Model("RoBERTa-base", "bert", 768, 3072, 12, 12, 64, 50265, "enc", (512, 4096, 16384), 0, ()),
    Model("RoBERTa-large", "bert", 1024, 4096, 16, 16, 64, 50265, "enc", (2048, 8192), 0, ()),
    # T5 encoders: relu MLP (v1.0), gated-GELU MLP with its own widths (v1.1).
    Model("T5-base", "t5", 768, 3072, 12, 12, 64, 32128, "enc", (512, 4096, 16384), 0, ()),
    Model("T5-large", "t5", 1024, 4096, 16, 16, 64, 32128, "enc", (2048, 8192), 0, ()),
    Model("T5-v1.1-base", "t5", 768, 2048, 12, 12, 64, 32128, "gated", (512, 4096, 16384), 0, ()),
    Model("T5-v1.1-large", "t5", 1024, 2816, 16, 16, 64, 32128, "gated", (2048, 8192), 0, ()),
    # Whisper encoders: 30 s of audio is 1500 frames.
    Model("Whisper-base", "whisper", 512, 2048, 8, 8, 64, 51865, "enc", (1500 * 1, 1500 * 8), 0, ()),
    Model("Whisper-large-v2", "whisper", 1280, 5120, 20, 20, 64, 51865, "enc", (1500 * 2, 1500 * 4), 0, ()),
    # GPT-2: fused qkv (Conv1D c_attn), 4 h MLP, 1024-token context.
    Model("GPT-2", "gpt2", 768, 3072, 12, 12, 64, 50257, "vit", (1024, 8192), 8192, ()),
    Model("GPT-2-medium", "gpt2", 1024, 4096, 16, 16, 64, 50257, "vit", (2048, 8192), 0, ()),
    Model("GPT-2-large", "gpt2", 1280, 5120, 20, 20, 64, 50257, "vit", (4096, 8192), 0, ()),
    Model("GPT-2-xl", "gpt2", 1600, 6400, 25, 25, 64, 50257, "vit", (1024, 4096, 16384), 0, ()),
    # Decoder LLMs.
    Model("Llama-2-7B", "llama", 4096, 11008, 32, 32, 128, 32000, "gated", (2048, 8192), 4096, ()),
    Model("Llama-2-13B", "llama", 5120, 13824, 40, 40, 128, 32000, "gated", (4096, 16384), 0, ((2, 4096),)),
    Model("Llama-2-70B", "llama", 8192, 28672, 64, 8, 128, 32000, "gated", (2048,), 0, ((8, 4096),)),
    Model("Llama-3-8B", "llama", 4096, 14336, 32, 8, 128, 128256, "gated", (256, 4096, 16384), 1024, ()),
    Model("Llama-3-70B", "llama", 8192, 28672, 64, 8, 128, 128256, "gated", (2048,), 0, ((4, 16384),)),
    Model("Mistral-7B", "mistral", 4096, 14336, 32, 8, 128, 32000, "gated", (256, 4096, 16384), 0, ()),
    Model("Mixtral-8x7B", "mistral", 4096, 14336, 32, 8, 128, 32000, "moe", (1024, 4096, 16384), 0, ()),
    Model("Qwen2-7B", "qwen", 3584, 18944, 28, 4, 128, 152064, "gated", (2048, 8192), 1024, ()),
    Model("Qwen2-72B", "qwen", 8192, 29568, 64, 8, 128, 152064, "gated", (2048,), 0, ((2, 4096),)),
    Model("Phi-3-mini", "phi", 3072, 8192, 32, 32, 96, 32064, "fused", (1024, 4096, 16384), 0, ()),
    Model("Phi-3-medium", "phi", 5120, 17920, 40, 10, 128, 32064, "fused", (2048, 8192), 0, ()),
    Model("Gemma-2B", "gemma", 2048, 16384, 8, 1, 256, 256000, "gated", (1024, 8192), 512, ()),
    Model("Gemma-7B", "gemma", 3072, 24576, 16, 16, 256, 256000, "gated", (4096, 16384), 0, ()),
]

MIXTRAL_EXPERTS, MIXTRAL_TOP_K = 8, 2

# Attention-style batched products: (model, seq, sequences, tp ways): batch =
# sequences * heads, or * heads / ways for one tensor-parallel rank's heads
# (ways not None).  Both QK^T and PV are generated from each row.
ATTENTION = [
    ("ViT-S/16", 197, 64, None), ("ViT-B/16", 197, 32, None),
    ("ViT-H/14", 257, 8, None), ("DeiT-B/16-distilled", 198, 32, None),
    ("CLIP-ViT-L/14-vision", 257, 16, None), ("CLIP-ViT-L/14-vision", 577, 8, None),
    ("CLIP-ViT-L/14-text", 77, 128, None), ("BERT-base", 128, 32, None), ("BERT-large", 512, 8, None),
    ("T5-base", 512, 16, None), ("Whisper-base", 1500, 4, None), ("Whisper-large-v2", 1500, 2, None),
    ("GPT-2", 1024, 8, None),
    ("Llama-2-70B", 4096, 1, 8), ("Llama-3-8B", 4096, 1, 4), ("Mistral-7B", 4096, 1, 8),
    ("Qwen2-7B", 2048, 1, None), ("Phi-3-mini", 4096, 1, 8),
]

# LoRA adapters: (model, in, out, rank, tokens) on one of the model's Linears.
LORA = [
    ("ViT-B/16", 768, 768, 16, 197 * 64), ("GPT-2-medium", 1024, 1024, 64, 2048), ("Llama-2-7B", 4096, 4096, 8, 4096),
    ("Llama-3-8B", 4096, 14336, 16, 8192), ("Mistral-7B", 4096, 1024, 64, 2048), ("Llama-3-70B", 8192, 8192, 128, 2048),
    ("Qwen2-7B", 3584, 3584, 32, 4096),
]

# Generic shapes: mid-size (none of M, N, K a multiple of 256), then low K.
# The layouts cycle NN, NT, TN, TT along each list.
GENERIC_MID = [
    (1000, 1000, 1000), (1111, 2222, 1333), (1234, 1876, 2900), (1500, 1500, 1500), (1777, 1024 + 7, 2500),
    (2000, 2000, 2000), (2222, 1111, 3000), (2500, 2900, 1100), (2900, 1300, 1700), (3000, 3000, 3000),
    (1200, 2700, 2300), (1920 + 17, 1400, 1023), (2600, 2100, 1250), (1350, 2950, 2650), (2800, 1800, 1900),
]
GENERIC_LOW_K = [
    (8192, 8192, 256), (16384, 4096, 512), (4096, 16384, 1024), (8192, 8192, 1000), (12288, 12288, 384),
    (16384, 16384, 128), (8192, 6144, 768), (6000, 10000, 640), (10240, 8192, 320), (16384, 8192, 96),
]

# ---------------------------------------------------------------------------
# the split

# Whole models held out: their GEMMs are in the held-out set unless a tuned
# model produces the same GEMM (then the tuner has seen it).  Chosen for widths
# no tuned model has (3584 / 18944, 1024 / 2816, 3072 / 24576, 512 / 2048) and
# DeiT's 198-token images: shapes truly unseen.
HELDOUT_MODELS = ("DeiT-B/16-distilled", "T5-v1.1-large", "Whisper-base", "Qwen2-7B", "Gemma-7B")
# Of the GEMMs a tuned model also produces (and the generic ones), those whose
# id falls in the lowest HELDOUT_PERCENT of 100 sha1 buckets.
HELDOUT_PERCENT = 6

PARTS = ("fwd", "dX", "dW", "attn", "lora", "generic")
LAYOUTS = ("NN", "NT", "TN", "TT")
SETS = ("all", "tuned", "heldout")
# The most A + B + C may take at 4 bytes an element (fp32_bytes).
MAX_FP32_BYTES = 4 << 30


def _bucket(gid):
    return int(hashlib.sha1(gid.encode()).hexdigest()[:8], 16) % 100


def heldout_rule(entry):
    """True if `entry` is held out of tuning: all its models are held out, or
    its id hashes into the held-out buckets."""
    if all(m in HELDOUT_MODELS for m in entry["models"]):
        return True
    return _bucket(entry["id"]) < HELDOUT_PERCENT


# ---------------------------------------------------------------------------
# generation

def _block(m):
    """The distinct Linears (name, in, out) of one block of model m (plus the
    router of a mixture of experts), in order."""
    h, q, kv = m.hidden, m.heads * m.head_dim, m.kv * m.head_dim
    if m.kind == "vit":
        return [("qkv", h, 3 * h), ("fc1", h, m.ffn), ("fc2", m.ffn, h)]
    if m.kind == "enc":
        return [("q/k/v", h, q), ("o", q, h), ("fc1", h, m.ffn), ("fc2", m.ffn, h)]
    if m.kind == "fused":
        return [("qkv", h, q + 2 * kv), ("o", q, h), ("gate_up", h, 2 * m.ffn), ("down", m.ffn, h)]
    layers = [("q" if kv != q else "q/k/v", h, q)]
    if kv != q:
        layers.append(("k/v", h, kv))
    layers.append(("o", q, h))
    if m.kind == "moe":
        return layers + [("router", h, MIXTRAL_EXPERTS)]
    return layers + [("gate/up", h, m.ffn), ("down", m.ffn, h)]


def _linears(m):
    """(layer, in, out, tokens) of every Linear GEMM group of model m."""
    out = []
    layers = {}
    for name, fin, fout in _block(m):  # one per shape: q and o are both h -> h where heads * hd == h
        layers.setdefault((fin, fout), (name, fin, fout))
    layers = list(layers.values())
    for i, (name, fin, fout) in enumerate(layers):
        out.append((name, fin, fout, m.tokens[i % len(m.tokens)]))
    if m.kind == "moe":  # each expert sees top_k / experts of the tokens
        for i, t in enumerate(m.tokens):
            et = t * MIXTRAL_TOP_K // MIXTRAL_EXPERTS
            out.append(("expert gate/up", m.hidden, m.ffn, et) if i % 2 == 0 else
                       ("expert down", m.ffn, m.hidden, et))
    if m.lm_tokens:
        out.append(("lm_head", m.hidden, m.vocab, m.lm_tokens))
    q, kv = m.heads * m.head_dim, m.kv * m.head_dim
    for ways, t in m.tp:
        kv_shard = kv // ways if m.kv % ways == 0 else m.head_dim  # fewer kv heads than ranks: one each
        out += [(f"qkv tp{ways}", m.hidden, q // ways + 2 * kv_shard, t), (f"o tp{ways}", q // ways, m.hidden, t),
                (f"gate_up tp{ways}", m.hidden, 2 * m.ffn // ways, t), (f"down tp{ways}", m.ffn // ways, m.hidden, t)]
    # Drop exact repeats within the model (a tp shard equal to the whole: gate_up / 2).
    return list(dict.fromkeys(out))


def _raw():
    """Every GEMM before deduplication: dicts with model, layer, part, M, N, K, batch, layout."""
    for m in MODELS:
        for layer, fin, fout, t in _linears(m):
            yield dict(model=m.name, layer=layer, part="fwd", M=t, N=fout, K=fin, batch=None, layout="NT")
            yield dict(model=m.name, layer=layer, part="dX", M=t, N=fin, K=fout, batch=None, layout="NN")
            yield dict(model=m.name, layer=layer, part="dW", M=fout, N=fin, K=t, batch=None, layout="TN")
    by_name = {m.name: m for m in MODELS}
    for name, seq, seqs, ways in ATTENTION:
        m = by_name[name]
        heads = m.heads // (ways or 1)
        batch = seqs * heads
        tag = f"seq {seq}, {seqs} x {heads} heads" + (f" (tp{ways})" if ways else "")
        yield dict(model=name, layer=f"QK^T {tag}", part="attn", M=seq, N=seq, K=m.head_dim, batch=batch,
                   layout="NT")
        yield dict(model=name, layer=f"PV {tag}", part="attn", M=seq, N=m.head_dim, K=seq, batch=batch,
                   layout="NN")
    for name, fin, fout, r, t in LORA:
        tag = f"r{r} {fin}->{fout}"
        yield dict(model=name, layer=f"lora down {tag}", part="lora", M=t, N=r, K=fin, batch=None, layout="NT")
        yield dict(model=name, layer=f"lora up {tag}", part="lora", M=t, N=fout, K=r, batch=None, layout="NT")
        yield dict(model=name, layer=f"lora dB {tag}", part="lora", M=fout, N=r, K=t, batch=None, layout="TN")
        yield dict(model=name, layer=f"lora dh {tag}", part="lora", M=t, N=r, K=fout, batch=None, layout="NN")
        yield dict(model=name, layer=f"lora dA {tag}", part="lora", M=r, N=fin, K=t, batch=None, layout="TN")
        yield dict(model=name, layer=f"lora dx {tag}", part="lora", M=t, N=fin, K=r, batch=None, layout="NN")
    for kind, shapes in (("mid-size", GENERIC_MID), ("low-K", GENERIC_LOW_K)):
        for i, (M, N, K) in enumerate(shapes):
            yield dict(model="generic", layer=kind, part="generic", M=M, N=N, K=K, batch=None,
                       layout=LAYOUTS[i % len(LAYOUTS)])


def gemm_id(M, N, K, batch, layout):
    """Stable id of a GEMM: its layout and sizes ('NT-4096x11008x4096', batched '-b32')."""
    return f"{layout}-{M}x{N}x{K}" + (f"-b{batch}" if batch else "")


def gflop(e):
    return 2.0 * e["M"] * e["N"] * e["K"] * (e["batch"] or 1) / 1e9


def fp32_bytes(e):
    """Bytes of A, B and C at 4 bytes an element: what a run holds in fp32 / tf32
    (ours' and torch's outputs are not alive at once: the caching allocator
    hands the same block to each call in turn)."""
    return 4 * (e["batch"] or 1) * (e["M"] * e["K"] + e["K"] * e["N"] + e["M"] * e["N"])


def _build():
    entries = {}
    for r in _raw():
        key = (r["M"], r["N"], r["K"], r["batch"], r["layout"])
        e = entries.get(key)
        if e is None:
            entries[key] = e = dict(id=gemm_id(*key), model=r["model"], models=[], layer=r["layer"],
                                    layers=[], part=r["part"], M=r["M"], N=r["N"], K=r["K"],
                                    batch=r["batch"], layout=r["layout"])
        if r["model"] not in e["models"]:
            e["models"].append(r["model"])
        e["layers"].append(f"{r['model']}: {r['layer']}")
    out = []
    for e in entries.values():
        e["gflop"] = gflop(e)
        e["set"] = "heldout" if heldout_rule(e) else "tuned"
        out.append(e)
    return out


_CACHE = []


def corpus(set="all", min_gflop=0.0, parts=None, models=None):  # noqa: A002  (the documented keyword)
    """The corpus as a list of dicts (fresh copies): id, model (first producer),
    models (all producers), layer / layers (what produces it), part, M, N, K,
    batch (None for 2-D), layout, gflop, set ("tuned" | "heldout").

    set: "all", "tuned" or "heldout"; min_gflop: drop smaller GEMMs; parts /
    models: keep only these parts / GEMMs that one of these models produces."""
    if set not in SETS:
        raise ValueError(f"set must be one of {SETS}, got {set!r}")
    if not _CACHE:
        _CACHE.extend(_build())
    out = [dict(e, models=list(e["models"]), layers=list(e["layers"])) for e in _CACHE
           if set in ("all", e["set"])]
    if parts is not None:
        out = [e for e in out if e["part"] in parts]
    if models is not None:
        out = [e for e in out if any(m in models for m in e["models"])]
    return filter_gflop(out, min_gflop)


def filter_gflop(entries, min_gflop):
    """The entries of at least min_gflop GFLOP."""
    return [e for e in entries if e["gflop"] >= min_gflop]


def summary(entries):
    """Counts per part and set, as a markdown table."""
    rows = ["| part | tuned | heldout | all |", "|---|---:|---:|---:|"]
    for p in PARTS + ("total",):
        sel = [e for e in entries if p in ("total", e["part"])]
        t = sum(e["set"] == "tuned" for e in sel)
        h = sum(e["set"] == "heldout" for e in sel)
        rows.append(f"| {p} | {t} | {h} | {len(sel)} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", default="all", choices=SETS)
    p.add_argument("--min-gflop", type=float, default=0.0)
    p.add_argument("--parts", default=None, help="comma-separated parts (default: all)")
    p.add_argument("--list", action="store_true", help="print every GEMM")
    args = p.parse_args(argv)
    parts = args.parts.split(",") if args.parts else None
    entries = corpus(args.set, args.min_gflop, parts)
    if args.list:
        for e in entries:
            print(f"{e['id']:<28} {e['part']:<7} {e['set']:<7} {e['gflop']:9.2f} GFLOP  {', '.join(e['layers'])}")
    print(summary(entries))
    models = sorted({m for e in entries for m in e["models"]} - {"generic"})
    heldout = [m for m in models if m in HELDOUT_MODELS]
    total, largest = sum(e["gflop"] for e in entries), max(fp32_bytes(e) for e in entries) / 2**30
    geo = math.exp(sum(math.log(e["gflop"]) for e in entries) / len(entries))
    print(f"\n{len(entries)} GEMMs from {len(models)} models ({len(heldout)} held out: {', '.join(heldout)}); "
          f"{total:.0f} GFLOP in all, geomean {geo:.1f} GFLOP; the largest holds {largest:.2f} GiB in fp32")


if __name__ == "__main__":
    main()
