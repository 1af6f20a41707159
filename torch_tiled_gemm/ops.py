"""Loads the compiled operators and registers what PyTorch's stable ABI
leaves to Python: autograd, autocast and the fake (meta) kernels.

The schemas and the CPU / CUDA kernels live in C++ (csrc/ops.cpp,
csrc/cuda/gemm_cuda.cpp), built on the stable ABI so one binary serves every
torch from 2.10 on.  Here:

- autograd: the backward of every op is the same ops on transposed views
  (no copies), recorded through the dispatcher, so double backward works;
- autocast: like aten::mm, the ops run in the autocast dtype;
- fake kernels: output shape and dtype with the same argument checks, for
  torch.compile to trace the ops without running them.
"""
import functools
import threading

import torch

from . import _C  # noqa: F401  (runs the STABLE_TORCH_LIBRARY registrations)

_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# c10's names for dtypes, as aten's messages print them ("Long", "Float").
_SCALAR_TYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}


def _scalar_type(dtype):
    return _SCALAR_TYPE_NAMES.get(dtype, str(dtype))


def _shape(t):
    return "x".join(str(s) for s in t.shape)


def _check_args(a, b, bias, op):
    torch._check(a.dim() in (2, 3), lambda: f"{op}: a must be 2-D [M, K] or 3-D [B, M, K], got {a.dim()}-D")
    torch._check(b.dim() in (2, 3), lambda: f"{op}: b must be 2-D [K, N] or 3-D [B, K, N], got {b.dim()}-D")
    torch._check(
        a.shape[-1] == b.shape[-2],
        lambda: f"{op}: a and b shapes cannot be multiplied ({_shape(a)} and {_shape(b)})",
    )
    if a.dim() == 3 and b.dim() == 3:
        torch._check(
            a.shape[0] == b.shape[0],
            lambda: f"{op}: batch sizes of a and b differ ({_shape(a)} and {_shape(b)})",
        )
    torch._check(
        a.dtype == b.dtype,
        lambda: f"{op}: expected a and b to have the same dtype, but got: {_scalar_type(a.dtype)} != "
        f"{_scalar_type(b.dtype)}",
    )
    torch._check(
        a.dtype in _DTYPES,
        lambda: f"{op}: unsupported dtype {_scalar_type(a.dtype)} (supported: float32, float64, float16, bfloat16)",
    )
    torch._check(
        a.device == b.device,
        lambda: f"{op}: expected a and b on the same device, but got {a.device} and {b.device}",
    )
    n = b.shape[-1]
    if bias is not None:
        torch._check(
            bias.dim() == 1 and bias.shape[0] == n,
            lambda: f"{op}: bias must be 1-D of size N={n}, got shape {tuple(bias.shape)}",
        )
        torch._check(
            bias.dtype == a.dtype,
            lambda: f"{op}: bias dtype {_scalar_type(bias.dtype)} differs from the operands' dtype "
            f"{_scalar_type(a.dtype)}",
        )
    if a.dim() == 3:
        return (a.shape[0], a.shape[-2], n)
    if b.dim() == 3:
        return (b.shape[0], a.shape[-2], n)
    return (a.shape[-2], n)


@torch.library.register_fake("tiled::gemm")
def _gemm_fake(a, b, bias=None):
    return a.new_empty(_check_args(a, b, bias, "tiled.gemm"))


@torch.library.register_fake("tiled::linear")
def _linear_fake(x, weight, bias=None):
    torch._check(weight.dim() == 2, lambda: f"tiled.linear: weight must be 2-D, got shape {tuple(weight.shape)}")
    torch._check(x.dim() >= 1, lambda: "tiled.linear: input must be at least 1-D")
    torch._check(
        x.dtype == weight.dtype,
        lambda: f"tiled.linear: mat1 and mat2 must have the same dtype, but got {_scalar_type(x.dtype)} and "
        f"{_scalar_type(weight.dtype)}",
    )
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"tiled.linear: mat1 and mat2 shapes cannot be multiplied (... x {x.shape[-1]} and "
        f"{weight.shape[1]}x{weight.shape[0]})",
    )
    # The leading dims' product spelled out: reshape(-1, n) cannot infer the
    # -1 of an input with no elements.
    rows = 1
    for s in x.shape[:-1]:
        rows = rows * s
    _check_args(x.reshape(rows, x.shape[-1]), weight.t(), bias, "tiled.linear")
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.register_fake("tiled::gemm_ladder")
def _gemm_ladder_fake(a, b, step):
    return a.new_empty(_check_args(a, b, None, "tiled.gemm_ladder"))


