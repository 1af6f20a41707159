"""fuse_mlps: run the MLP blocks of timm and Hugging Face models on the fused ops.

Each recognised block keeps its identity, its children and its Parameter
objects: only its class changes, to a subclass of its own class whose
forward calls tiled.linear_act / tiled.gated_linear (docs/fused.md).  So the
state_dict keys and tensors are the same, optimizers built before keep
working, checkpoints load both ways, and `unfuse_mlps` restores the classes.

Recognised (by class name, then by the children the forward uses):
  timm          Mlp (fc1 -> act -> fc2), GluMlp (fc1 chunked), SwiGLU
  torchvision   MLPBlock (ViT) and two-layer MLP (Swin): Linear, act,
                Dropout, Linear, Dropout
  transformers  LlamaMLP-like gated MLPs (gate_proj, up_proj, down_proj,
                act_fn): Llama, Mistral, Qwen2/3, Gemma 1-3, ...; Phi3MLP
                (gate and up in one gate_up_proj); T5DenseGatedActDense
                (T5 v1.1, Flan-T5) and T5DenseActDense; GPT2MLP (Conv1D
                weights, [in, out]); two-layer MLPs: ViTMLP, PhiMLP,
                CLIPMLP, SiglipMLP, GPTNeoXMLP (Pythia), FalconMLP,
                Starcoder2MLP; BertIntermediate (+ the activation) and
                BertOutput (+ the residual add, when its dropout is
                inactive), RoBERTa's too; ViTIntermediate / ViTOutput of
                older releases.
A block whose activation or layers are not supported (Conv2d layers, a
LoRA-wrapped linear, QuickGELU, ...) is left as it is and reported.
"""
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from .functional import gated_linear, linear, linear_act
from .nn import TiledLinear, is_conv1d, is_plain_falcon

__all__ = ["fuse_mlps", "unfuse_mlps", "FuseReport", "module_activation"]


# ----------------------------------------------------------------- activations

def module_activation(act) -> Optional[str]:
    """The epilogue's name for an activation module (or function), or None
    when the epilogue has no such activation."""
    if isinstance(act, nn.Identity):
        return "none"
    if isinstance(act, nn.ReLU):
        return "relu"
    if isinstance(act, nn.SiLU):
        return "silu"
    if isinstance(act, nn.GELU):
        return {"none": "gelu_erf", "tanh": "gelu_tanh"}.get(act.approximate)
    if act is torch.nn.functional.gelu:
        return "gelu_erf"
    if act is torch.nn.functional.silu:
        return "silu"
    if act is torch.nn.functional.relu:
        return "relu"
    name = type(act).__name__
    inner = getattr(act, "act", None)
    if name == "GELUActivation":  # transformers: nn.functional.gelu, or its Python erf form
        return "gelu_erf"
    if name in ("GELUTanh", "PytorchGELUTanh", "NewGELUActivation", "FastGELUActivation"):
        return "gelu_tanh"  # (Fast/New: the same tanh formula, spelled in Python)
    if name in ("SiLUActivation", "SiLU", "Swish"):
        return "silu"
    if name == "GELU" and type(act).__module__.startswith("timm"):  # timm.layers.activations.GELU
        return "gelu_erf"
    if name == "GELUTanh" and type(act).__module__.startswith("timm"):
        return "gelu_tanh"
    if name in ("ReLU",):
        return "relu"
    if inner is not None and inner is not act and callable(inner) and not isinstance(inner, nn.Module):
        func = getattr(inner, "func", inner)  # functools.partial(F.gelu, approximate="tanh")
        kw = getattr(inner, "keywords", {}) or {}
        if func is torch.nn.functional.gelu:
            return "gelu_tanh" if kw.get("approximate") == "tanh" else "gelu_erf"
    return None


# ------------------------------------------------------------------- layers

def _weight(layer) -> Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
    """(weight as [out, in], bias) of a plain linear layer: nn.Linear (any
    subclass that keeps Linear's forward, e.g. TiledLinear), transformers'
    Conv1D, whose weight is [in, out] (read transposed, no copy), or
    transformers' FalconLinear without a bias."""
    if isinstance(layer, nn.Linear) and (type(layer).forward is nn.Linear.forward or _is_tiled(layer)):
        if _is_tiled(layer) and getattr(layer, "activation", "none") != "none":
            return None
        return layer.weight, layer.bias
    if is_conv1d(layer):
        return layer.weight.t(), layer.bias
    if is_plain_falcon(layer):  # x @ weight.T, as Linear's (with a bias it rounds the product before adding it)
        return layer.weight, None
    return None


