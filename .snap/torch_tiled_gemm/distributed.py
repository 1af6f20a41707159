"""tiled.gemm / tiled.linear under torch.distributed: DTensor sharding rules, tensor-parallel helpers.

DDP and FSDP2 need nothing from this module: TiledLinear is an nn.Linear with
ordinary Parameters, DDP all-reduces their gradients, and FSDP2 all-gathers
them into plain tensors before each forward, so tiled.gemm only ever sees
plain local tensors there.

Tensor parallelism (DTensor) is different: DTensor must know how tiled::gemm
and tiled::linear propagate shardings.  `register_sharding_rules()` registers
those rules through torch's own
`torch.distributed.tensor.experimental.register_sharding`.  For
C = A @ B (+ bias), per mesh dimension:

    output        a             b             bias         idea
    Replicate     Replicate     Replicate     Replicate    no parallelism
    Shard(M)      Shard(M)      Replicate     Replicate    rows of A
    Shard(N)      Replicate     Shard(N)      Shard(0)     columns of B (ColwiseParallel)
    Partial       Shard(K)      Shard(K)      Partial      contraction dim (RowwiseParallel)
    Partial       Partial       Replicate     Partial      linearity in a
    Partial       Replicate     Partial       Partial      linearity in b
    Shard(0)      Shard(0)|R    Shard(0)|R    Replicate    batch dim (3-D operands only)

where M/K/N are the operands' last two dims, so a 3-D operand's Shard(1)
is "M" and Shard(2) is "K".  The bias is never added once per rank to a
partial sum: where the output is Partial the bias is Partial too, so the
ranks' local biases add up to the true bias (DTensor turns a Replicate bias
into Partial with no communication).  Without a bias the bias column is
None.  The autograd backward calls tiled::gemm on transposed views of the
same DTensors; a transpose moves the shard dim with it (Shard(0) of W is
Shard(1) of W^T), so the backward's layouts are rows of this same table.
On a multi-dimensional mesh DTensor combines the rows per mesh dimension.

tiled::linear(x [..., in], weight [out, in], bias [out]) (what TiledLinear
calls) gets the same table in its own terms:

    output        x             weight        bias
    Replicate     Replicate     Replicate     Replicate
    Shard(d)      Shard(d)      Replicate     Replicate    any leading (token) dim d of x
    Shard(-1)     Replicate     Shard(0)      Shard(0)     out features (ColwiseParallel)
    Partial       Shard(-1)     Shard(1)      Partial      in features (RowwiseParallel)
    Partial       Partial       Replicate     Partial
    Partial       Replicate     Partial       Partial

Its backward is tiled::gemm on views (grad @ W, grad^T @ x), covered above.

Limit of older torch, not of these rules: both C++ backwards flatten
token dims into one (x.reshape(-1, in): linear's x and grad, gemm's a and
grad when b is a shared 2-D matrix), and that aten.view runs on the saved
DTensors.  Flattening [B, S, ...] sharded on S (a token dim other than the
first) needs DTensor's strided-shard view support: torch 2.14 has it, torch
2.11 raises "Sharding propagation failed for aten.view.default" in the
backward.  The forward is fine on both.  No rule can avoid it: autograd
saves the operands as the caller passed them, before DTensor applies any
strategy, so dropping the Shard(S) rows would only add a redistribution to
the forward and still fail in the backward.  On such a torch, redistribute
a sequence-sharded input to Replicate before the op when gradients are
needed, with `replicate_contiguous(x)` rather than `x.redistribute(...)`:
torch 2.11's all-gather of an unevenly sharded dim leaves a narrowed,
non-contiguous local tensor under contiguous global metadata, so the
backward's reshape becomes a view on the local tensor and fails ("view size
is not compatible with input tensor's size and stride").
docs/distributed.md says more.

Optimizers: after parallelize_module, the Linears' parameters are DTensors
and the rest (norms, embeddings not in the plan) plain tensors.  The foreach
optimizer kernels (the default for CUDA parameters) refuse such a mix ("got
mixed torch.Tensor and DTensor"); `optimizer_param_groups(model)` puts the
two kinds in separate parameter groups, which keeps foreach.

Importing this module never fails: without torch.distributed, or on a
torch without register_sharding, `register_sharding_rules()` returns False.
"""
import importlib
import importlib.abc
import importlib.util
import sys
import threading
import warnings
from typing import Callable, Dict, Iterable, Optional, Union

import torch
from torch import nn

from . import ops  # noqa: F401  (the ops must exist before rules are registered for them)

__all__ = [
    "register_sharding_rules",
    "sharding_rules_registered",
    "install_lazy_registration",
    "tensor_parallel_plan",
    "replicate_contiguous",
    "optimizer_param_groups",
]

_lock = threading.RLock()  # re-entrant: the import below may run the hook, which registers
_registered = False