ACTIVATIONS = ("none", "relu", "gelu_erf", "gelu_tanh", "silu")


def _check_act(act, op):
    torch._check(
        act in ACTIVATIONS,
        lambda: f"{op}: unknown activation '{act}' (choose one of: none, relu, gelu_erf, gelu_tanh, silu)",
    )


def _check_like_out(t, shape, name, like, op):
    if t is None:
        return
    torch._check(
        t.dim() == len(shape) and all(a == b for a, b in zip(t.shape, shape)),
        lambda: f"{op}: {name} must have the output's shape {tuple(shape)}, got {tuple(t.shape)}",
    )
    torch._check(
        t.dtype == like.dtype,
        lambda: f"{op}: {name} dtype {_scalar_type(t.dtype)} differs from the operands' dtype "
        f"{_scalar_type(like.dtype)}",
    )


@torch.library.register_fake("tiled::gemm_epilogue")
def _gemm_epilogue_fake(a, b, bias=None, act="none", mul=None, residual=None, save_pre=False):
    op = "tiled.gemm_epilogue"
    shape = _check_args(a, b, bias, op)
    _check_act(act, op)
    _check_like_out(mul, shape, "mul", a, op)
    _check_like_out(residual, shape, "residual", a, op)
    out = a.new_empty(shape)
    return out, (a.new_empty(shape) if save_pre else a.new_empty((0,)))


def _linear_shape(x, weight, op):
    torch._check(weight.dim() == 2, lambda: f"{op}: weight must be 2-D, got shape {tuple(weight.shape)}")
    torch._check(x.dim() >= 1, lambda: f"{op}: input must be at least 1-D")
    torch._check(
        x.dtype == weight.dtype,
        lambda: f"{op}: mat1 and mat2 must have the same dtype, but got {_scalar_type(x.dtype)} and "
        f"{_scalar_type(weight.dtype)}",
    )
    torch._check(
        x.shape[-1] == weight.shape[1],
        lambda: f"{op}: mat1 and mat2 shapes cannot be multiplied (... x {x.shape[-1]} and "
        f"{weight.shape[1]}x{weight.shape[0]})",
    )
    return (*x.shape[:-1], weight.shape[0])


def _check_bias(bias, n, like, op):
    if bias is None:
        return
    torch._check(
        bias.dim() == 1 and bias.shape[0] == n,
        lambda: f"{op}: bias must be 1-D of size N={n}, got shape {tuple(bias.shape)}",
    )
    torch._check(
        bias.dtype == like.dtype,
        lambda: f"{op}: bias dtype {_scalar_type(bias.dtype)} differs from the operands' dtype "
        f"{_scalar_type(like.dtype)}",
    )


def _plain(t):
    """A torch.Tensor or Parameter, no subclass (no mode or wrapper to respect)."""
    return type(t) is _Tensor or type(t) is _Parameter


def _plain_linear_args(x, weight, bias):
    """Whether (x, weight, bias) are plain tensors that F.linear takes, told
    with plain comparisons: the eager fast path before the torch._check
    calls (~1.5 us each on a fast CPU) that word the errors (and that a
    fake tensor's symbolic sizes need)."""
    return (
        _plain(x) and _plain(weight) and (bias is None or _plain(bias))
        and weight.dim() == 2 and x.dim() >= 1 and x.dtype == weight.dtype and x.shape[-1] == weight.shape[1]
        and (bias is None or (bias.dim() == 1 and bias.shape[0] == weight.shape[0] and bias.dtype == x.dtype))
    )