def _is_tiled(layer) -> bool:
    return isinstance(layer, TiledLinear)


def _dropout_inactive(d) -> bool:
    return d is None or isinstance(d, nn.Identity) or (isinstance(d, nn.Dropout) and (d.p == 0 or not d.training))


def _apply(mod, x):
    return x if mod is None else mod(x)


# ------------------------------------------------------------- fused forwards
# Each is a forward for the block's own class, reading the block's own
# children by the names its library gives them.

def _mlp_forward(names):
    fc1, act, fc2, extra = names

    def forward(self, x):
        w1, b1 = _weight(getattr(self, fc1))
        h = linear_act(x, w1, b1, self._ttg_act)
        for n in extra:  # dropout / norm between the layers (timm)
            h = getattr(self, n)(h)
        w2, b2 = _weight(getattr(self, fc2))
        out = linear(h, w2, b2)
        for n in ("drop2", "dropout"):
            if n in self._modules:
                out = self._modules[n](out)
        return out

    return forward


def _gated_forward(gate, up, down, extra):
    def forward(self, x):
        wg, bg = _weight(getattr(self, gate))
        wu, bu = _weight(getattr(self, up))
        h = gated_linear(x, wg, wu, self._ttg_act, bg, bu)
        for n in extra:
            h = getattr(self, n)(h)
        wd, bd = _weight(getattr(self, down))
        out = linear(h, wd, bd)
        if "drop2" in self._modules:
            out = self._modules["drop2"](out)
        return out

    return forward


def _chunked_gated(x, layer, gate_first, act):
    """act(gate) * up where one linear layer's output holds both, chunked in
    two along the features (gate first or last): views of its one weight."""
    w, b = _weight(layer)
    half = w.shape[0] // 2
    first, second = (slice(0, half), slice(half, 2 * half))
    g, u = (first, second) if gate_first else (second, first)
    return gated_linear(x, w[g], w[u], act, None if b is None else b[g], None if b is None else b[u])


def _glu_forward(self, x):
    # timm GluMlp: the gate is fc1's second half (gate_last) or its first.
    h = _chunked_gated(x, self.fc1, not self.gate_last, self._ttg_act)
    h = self.drop1(h)
    h = self.norm(h)
    w2, b2 = _weight(self.fc2)
    return self.drop2(linear(h, w2, b2))


def _phi3_forward(self, hidden_states):
    # transformers Phi3MLP: gate_up_proj's output chunked, the gate first.
    h = _chunked_gated(hidden_states, self.gate_up_proj, True, self._ttg_act)
    wd, bd = _weight(self.down_proj)
    return linear(h, wd, bd)


def _to_weight_dtype(h, layer):
    # transformers' T5 blocks cast to wo's dtype (kept in float32 in some
    # checkpoints) unless wo is int8.
    w = layer.weight
    return h.to(w.dtype) if h.dtype != w.dtype and w.dtype != torch.int8 else h


def _t5_forward(self, hidden_states):
    # transformers T5DenseActDense: wi -> act -> dropout -> wo.
    w, b = _weight(self.wi)
    h = self.dropout(linear_act(hidden_states, w, b, self._ttg_act))
    wo, bo = _weight(self.wo)
    return linear(_to_weight_dtype(h, self.wo), wo, bo)


def _t5_gated_forward(self, hidden_states):
    # transformers T5DenseGatedActDense: act(wi_0 x) * wi_1 x -> dropout -> wo.
    wg, bg = _weight(self.wi_0)
    wu, bu = _weight(self.wi_1)
    h = self.dropout(gated_linear(hidden_states, wg, wu, self._ttg_act, bg, bu))
    wo, bo = _weight(self.wo)
    return linear(_to_weight_dtype(h, self.wo), wo, bo)


def _sequential_mlp_forward(self, x):
    # torchvision MLP / MLPBlock (ViT, Swin): Linear, act, Dropout, Linear, Dropout.
    w1, b1 = _weight(self[0])
    h = self[2](linear_act(x, w1, b1, self._ttg_act))
    w2, b2 = _weight(self[3])
    return self[4](linear(h, w2, b2))