def _import_api():
    """(register_sharding, Replicate, Shard, Partial) from whichever namespace this torch has, or None."""
    if not (hasattr(torch, "distributed") and torch.distributed.is_available()):
        return None
    for exp_mod, pl_mod in (
        ("torch.distributed.tensor.experimental", "torch.distributed.tensor"),  # torch >= 2.5
        ("torch.distributed._tensor.experimental", "torch.distributed._tensor"),  # older spelling
    ):
        try:
            exp = importlib.import_module(exp_mod)
            pl = importlib.import_module(pl_mod)
            return exp.register_sharding, pl.Replicate, pl.Shard, pl.Partial
        except (ImportError, AttributeError):
            continue
    return None


def _make_rules(Replicate, Shard, Partial):
    def gemm_sharding(a, b, bias=None):
        # a, b, bias: DTensorSpecs (bias None when absent).  Returns
        # (output placements, input placements) pairs, one per strategy.
        R, P = Replicate(), Partial()
        da, db = a.ndim, b.ndim
        do = max(da, db)
        with_bias = bias is not None

        def strategy(out, pa, pb, pbias):
            return ([out], [pa, pb, pbias if with_bias else None])

        rules = [
            strategy(R, R, R, R),
            strategy(Shard(do - 2), Shard(da - 2), R, R),  # M: rows of A
            strategy(Shard(do - 1), R, Shard(db - 1), Shard(0)),  # N: columns of B, bias split with them
            strategy(P, Shard(da - 1), Shard(db - 2), P),  # K: partial sums, bias partial
            strategy(P, P, R, P),  # linear in a
            strategy(P, R, P, P),  # linear in b
        ]
        if do == 3:  # batch dim; a 2-D operand is shared by every batch, so replicated
            rules.append(strategy(Shard(0), Shard(0) if da == 3 else R, Shard(0) if db == 3 else R, R))
        return rules

    def linear_sharding(x, weight, bias=None):
        # tiled::linear: x [..., in] @ weight[out, in]^T + bias[out]; the
        # output has x's leading dims and `out` last.
        R, P = Replicate(), Partial()
        nx = x.ndim
        with_bias = bias is not None

        def strategy(out, px, pw, pbias):
            return ([out], [px, pw, pbias if with_bias else None])

        rules = [
            strategy(R, R, R, R),
            strategy(Shard(nx - 1), R, Shard(0), Shard(0)),  # out features (ColwiseParallel)
            strategy(P, Shard(nx - 1), Shard(1), P),  # in features: partial sums (RowwiseParallel)
            strategy(P, P, R, P),  # linear in x
            strategy(P, R, P, P),  # linear in weight
        ]
        for d in range(nx - 1):  # any token dim of x (batch, sequence, ...)
            rules.append(strategy(Shard(d), Shard(d), R, R))
        return rules

    return gemm_sharding, linear_sharding


def register_sharding_rules() -> bool:
    """Register the DTensor sharding rules of tiled::gemm and tiled::linear (idempotent, thread-safe).

    Returns True when the rule is registered, False when this torch has no
    torch.distributed or no register_sharding (a warning says which).
    """
    global _registered
    with _lock:
        if _registered:
            return True
        api = _import_api()
        if api is None:
            warnings.warn(
                "torch_tiled_gemm: torch.distributed / DTensor register_sharding unavailable in torch "
                f"{torch.__version__}; tiled.gemm has no DTensor sharding rule (DDP/FSDP2 are unaffected)",
                stacklevel=2,
            )
            return False
        if _registered:  # the import above ran the lazy hook, which registered already
            return True
        register_sharding, Replicate, Shard, Partial = api
        gemm_rule, linear_rule = _make_rules(Replicate, Shard, Partial)
        register_sharding(torch.ops.tiled.gemm.default)(gemm_rule)
        if hasattr(torch.ops.tiled, "linear"):
            register_sharding(torch.ops.tiled.linear.default)(linear_rule)
        _registered = True
        return True


def sharding_rules_registered() -> bool:
    return _registered


# ---------------------------------------------------------------------------
# Lazy registration: importing torch.distributed.tensor costs about a second,
# so `import torch_tiled_gemm` does not do it.  Instead the rule is registered
# as soon as torch.distributed.tensor is (or already was) imported, whichever
# order the user's imports come in.

_DTENSOR_MODULE = "torch.distributed.tensor"


def _register_quietly():
    try:
        register_sharding_rules()
    except Exception as e:  # never break the user's import of torch.distributed.tensor
        warnings.warn(f"torch_tiled_gemm: could not register the DTensor sharding rule: {e!r}")