def _check_linear_act(x, weight, bias, act, residual):
    if residual is None and act in ACTIVATIONS and _plain_linear_args(x, weight, bias):
        return (*x.shape[:-1], weight.shape[0])
    op = "tiled.linear_act"
    shape = _linear_shape(x, weight, op)
    _check_bias(bias, weight.shape[0], x, op)
    _check_act(act, op)
    _check_like_out(residual, shape, "residual", x, op)
    return shape


@torch.library.register_fake("tiled::linear_act")
def _linear_act_fake(x, weight, bias=None, act="none", residual=None):
    return x.new_empty(_check_linear_act(x, weight, bias, act, residual))


def _check_gated_linear(x, w_gate, w_up, act, b_gate, b_up):
    if (act in ACTIVATIONS and _plain_linear_args(x, w_gate, b_gate) and _plain_linear_args(x, w_up, b_up)
            and w_gate.shape[0] == w_up.shape[0]):
        return (*x.shape[:-1], w_gate.shape[0])
    op = "tiled.gated_linear"
    shape = _linear_shape(x, w_gate, op)
    _linear_shape(x, w_up, op)
    torch._check(
        w_gate.shape[0] == w_up.shape[0],
        lambda: f"{op}: w_gate and w_up must have the same number of rows, got {tuple(w_gate.shape)} and "
        f"{tuple(w_up.shape)}",
    )
    _check_bias(b_gate, w_gate.shape[0], x, op)
    _check_bias(b_up, w_up.shape[0], x, op)
    _check_act(act, op)
    return shape


@torch.library.register_fake("tiled::gated_linear")
def _gated_linear_fake(x, w_gate, w_up, act="silu", b_gate=None, b_up=None):
    return x.new_empty(_check_gated_linear(x, w_gate, w_up, act, b_gate, b_up))


@torch.library.register_fake("tiled::gated_act_backward")
def _gated_act_backward_fake(grad, gate, up, act):
    op = "tiled.gated_act_backward"
    _check_act(act, op)
    for t in (gate, up):
        torch._check(t.shape == grad.shape, lambda: f"{op}: gate and up must have grad's shape {tuple(grad.shape)}")
        torch._check(t.dtype == grad.dtype, lambda: f"{op}: gate and up must have grad's dtype {grad.dtype}")
    return torch.empty_like(grad, memory_format=torch.contiguous_format), torch.empty_like(
        grad, memory_format=torch.contiguous_format
    )


@torch.library.register_fake("tiled::gated_act_backward_")
def _gated_act_backward_inplace_fake(grad, gate, up, act):
    _gated_act_backward_fake(grad, gate, up, act)


# ---------------------------------------------------------------------------
# Autograd.  Each op's Autograd kernel is a plain function: when no input
# needs a gradient (inference, frozen weights, no_grad) it goes straight to
# the backend kernel; otherwise through an autograd.Function whose backward
# calls the ops again (through the dispatcher, so a double backward records
# them too).  Hand-written rather than torch.library.register_autograd: the
# no-gradient path is a few microseconds shorter per call.

_LIB = torch.library.Library("tiled", "FRAGMENT")
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_grad_enabled = torch.is_grad_enabled
_below_autograd = torch._C._AutoDispatchBelowAutograd

_gemm = torch.ops.tiled.gemm.default
_linear = torch.ops.tiled.linear.default
_gemm_epilogue = torch.ops.tiled.gemm_epilogue.default
_linear_act = torch.ops.tiled.linear_act.default
_gated_linear = torch.ops.tiled.gated_linear.default
_gated_act_backward = torch.ops.tiled.gated_act_backward.default
_gated_act_backward_ = torch.ops.tiled.gated_act_backward_.default
_gemm_handle = _gemm._handle
_linear_handle = _linear._handle
_gemm_redispatch = _gemm_handle.redispatch_boxed
_linear_redispatch = _linear_handle.redispatch_boxed
_call_boxed = torch._C._dispatch_call_boxed


