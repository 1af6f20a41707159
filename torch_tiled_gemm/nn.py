"""TiledLinear, a drop-in nn.Linear, and swap_linear for whole models."""
from typing import Callable, Optional

import torch
from torch import nn

from .functional import activation_name, linear, linear_act


class TiledLinear(nn.Linear):
    """nn.Linear whose matmul is tiled.gemm.

    Same constructor, parameters, initialisation and state_dict as nn.Linear
    (it is a subclass), so nn.Linear checkpoints load into it and anything that
    accepts nn.Linear (tensor-parallel styles, FSDP, quantisation filters)
    accepts it too.

    `activation` ("relu", "gelu", "gelu_tanh", "silu"; default none) runs in
    the GEMM's epilogue: act(x @ W^T + b) in one kernel.  It is a module
    attribute, not state: checkpoints are nn.Linear's.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 activation: Optional[str] = None) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation_name(activation)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        act = getattr(self, "activation", "none")
        if act != "none":
            return linear_act(input, self.weight, self.bias, act)
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        act = getattr(self, "activation", "none")
        return super().extra_repr() + ("" if act == "none" else f", activation={act}")

    @classmethod
    def from_linear(cls, lin: nn.Linear) -> "TiledLinear":
        """A TiledLinear that shares `lin`'s Parameter objects (no copy)."""
        new = cls.__new__(cls)
        # Module state is plain dicts (parameters, buffers, hooks): copy each
        # dict so the two modules stay independent, but keep the values, so
        # the Parameters are the same objects.
        new.__dict__.update({k: (v.copy() if isinstance(v, dict) else v) for k, v in lin.__dict__.items()})
        new.activation = getattr(lin, "activation", "none")
        return new


def is_conv1d(mod: nn.Module) -> bool:
    """transformers' Conv1D (GPT-2's layers): a linear layer whose weight is
    [in, out] (x @ weight + bias), plain or swapped."""
    w = getattr(mod, "weight", None)
    return (type(mod).__name__ == "Conv1D" or getattr(type(mod), "_ttg_conv1d", False)) and hasattr(mod, "nf") \
        and isinstance(w, torch.Tensor) and w.dim() == 2


def is_plain_falcon(mod: nn.Module) -> bool:
    """transformers' FalconLinear without a bias: Linear's product."""
    return isinstance(mod, nn.Linear) and type(mod).__name__ == "FalconLinear" and mod.bias is None


def _conv1d_forward(self, x: torch.Tensor) -> torch.Tensor:
    return linear(x, self.weight.t(), self.bias)  # the [in, out] weight read transposed, no copy


_TILED_CONV1D = {}


def _tiled_conv1d_class(cls: type) -> type:
    if cls not in _TILED_CONV1D:
        _TILED_CONV1D[cls] = type("Tiled" + cls.__name__, (cls,), {
            "forward": _conv1d_forward, "_ttg_conv1d": True, "__module__": __name__})
    return _TILED_CONV1D[cls]


def swap_linear(model: nn.Module, filter: Optional[Callable[[str, nn.Module], bool]] = None) -> nn.Module:
    """Replace every nn.Linear in `model` (in place) by a TiledLinear sharing its parameters.

    `filter(qualified_name, module)` may return False to keep a layer as is.
    The model itself is returned (replaced too if it is a bare nn.Linear).
    Optimizers built before the swap keep working: the Parameter objects are
    the same.  Subclasses of nn.Linear with a forward of their own (LoRA
    layers, quantised layers) are left alone, but for transformers'
    FalconLinear without a bias (Linear's product; with a bias it rounds
    before adding it), which becomes a TiledLinear too.  transformers'
    Conv1D (GPT-2's layers, weight [in, out]) changes class in place to a
    subclass whose forward is the tiled GEMM on its weight read transposed:
    the same module, Parameters and state_dict.
    """

    def want(name: str, mod: nn.Module) -> bool:
        return (type(mod) is nn.Linear or is_plain_falcon(mod)) and (filter is None or filter(name, mod))

    if want("", model):
        return TiledLinear.from_linear(model)
    for name, mod in list(model.named_modules()):
        if is_conv1d(mod) and not getattr(type(mod), "_ttg_conv1d", False) and (filter is None or filter(name, mod)):
            mod.__class__ = _tiled_conv1d_class(type(mod))
        for child_name, child in list(mod.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if want(full, child):
                setattr(mod, child_name, TiledLinear.from_linear(child))
    return model