def _starcoder2_forward(self, hidden_states):
    # transformers Starcoder2MLP: c_fc -> act -> c_proj -> functional dropout.
    w1, b1 = _weight(self.c_fc)
    w2, b2 = _weight(self.c_proj)
    out = linear(linear_act(hidden_states, w1, b1, self._ttg_act), w2, b2)
    return nn.functional.dropout(out, p=self.residual_dropout, training=self.training)


def _intermediate_forward(self, hidden_states):
    w, b = _weight(self.dense)
    return linear_act(hidden_states, w, b, self._ttg_act)


def _output_forward(self, hidden_states, input_tensor):
    w, b = _weight(self.dense)
    if _dropout_inactive(self.dropout):
        h = linear_act(hidden_states, w, b, "none", input_tensor)
    else:
        h = self.dropout(linear(hidden_states, w, b)) + input_tensor
    ln = getattr(self, "LayerNorm", None)
    return ln(h) if ln is not None else h


# ------------------------------------------------------------------ matching

@dataclass
class _Rule:
    forward: Callable
    act: Callable[[nn.Module], Optional[str]]  # the block's activation name, None: unsupported
    layers: Tuple[str, ...]  # linear children that must be plain


def _act_of(attr):
    return lambda m: module_activation(getattr(m, attr, None))


_GATED_HF = re.compile(r"^(Llama|Mistral|Mixtral|Qwen\d*|Qwen\d+Moe|Gemma\d*|Granite|Olmo\d*|Cohere|Phi|Yi|"
                       r"InternLM\d*|Ministral|Starcoder\d*|Helium|Glm\d*|SmolLM\d*|DeepseekV\d)MLP$")


# transformers' two-layer MLPs whose forward is fc2(act(fc1(x))), then the
# block's `dropout` where it has one (GPT-2): class name -> (first layer,
# activation, second layer).
_TWO_LAYER_HF = {
    "GPT2MLP": ("c_fc", "act", "c_proj"),  # (Conv1D layers)
    "ViTMLP": ("fc1", "activation_fn", "fc2"),
    "PhiMLP": ("fc1", "activation_fn", "fc2"),
    "CLIPMLP": ("fc1", "activation_fn", "fc2"),
    "SiglipMLP": ("fc1", "activation_fn", "fc2"),
    "GPTNeoXMLP": ("dense_h_to_4h", "act", "dense_4h_to_h"),
    "FalconMLP": ("dense_h_to_4h", "act", "dense_4h_to_h"),
}