# The C++ side's allocation failure on a GPU (csrc/torch_stable.h): the
# stable ABI carries every error back as a RuntimeError, so torch's
# OutOfMemoryError is raised again here, for callers that catch it (batch
# size finders, retry loops).  Only where this file's Autograd kernels (or
# the direct path below) run: under inference_mode the op meets the
# RuntimeError itself.
_OOM = "tiled: CUDA out of memory"


def _reraise_oom(e):
    if _OOM in str(e):
        raise torch.OutOfMemoryError(str(e)) from None
    raise e


def _raising_torch_oom(fn):
    """`fn` with the C++ side's out of memory raised as torch's (_reraise_oom)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RuntimeError as e:
            _reraise_oom(e)

    return wrapped


def _needs_grad(*ts):
    if not _grad_enabled():
        return False
    for t in ts:
        if t is not None and t.requires_grad:
            return True
    return False


def _as_matrix(t):
    """[..., n] -> [rows, n], the leading dims' product spelled out (reshape(-1, n)
    cannot infer the -1 of a tensor with no elements)."""
    if t.dim() == 2:
        return t
    rows = 1
    for s in t.shape[:-1]:
        rows = rows * s
    return t.reshape(rows, t.shape[-1])


def _opt_matrix(t):
    return None if t is None else _as_matrix(t)


def _reduce_to(g, dim):
    """Sums a batched gradient down to the (broadcast) 2-D operand's shape."""
    return g.sum(0) if dim == 2 and g.dim() == 3 else g


def _activation(z, act):
    if act == "relu":
        return torch.relu(z)
    if act == "gelu_erf":
        return torch.nn.functional.gelu(z)
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(z, approximate="tanh")
    if act == "silu":
        return torch.nn.functional.silu(z)
    return z


def _bwd_gemm(a, b):
    """tiled.gemm(a, b) inside a backward.  With grad mode off (every
    backward but a create_graph one) the op's Autograd kernel would only pass
    the call on below autograd: plain tensors go there directly (one hop
    into a Python kernel fewer per GEMM; the same call, as direct() argues)."""
    if not _grad_enabled() and _plain(a) and _plain(b) and not _function_mode() and not _excluded(_AUTOGRAD):
        return _below_autograd_call(_gemm_handle, a, b, None)
    return _gemm(a, b)


def _column_sums(m):
    """m.sum(0) of a [tokens, features] gradient, as a GEMM with a row of
    ones: fp32 accumulation like torch's sum, which on a CUDA bfloat16
    [12608, 3072] took a temporary of 132 MB (H100, torch 2.11: the fused
    ViT-B MLP's peak memory in the backward, docs/fused.md)."""
    return _bwd_gemm(m.new_ones(1, m.shape[0]), m)[0]


def _grads_by_recompute(fn, inputs, needs, grad):
    """The fused ops' backward where a graph is recorded (create_graph: a
    double backward to come): fn, the op's unfused composite of
    differentiable ops, run again on the saved inputs, and differentiated
    with a graph.  (The one-node backward keeps the pre-activation only as
    a saved output, not connected to x and the weights, and torch's
    silu_backward has no derivative.)"""
    want = [t for t, n in zip(inputs, needs) if n and t is not None]
    with torch.enable_grad():
        out = fn(*inputs)
    got = iter(torch.autograd.grad(out, want, grad, create_graph=True, allow_unused=True))
    return [next(got) if n and t is not None else None for t, n in zip(inputs, needs)]


def _activation_backward(g, z, act):
    """d act(z) / dz * g, with torch's own backward ops."""
    aten = torch.ops.aten
    if act == "relu":
        return aten.threshold_backward(g, z, 0)
    if act == "gelu_erf":
        return aten.gelu_backward(g, z)
    if act == "gelu_tanh":
        return aten.gelu_backward(g, z, approximate="tanh")
    if act == "silu":
        return aten.silu_backward(g, z)
    return g