class _AfterDTensorImport(importlib.abc.MetaPathFinder):
    """One-shot import hook: once torch.distributed.tensor has executed, register the rule."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _DTENSOR_MODULE:
            return None
        _remove_hook()
        spec = importlib.util.find_spec(fullname)  # the normal finders, now that we are out of the way
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register_quietly()

        spec.loader.exec_module = exec_then_register  # this spec's own loader instance
        return spec


_hook: Optional[_AfterDTensorImport] = None


def _remove_hook():
    global _hook
    with _lock:
        if _hook is not None and _hook in sys.meta_path:
            sys.meta_path.remove(_hook)
        _hook = None


def install_lazy_registration() -> None:
    """Register now if torch.distributed.tensor is loaded, else when it gets imported."""
    global _hook
    if _registered or not (hasattr(torch, "distributed") and torch.distributed.is_available()):
        return
    if _DTENSOR_MODULE in sys.modules:
        _register_quietly()
        return
    with _lock:
        if _hook is None:
            _hook = _AfterDTensorImport()
            sys.meta_path.insert(0, _hook)


# ---------------------------------------------------------------------------
# Tensor-parallel plan

NameMatch = Union[Iterable[str], Callable[[str, nn.Linear], bool]]


def _matcher(spec: Optional[NameMatch]) -> Optional[Callable[[str, nn.Linear], bool]]:
    if spec is None:
        return None
    if callable(spec):
        return spec
    names = set(spec)
    return lambda fqn, mod: fqn in names or fqn.rsplit(".", 1)[-1] in names


def tensor_parallel_plan(
    model: nn.Module, colwise: Optional[NameMatch] = None, rowwise: Optional[NameMatch] = None
) -> Dict[str, object]:
    """A `parallelize_module` plan {fqn: ColwiseParallel() | RowwiseParallel()} for `model`'s Linears.

    Works for nn.Linear and TiledLinear alike (TiledLinear is an nn.Linear).
    `colwise` / `rowwise` pick layers by name (full FQN or last component,
    e.g. {"up", "gate"} / {"down"}) or by a predicate (fqn, module) -> bool.
    With neither given, the Megatron MLP pairing is inferred: inside each
    module, a Linear followed (in registration order) by a Linear whose
    in_features equals its out_features becomes a Colwise -> Rowwise pair,
    so the activation between them stays sharded and only the second
    layer's output is all-reduced.  Linears not in the plan stay replicated.
    """
    register_sharding_rules()
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan: Dict[str, object] = {}
    col, row = _matcher(colwise), _matcher(rowwise)
    if col is not None or row is not None:
        for fqn, mod in model.named_modules():
            if not isinstance(mod, nn.Linear):
                continue
            if col is not None and col(fqn, mod):
                plan[fqn] = ColwiseParallel()
            elif row is not None and row(fqn, mod):
                plan[fqn] = RowwiseParallel()
        return plan

    for parent_name, parent in model.named_modules():
        children = [(n, m) for n, m in parent.named_children() if isinstance(m, nn.Linear)]
        i = 0
        while i + 1 < len(children):
            (n1, m1), (n2, m2) = children[i], children[i + 1]
            if m1.out_features == m2.in_features:
                prefix = f"{parent_name}." if parent_name else ""
                plan[prefix + n1] = ColwiseParallel()
                plan[prefix + n2] = RowwiseParallel()
                i += 2
            else:
                i += 1
    return plan


# ---------------------------------------------------------------------------
# Helpers for torch versions / optimizers


def replicate_contiguous(t):
    """DTensor `t` redistributed to Replicate on every mesh dim, its local tensor contiguous (differentiable).

    The workaround for a sequence-sharded input on a torch whose DTensor
    cannot flatten it in the backward (2.11): `tiled.linear(replicate_contiguous(x), w, b)`.
    Plain `x.redistribute(mesh, [Replicate()])` is not enough there: for an
    uneven shard, torch 2.11 un-pads the gathered tensor with a narrow, so the
    local tensor is non-contiguous while the DTensor's global strides say
    contiguous; the backward's reshape then decomposes to a view that the
    local tensor cannot take.  Here the local tensor is made contiguous and
    re-wrapped, so metadata and data agree.  The gradient flows back to `t`
    in its own placements.  A plain tensor is returned unchanged.
    """
    from torch.distributed.tensor import DTensor, Replicate

    if not isinstance(t, DTensor):
        return t
    mesh = t.device_mesh
    placements = [Replicate()] * mesh.ndim
    r = t.redistribute(mesh, placements)
    local = r.to_local()
    if local.is_contiguous() and tuple(local.stride()) == tuple(r.stride()):
        return r
    return DTensor.from_local(local.contiguous(), mesh, placements, run_check=False)


def optimizer_param_groups(params, **group_options):
    """Parameter groups for torch.optim that never mix DTensor and plain-tensor parameters.

    `params` is a module or an iterable of parameters.  After
    `parallelize_module`, parameters of layers in the plan are DTensors and
    the others (norms, ...) plain tensors.  The foreach kernels that torch's
    optimizers use by default for CUDA parameters raise "got mixed
    torch.Tensor and DTensor" on such a list; one group per kind keeps each
    foreach call homogeneous (and keeps foreach).  `group_options` (lr=...,
    weight_decay=...) go into every group.  Empty groups are left out.
    """
    from torch.distributed.tensor import DTensor

    if isinstance(params, nn.Module):
        params = params.parameters()
    dtensors, plain = [], []
    for p in params:
        (dtensors if isinstance(p, DTensor) else plain).append(p)
    return [dict(group_options, params=ps) for ps in (dtensors, plain) if ps]


# Importing this module (torch_tiled_gemm/__init__.py does) arms the lazy registration.
install_lazy_registration()