def _rule_for(mod: nn.Module) -> Tuple[Optional[_Rule], Optional[str]]:
    """(rule, None) for a recognised block; (None, reason) for an MLP-like
    block that is not; (None, None) for anything else."""
    name = type(mod).__name__
    kids = mod._modules
    if getattr(mod, "_ttg_fused", False):
        return None, None
    if name in ("Mlp",) and {"fc1", "act", "fc2"} <= kids.keys():
        extra = tuple(n for n in ("drop1", "norm") if n in kids)
        return _Rule(_mlp_forward(("fc1", "act", "fc2", extra)), _act_of("act"), ("fc1", "fc2")), None
    if name == "SwiGLU" and {"fc1_g", "fc1_x", "act", "fc2"} <= kids.keys():
        extra = tuple(n for n in ("drop1", "norm") if n in kids)
        return _Rule(_gated_forward("fc1_g", "fc1_x", "fc2", extra), _act_of("act"), ("fc1_g", "fc1_x", "fc2")), None
    if name == "GluMlp" and {"fc1", "act", "fc2"} <= kids.keys():
        if getattr(mod, "chunk_dim", -1) != -1:
            return None, "GluMlp chunked along a dim other than the last"
        return _Rule(_glu_forward, _act_of("act"), ("fc1", "fc2")), None
    if {"gate_proj", "up_proj", "down_proj"} <= kids.keys() and _GATED_HF.match(name):
        return _Rule(_gated_forward("gate_proj", "up_proj", "down_proj", ()), _act_of("act_fn"),
                     ("gate_proj", "up_proj", "down_proj")), None
    if name in ("MLP", "MLPBlock") and isinstance(mod, nn.Sequential) and len(mod) == 5 \
            and type(mod[2]) is nn.Dropout and type(mod[4]) is nn.Dropout:
        return _Rule(_sequential_mlp_forward, _act_of("1"), ("0", "3")), None
    if name == "Phi3MLP" and {"gate_up_proj", "down_proj"} <= kids.keys():
        return _Rule(_phi3_forward, _act_of("activation_fn"), ("gate_up_proj", "down_proj")), None
    if name == "T5DenseGatedActDense" and {"wi_0", "wi_1", "wo", "dropout"} <= kids.keys():
        return _Rule(_t5_gated_forward, _act_of("act"), ("wi_0", "wi_1", "wo")), None
    if name == "T5DenseActDense" and {"wi", "wo", "dropout"} <= kids.keys():
        return _Rule(_t5_forward, _act_of("act"), ("wi", "wo")), None
    if name == "Starcoder2MLP" and {"c_fc", "c_proj"} <= kids.keys() and hasattr(mod, "residual_dropout"):
        return _Rule(_starcoder2_forward, _act_of("act"), ("c_fc", "c_proj")), None
    if name in _TWO_LAYER_HF and set(_TWO_LAYER_HF[name][::2]) <= kids.keys():
        fc1, act, fc2 = _TWO_LAYER_HF[name]
        return _Rule(_mlp_forward((fc1, act, fc2, ())), _act_of(act), (fc1, fc2)), None
    if name in ("BertIntermediate", "ViTIntermediate", "RobertaIntermediate") and "dense" in kids:
        return _Rule(_intermediate_forward, _act_of("intermediate_act_fn"), ("dense",)), None
    if name in ("BertOutput", "ViTOutput", "RobertaOutput") and "dense" in kids:
        return _Rule(_output_forward, lambda m: "none", ("dense",)), None
    if re.search(r"(mlp|feedforward|ffn|intermediate)$", name, re.IGNORECASE):
        return None, f"unknown MLP block {type(mod).__module__}.{name}"
    return None, None


_FUSED_CLASSES: Dict[Tuple[type, Callable], type] = {}


def _fused_class(cls: type, forward: Callable) -> type:
    key = (cls, forward.__code__)
    if key not in _FUSED_CLASSES:
        _FUSED_CLASSES[key] = type(
            "Fused" + cls.__name__, (cls,),
            {"forward": forward, "_ttg_fused": True, "_ttg_original": cls, "__module__": __name__},
        )
    return _FUSED_CLASSES[key]


@dataclass
class FuseReport:
    """What fuse_mlps did: qualified names of the fused blocks (with their
    activation) and of the MLP-like blocks left alone (with the reason)."""

    fused: List[Tuple[str, str]] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fused)


def fuse_mlps(model: nn.Module, warn: bool = True) -> FuseReport:
    """Make every recognised MLP block of `model` (in place) run on the fused
    ops; returns a FuseReport.  Blocks it does not know are left as they are,
    listed in the report and, with `warn`, in a warning.  Composes with
    swap_linear in either order."""
    report = FuseReport()
    for qual, mod in model.named_modules():
        rule, reason = _rule_for(mod)
        if rule is None:
            if reason is not None:
                report.skipped.append((qual, reason))
            continue
        act = rule.act(mod)
        if act is None:
            report.skipped.append((qual, f"unsupported activation in {type(mod).__name__}"))
            continue
        bad = [n for n in rule.layers if _weight(getattr(mod, n, None)) is None]
        if bad:
            report.skipped.append((qual, f"{type(mod).__name__}: not a plain linear layer: {', '.join(bad)}"))
            continue
        fwd = rule.forward
        mod.__class__ = _fused_class(type(mod), fwd)
        mod._ttg_act = act
        report.fused.append((qual, act))
    if warn and report.skipped:
        warnings.warn(
            "fuse_mlps left these blocks unfused: " + "; ".join(f"{n or '<model>'}: {r}" for n, r in report.skipped),
            stacklevel=2,
        )
    return report


def unfuse_mlps(model: nn.Module) -> nn.Module:
    """Undo fuse_mlps: every fused block gets its own class back."""
    for mod in model.modules():
        orig = type(mod).__dict__.get("_ttg_original")
        if orig is not None:
            mod.__class__ = orig
            mod.__dict__.pop("_ttg_act", None)
    return model