class _GemmFn(torch.autograd.Function):
    # grad_a = grad @ b^T, grad_b = a^T @ grad, grad_bias = sum(grad).
    # `keyset`: the Autograd kernel's, or None when called directly (see
    # "The direct path" below).
    @staticmethod
    def forward(ctx, keyset, a, b, bias):
        ctx.save_for_backward(a, b)
        ctx.has_bias = bias is not None
        # (grad mode is off inside forward: the redispatch below autograd is all it takes)
        if keyset is None:
            return _below_autograd_call(_gemm_handle, a, b, bias)
        return _gemm_redispatch(keyset & _AFTER_AUTOGRAD, a, b, bias)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = grad_b = grad_bias = None
        if ctx.needs_input_grad[1]:  # [.., M, N] x [.., N, K]
            grad_a = _reduce_to(_bwd_gemm(grad, b.transpose(-1, -2)), a.dim())
        if ctx.needs_input_grad[2]:
            if b.dim() == 2 and a.dim() == 3 and grad.dim() == 3:
                # Shared weight: one GEMM over all batches, [K, B*M] x [B*M, N].
                grad_b = _bwd_gemm(_as_matrix(a).t(), _as_matrix(grad))
            else:
                grad_b = _reduce_to(_bwd_gemm(a.transpose(-1, -2), grad), b.dim())
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_bias = grad.sum((0, 1)) if grad.dim() == 3 else grad.sum(0)
        return None, grad_a, grad_b, grad_bias


def _autograd_kernel(fn, redispatch):
    """The Autograd kernel of a (a, b, bias) op: `fn` (an autograd.Function)
    when an input needs a gradient, else straight below autograd.  The
    no-gradient path is every inference call's: kept to the fewest Python
    steps (no helper call, the op handle's redispatch directly)."""
    def kernel(keyset, a, b, bias=None):
        try:
            if _grad_enabled() and (a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad)):
                return fn.apply(keyset, a, b, bias)
            return redispatch(keyset & _AFTER_AUTOGRAD, a, b, bias)
        except RuntimeError as e:
            _reraise_oom(e)

    return kernel


_gemm_autograd = _autograd_kernel(_GemmFn, _gemm_redispatch)


class _LinearFn(torch.autograd.Function):
    # Its own node so the weight gradient comes out in the weight's own
    # layout: grad_weight = grad^T @ x is a row-major [out, in] GEMM on
    # transposed views.
    @staticmethod
    def forward(ctx, keyset, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        if keyset is None:
            return _below_autograd_call(_linear_handle, x, weight, bias)
        return _linear_redispatch(keyset & _AFTER_AUTOGRAD, x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        g = _as_matrix(grad)  # [tokens, out]
        if ctx.needs_input_grad[1]:
            grad_x = _bwd_gemm(g, weight).reshape(x.shape)
        if ctx.needs_input_grad[2]:
            grad_w = _bwd_gemm(g.t(), _as_matrix(x))  # [out, in]
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_b = g.sum(0)
        return None, grad_x, grad_w, grad_b


_linear_autograd = _autograd_kernel(_LinearFn, _linear_redispatch)


# ---------------------------------------------------------------------------
# The direct path.  A gemm / linear call that records a gradient goes
# dispatcher -> the Autograd kernel above (Python) -> the autograd.Function.
# The Python entry points (functional.gemm / matmul / linear, so TiledLinear)
# call the Function themselves where that is the same call, and save the
# first hop (docs/abi.md).  It is the same while nothing in front of the
# dispatcher or above its Autograd key acts on the call, so they call the op
# instead for any tensor but a plain Tensor or Parameter (DTensor,
# FakeTensor, FunctionalTensor, a __torch_function__ subclass), under
# torch.compile's tracing, under a __torch_function__ mode (torch.device(...)
# as a context too), with autocast on for any device, with the autograd keys
# excluded (a guard below autograd), and whenever the dispatcher's
# thread-local included keys differ from a fresh thread's: a
# __torch_dispatch__ mode (FakeTensorMode, make_fx), torch.func transforms,
# jit tracing, the Python dispatcher, pre-dispatch tracing.  Grad mode off,
# or no input requiring a gradient, is the op's call as before.
#
# Below the Autograd key the Function's forward then calls the op through the
# dispatcher with the autograd functionality excluded: the dispatcher finds
# the kernel as it does for the op (backend, a tensor's Python key), and the
# profiler records the op as it does.  (An input with another autograd key,
# a nested tensor, would meet the Autograd kernel above with grad mode off:
# its redispatch, the same call.)  One key set and back rather than
# _AutoDispatchBelowAutograd's context: 0.3 us against 0.9 us here.

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_is_compiling = torch.compiler.is_compiling
_function_mode = torch._C._is_torch_function_mode_enabled
_autocast = torch._C._is_any_autocast_enabled
_tls_included = torch._C._dispatch_tls_local_include_set
_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
_set_excluded = torch._C._dispatch_tls_set_dispatch_key_excluded
_AUTOGRAD = torch._C.DispatchKey.AutogradFunctionality
_profiling = torch._C._autograd._profiler_enabled


def _fresh_thread_included():
    """The dispatcher's thread-local included keys of a new thread: torch's
    defaults, whatever state this import runs in."""
    out = []
    t = threading.Thread(target=lambda: out.append(_tls_included()))
    t.start()
    t.join()
    return out[0]


_DEFAULT_INCLUDED = _fresh_thread_included()


def direct(a, b, bias):
    """Whether the op called with (a, b, bias) records a gradient and calling
    its autograd.Function directly is the same call (see above).  Reads
    nothing of a tensor (not even requires_grad, which a __torch_function__
    mode sees) before its type and the mode stack."""
    return (
        _grad_enabled()
        and (type(a) is _Tensor or type(a) is _Parameter)
        and (type(b) is _Tensor or type(b) is _Parameter)
        and (bias is None or type(bias) is _Tensor or type(bias) is _Parameter)
        and not _function_mode()
        and (a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad))
        and not _is_compiling()  # Dynamo folds it: it traces nothing below
        and not _autocast()
        and not _excluded(_AUTOGRAD)
        and _tls_included() == _DEFAULT_INCLUDED
    )


def _below_autograd_call(handle, *args):
    """The op through the dispatcher, below autograd (the Function's forward
    when called directly: direct() found the autograd keys not excluded)."""
    _set_excluded(_AUTOGRAD, True)
    try:
        return _call_boxed(handle, *args)
    finally:
        _set_excluded(_AUTOGRAD, False)


def _apply_direct(fn, a, b, bias=None):
    """The op of autograd.Function `fn` (gemm's or linear's) with (a, b,
    bias) where direct() says so: the Function called directly."""
    try:
        return fn.apply(None, a, b, bias)
    except RuntimeError as e:
        _reraise_oom(e)


# (partial, not a def calling _apply_direct: no second Python frame per call)
gemm_direct = functools.partial(_apply_direct, _GemmFn)
linear_direct = functools.partial(_apply_direct, _LinearFn)


class _LinearActFn(torch.autograd.Function):
    # The backward keeps the pre-activation z = x W^T + b that the forward's
    # epilogue stored beside the output (one tensor of the output's size,
    # what torch's own Linear + activation saves too) instead of recomputing
    # it with a second GEMM.
    @staticmethod
    def forward(ctx, x, weight, bias, act, residual):
        need_pre = act != "none"
        with _below_autograd():
            out, pre = _gemm_epilogue(_as_matrix(x), weight.t(), bias, act, None, _opt_matrix(residual), need_pre)
        ctx.save_for_backward(x, weight, bias, pre if need_pre else None)
        ctx.has_bias = bias is not None
        ctx.has_residual = residual is not None
        ctx.act = act
        return out.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias, pre = ctx.saved_tensors
        grad_x = grad_w = grad_b = grad_r = None
        if ctx.has_residual and ctx.needs_input_grad[4]:
            grad_r = grad
        if torch.is_grad_enabled():
            act = ctx.act
            grad_x, grad_w, grad_b = _grads_by_recompute(
                lambda x, w, b: _activation(_linear(x, w, b), act), (x, weight, bias), ctx.needs_input_grad[:3], grad
            )
            return grad_x, grad_w, grad_b, None, grad_r
        g = _as_matrix(grad)
        dz = g if pre is None else _activation_backward(g, pre, ctx.act)
        if ctx.needs_input_grad[0]:
            grad_x = _bwd_gemm(dz, weight).reshape(x.shape)
        if ctx.needs_input_grad[1]:
            grad_w = _bwd_gemm(dz.t(), _as_matrix(x))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = _column_sums(dz)
        return grad_x, grad_w, grad_b, None, grad_r


def _apply_as_op(op, fn, *args):
    """autograd.Function `fn` applied to `args` in place of the op `op`
    (a fused op's direct path): the profiler records the op, as through the
    dispatcher, and the C++ side's out of memory is raised as torch's."""
    try:
        if _profiling():
            with torch.profiler.record_function(op):
                return fn.apply(*args)
        return fn.apply(*args)
    except RuntimeError as e:
        _reraise_oom(e)


def linear_act_direct(x, weight, bias, act):
    """tiled.linear_act(x, weight, bias, act) where direct(x, weight, bias)
    says so: its autograd.Function called directly (no residual)."""
    _check_linear_act(x, weight, bias, act, None)
    return _apply_as_op("tiled::linear_act", _LinearActFn, x, weight, bias, act, None)


@_raising_torch_oom
def _linear_act_autograd(keyset, x, weight, bias=None, act="none", residual=None):
    if _needs_grad(x, weight, bias, residual):
        _check_linear_act(x, weight, bias, act, residual)  # the op's own words, not gemm_epilogue's
        return _LinearActFn.apply(x, weight, bias, act, residual)
    return _linear_act.redispatch(keyset & _AFTER_AUTOGRAD, x, weight, bias, act, residual)


def _saved_may_be_overwritten():
    """Whether a backward may write over its saved tensors: the graph is not
    kept for another backward (retain_graph / create_graph) and no compiler
    traces the backward (AOTAutograd plans its own buffers)."""
    if _is_compiling():
        return False
    keep = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    if keep is None:
        return False
    try:
        return not keep()
    except RuntimeError:  # not inside the autograd engine
        return False


class _GatedLinearFn(torch.autograd.Function):
    # Saves the gate's pre-activation and `up` (two [tokens, hidden] tensors;
    # torch's unfused chain saves three: gate, act(gate), up); act(gate) is
    # recomputed elementwise in the backward.
    @staticmethod
    def forward(ctx, x, w_gate, w_up, act, b_gate, b_up):
        x2 = _as_matrix(x)
        with _below_autograd():
            h, zg = _gemm_epilogue(x2, w_gate.t(), b_gate, act, None, None, True)
            out, up = _gemm_epilogue(x2, w_up.t(), b_up, "none", h, None, True)
        ctx.save_for_backward(x, w_gate, w_up, b_gate, b_up, zg, up)
        ctx.has_b_gate = b_gate is not None
        ctx.has_b_up = b_up is not None
        ctx.act = act
        return out.reshape(*x.shape[:-1], w_gate.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, w_gate, w_up, b_gate, b_up, zg, up = ctx.saved_tensors
        act = ctx.act
        grad_x = grad_wg = grad_wu = grad_bg = grad_bu = None
        if torch.is_grad_enabled():
            n = ctx.needs_input_grad
            grad_x, grad_wg, grad_wu, grad_bg, grad_bu = _grads_by_recompute(
                lambda x, wg, wu, bg, bu: _activation(_linear(x, wg, bg), act) * _linear(x, wu, bu),
                (x, w_gate, w_up, b_gate, b_up), (n[0], n[1], n[2], n[4], n[5]), grad
            )
            return grad_x, grad_wg, grad_wu, None, grad_bg, grad_bu
        g = _as_matrix(grad)  # [tokens, hidden]
        if g.is_cuda:
            # One elementwise pass (torch's ops take four); where nothing
            # reads the saved gate and up again, its results are written
            # over them: two [tokens, hidden] tensors fewer at the block's
            # peak (torch's graph frees its saved tensors node by node).
            if _saved_may_be_overwritten() and zg.is_contiguous() and up.is_contiguous():
                _gated_act_backward_(g, zg, up, act)
                d_gate, d_up = zg, up
            else:
                d_gate, d_up = _gated_act_backward(g, zg, up, act)
            del zg, up
        else:
            d_up = g * _activation(zg, act)
            d_gate = _activation_backward(g * up, zg, act)
        x2 = _as_matrix(x)
        # Everything of d_gate first, then it goes where it is not the saved
        # gate's buffer (one [tokens, hidden] tensor less alive when the
        # weight gradients are written: the saved tensors stay until this
        # node returns).
        # dx = d_gate W_gate + d_up W_up: the second GEMM adds the first's
        # result in its epilogue (residual).
        part = _bwd_gemm(d_gate, w_gate) if ctx.needs_input_grad[0] else None
        if ctx.needs_input_grad[1]:
            grad_wg = _bwd_gemm(d_gate.t(), x2)
        if ctx.has_b_gate and ctx.needs_input_grad[4]:
            grad_bg = _column_sums(d_gate)
        del d_gate
        if part is not None:
            grad_x = _gemm_epilogue(d_up, w_up, None, "none", None, part, False)[0].reshape(x.shape)
            del part
        if ctx.needs_input_grad[2]:
            grad_wu = _bwd_gemm(d_up.t(), x2)
        if ctx.has_b_up and ctx.needs_input_grad[5]:
            grad_bu = _column_sums(d_up)
        return grad_x, grad_wg, grad_wu, None, grad_bg, grad_bu


def gated_direct(x, w_gate, w_up, b_gate, b_up):
    """direct() for gated_linear's five tensors."""
    return direct(x, w_gate, b_gate) and _plain(w_up) and (b_up is None or _plain(b_up))


def gated_linear_direct(x, w_gate, w_up, act, b_gate, b_up):
    """tiled.gated_linear(...) where gated_direct() says so: its
    autograd.Function called directly."""
    _check_gated_linear(x, w_gate, w_up, act, b_gate, b_up)
    return _apply_as_op("tiled::gated_linear", _GatedLinearFn, x, w_gate, w_up, act, b_gate, b_up)


@_raising_torch_oom
def _gated_linear_autograd(keyset, x, w_gate, w_up, act="silu", b_gate=None, b_up=None):
    if _needs_grad(x, w_gate, w_up, b_gate, b_up):
        _check_gated_linear(x, w_gate, w_up, act, b_gate, b_up)
        return _GatedLinearFn.apply(x, w_gate, w_up, act, b_gate, b_up)
    return _gated_linear.redispatch(keyset & _AFTER_AUTOGRAD, x, w_gate, w_up, act, b_gate, b_up)


for _name, _kernel in (
    ("gemm", _gemm_autograd),
    ("linear", _linear_autograd),
    ("linear_act", _linear_act_autograd),
    ("gated_linear", _gated_linear_autograd),
):
    _LIB.impl(_name, _kernel, "Autograd", with_keyset=True)


# ---------------------------------------------------------------------------
# Autocast: like aten::mm, a "lower precision fp" op: its floating-point
# tensors (float64 aside) run in the autocast dtype of their device.


def _autocast_kernel(op, device_type, key):
    exclude = torch._C.DispatchKeySet(key)

    def cast(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64 \
                and t.device.type == device_type:
            return t.to(torch.get_autocast_dtype(device_type))
        return t

    def kernel(_keyset, *args):
        with torch._C._ExcludeDispatchKeyGuard(exclude):
            return op(*(cast(a) for a in args))

    return kernel


# The fused ops too: every floating-point tensor argument (bias, residual,
# mul included) in the autocast dtype, so the output is in it as well (an
# unfused chain would add an fp32 residual in fp32).
for _name in ("gemm", "linear", "linear_act", "gated_linear", "gemm_epilogue"):
    for _device, _key in (("cuda", torch._C.DispatchKey.AutocastCUDA), ("cpu", torch._C.DispatchKey.AutocastCPU)):
        _LIB.impl(_name, _autocast_kernel(getattr(torch.ops.tiled, _name).default, _device, _key), _key.name,
                  with_keyset=True)
