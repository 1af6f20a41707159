"""The direct path (ops.py): functional.gemm / matmul / linear call the
autograd.Function themselves for a call that records a gradient, and the op
wherever that would not be the same call."""
import threading
import warnings

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import torch_tiled_gemm as ttg
from torch_tiled_gemm import ops
from conftest import DEVICES


@pytest.fixture
def forwards(monkeypatch):
    """The keyset each gemm / linear Function forward got: None when called
    directly, the Autograd kernel's when reached through the op."""
    seen = []
    for fn in (ops._GemmFn, ops._LinearFn):
        inner = fn.forward

        def forward(ctx, keyset, *args, _inner=inner, _name=fn.__name__):
            seen.append((_name, "direct" if keyset is None else "op"))
            return _inner(ctx, keyset, *args)

        monkeypatch.setattr(fn, "forward", staticmethod(forward))
    return seen


def through_op(monkeypatch):
    monkeypatch.setattr(ops, "direct", lambda *args: False)
    # functional.py took its own reference at import
    monkeypatch.setattr(ttg.functional, "_direct", lambda *args: False)


def leaves(*ts, grad=(True, True, True)):
    return [None if t is None else t.detach().clone().requires_grad_(g) for t, g in zip(ts, grad)]


def same_on_both_paths(monkeypatch, call, inputs, grad=(True, True, True)):
    """call(*leaves) on the direct path, then through the op, each followed
    by a backward: the same output, grad_fn type and gradients, bit for bit."""
    results = []
    for path in ("direct", "op"):
        if path == "op":
            through_op(monkeypatch)
        ts = leaves(*inputs, grad=grad)
        out = call(*ts)
        out.backward(torch.ones_like(out))
        results.append((out, type(out.grad_fn), [None if t is None else t.grad for t in ts]))
    (o1, g1, grads1), (o2, g2, grads2) = results
    assert torch.equal(o1, o2) and g1 is g2
    for a, b in zip(grads1, grads2):
        assert (a is None and b is None) or torch.equal(a, b)


# x's shape, a bias, which of x, weight, bias require grad
LINEAR_CASES = [((5, 7), True, (True, True, True)), ((2, 3, 7), True, (True, False, False)),
                ((7,), False, (False, True, False)), ((0, 7), True, (False, False, True)),
                ((4, 7), True, (True, True, False))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape,use_bias,grad", LINEAR_CASES)
def test_linear_direct_same_as_op(device, monkeypatch, forwards, xshape, use_bias, grad):
    torch.manual_seed(0)
    x0, w0 = torch.randn(xshape, device=device), torch.randn(4, 7, device=device)
    b0 = torch.randn(4, device=device) if use_bias else None
    same_on_both_paths(monkeypatch, ttg.linear, (x0, w0, b0), grad)
    assert forwards == [("_LinearFn", "direct"), ("_LinearFn", "op")]


GEMM_CASES = [((5, 7), (7, 4)), ((3, 5, 7), (7, 4)), ((5, 7), (3, 7, 4)), ((3, 5, 7), (3, 7, 4))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", GEMM_CASES)
@pytest.mark.parametrize("entry", ["gemm", "matmul"])
def test_gemm_direct_same_as_op(device, monkeypatch, forwards, sa, sb, entry):
    torch.manual_seed(0)
    a0, b0, c0 = torch.randn(sa, device=device), torch.randn(sb, device=device), torch.randn(sb[-1], device=device)
    call = (lambda a, b, c: ttg.gemm(a, b, c)) if entry == "gemm" else (lambda a, b, c: ttg.matmul(a, b))
    results = []
    for path in ("direct", "op"):
        if path == "op":
            through_op(monkeypatch)
        a, b, c = leaves(a0, b0, c0)
        out = call(a, b, c)
        out.backward(torch.ones_like(out))
        results.append((out, [a.grad, b.grad, c.grad]))
    assert forwards == [("_GemmFn", "direct"), ("_GemmFn", "op")]
    (o1, grads1), (o2, grads2) = results
    assert torch.equal(o1, o2)
    for a, b in zip(grads1, grads2):
        assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_tiled_linear_takes_direct_path(device, forwards):
    lin = ttg.TiledLinear(6, 3, device=device)
    lin(torch.randn(2, 6, device=device)).sum().backward()
    assert forwards == [("_LinearFn", "direct")]
    assert lin.weight.grad is not None and lin.bias.grad is not None


@pytest.mark.parametrize("device", DEVICES)
def test_no_gradient_calls_the_op(device, forwards):
    x, w = torch.randn(3, 5, device=device), torch.randn(4, 5, device=device)
    assert not ttg.linear(x, w).requires_grad
    wg = w.clone().requires_grad_()
    with torch.no_grad():
        assert not ttg.linear(x, wg).requires_grad
    with torch.inference_mode():
        assert not ttg.gemm(x, wg.t()).requires_grad
    assert forwards == []


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward_direct(device, forwards):
    x = torch.randn(2, 3, 5, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradgradcheck(ttg.linear, (x, w, b))
    a = torch.randn(3, 6, 5, dtype=torch.float64, device=device, requires_grad=True)
    wt = torch.randn(5, 4, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradgradcheck(ttg.gemm, (a, wt, b))
    assert torch.autograd.gradgradcheck(ttg.matmul, (a, wt))
    # the entry points' calls direct; the backward's gemms (recorded again
    # under create_graph) are the op's, as before
    assert {p for f, p in forwards if f == "_LinearFn"} == {"direct"}
    assert ("_GemmFn", "direct") in forwards and ("_GemmFn", "op") in forwards


@pytest.mark.parametrize("device", DEVICES)
def test_profiler_records_the_op(device):
    x = torch.randn(3, 5, device=device, requires_grad=True)
    w = torch.randn(4, 5, device=device, requires_grad=True)
    with torch.profiler.profile() as prof:
        ttg.linear(x, w)
        ttg.gemm(x, w.t())
    names = [e.name for e in prof.events()]
    assert names.count("tiled::linear") == 1 and names.count("tiled::gemm") == 1, names


def test_errors_same_as_op():
    cases = [(torch.randn(3, 5), torch.randn(4, 7), None), (torch.randn(3, 5), torch.randn(4, 5), torch.randn(5)),
             (torch.randn(3, 5), torch.randn(4, 5, dtype=torch.float64), None)]
    for x, w, b in cases:
        w.requires_grad_()
        with pytest.raises(RuntimeError) as op_err:
            torch.ops.tiled.linear(x, w, b)
        with pytest.raises(RuntimeError) as direct_err:
            ttg.linear(x, w, b)
        assert type(direct_err.value) is type(op_err.value) and str(direct_err.value) == str(op_err.value)
    with pytest.raises(RuntimeError) as op_err:
        torch.ops.tiled.gemm(torch.randn(3, 5, requires_grad=True), torch.randn(4, 2))
    with pytest.raises(RuntimeError) as direct_err:
        ttg.gemm(torch.randn(3, 5, requires_grad=True), torch.randn(4, 2))
    assert str(direct_err.value) == str(op_err.value)
    with pytest.raises(TypeError, match="argument 'weight' \\(position 2\\) must be Tensor"):
        ttg.linear(torch.randn(3, 5, requires_grad=True), [[1.0]])


def test_out_of_memory_raised_again_on_direct_path(monkeypatch, forwards):
    # The C++ side's allocation failure reaches Python as a RuntimeError; the
    # direct path raises torch's OutOfMemoryError again, as the Autograd kernel does.
    def fail(*args):
        raise RuntimeError("tiled: CUDA out of memory: could not allocate 12 elements on cuda:0 (...)")

    monkeypatch.setattr(ops, "_call_boxed", fail)
    x, w = torch.randn(3, 5), torch.randn(4, 5, requires_grad=True)
    with pytest.raises(torch.OutOfMemoryError, match="tiled: CUDA out of memory"):
        ttg.linear(x, w)
    with pytest.raises(torch.OutOfMemoryError, match="tiled: CUDA out of memory"):
        ttg.gemm(x, w.t())
    assert [p for _, p in forwards] == ["direct", "direct"]
    # and the autograd keys are no longer excluded afterwards
    assert not ops._excluded(ops._AUTOGRAD)

    def other(*args):
        raise RuntimeError("other")

    monkeypatch.setattr(ops, "_call_boxed", other)
    with pytest.raises(RuntimeError, match="^other$") as e:
        ttg.linear(x, w)
    assert type(e.value) is RuntimeError


# ---------------------------------------------------------------------------
# where the op is called instead


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_calls_the_op(device, forwards):
    x = torch.randn(3, 5, device=device, requires_grad=True)
    lin = ttg.TiledLinear(5, 4, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        out = lin(x)
        out2 = ttg.gemm(x, lin.weight.t())
    assert out.dtype == out2.dtype == torch.bfloat16
    out.float().sum().backward()
    assert x.grad.dtype == lin.weight.grad.dtype == torch.float32
    assert [p for _, p in forwards] == ["op", "op"]


@pytest.mark.parametrize("device", DEVICES)
def test_compile_calls_the_op(device, forwards):
    torch._dynamo.reset()
    lin = ttg.TiledLinear(5, 4, device=device)

    def f(x):
        return ttg.matmul(lin(x), ttg.gemm(x, lin.weight.t()).t())

    x = torch.randn(3, 5, device=device, requires_grad=True)
    ref = f(x)
    forwards.clear()
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x)  # a graph break would fail here
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    assert all(p == "op" for _, p in forwards), forwards


class Wrapped(torch.Tensor):
    """A wrapper subclass like DTensor: its own __torch_dispatch__, torch
    function disabled; records the ops it sees."""

    seen = []

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device,
                                                   strides=elem.stride(), requires_grad=elem.requires_grad)

    def __init__(self, elem):
        self.elem = elem

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        unwrap = lambda t: t.elem if isinstance(t, Wrapped) else t  # noqa: E731
        wrap = lambda t: Wrapped(t) if isinstance(t, torch.Tensor) else t  # noqa: E731
        return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


def test_wrapper_subclass_calls_the_op(forwards):
    Wrapped.seen.clear()
    x0, w0 = torch.randn(3, 5), torch.randn(4, 5)
    x, w = Wrapped(x0), Wrapped(w0.clone()).requires_grad_()
    out = ttg.linear(x, w)
    assert type(out) is Wrapped and torch.ops.tiled.linear.default in Wrapped.seen
    out.sum().backward()
    w2 = w0.clone().requires_grad_()
    ttg.linear(x0, w2).sum().backward()
    torch.testing.assert_close(w.grad.elem, w2.grad)
    assert [p for _, p in forwards] == ["op", "direct"]


def test_torch_function_subclass_calls_the_op(forwards):
    class Logged(torch.Tensor):
        pass

    x = torch.randn(3, 5).as_subclass(Logged).requires_grad_()
    w = torch.randn(4, 5)
    out = ttg.linear(x, w)
    assert type(out) is type(torch.ops.tiled.linear(x, w)) is Logged
    assert [p for _, p in forwards] == ["op", "op"]


def test_fake_tensors_call_the_op(forwards):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    with FakeTensorMode():
        x = torch.randn(2, 3, 5, requires_grad=True)
        w = torch.nn.Parameter(torch.randn(4, 5))
        out = ttg.linear(x, w)
        out.sum().backward()
        g = ttg.gemm(x, w.t())
    assert isinstance(out, FakeTensor) and out.shape == (2, 3, 4) and w.grad.shape == (4, 5)
    assert isinstance(g, FakeTensor) and g.shape == (2, 3, 4)
    assert [p for _, p in forwards] == ["op", "op"]


def test_dispatch_mode_calls_the_op(forwards):
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x, w = torch.randn(3, 5), torch.randn(4, 5, requires_grad=True)
    with Record():
        ttg.linear(x, w).sum().backward()
    assert torch.ops.tiled.linear.default in seen and torch.ops.tiled.gemm.default in seen
    assert [p for _, p in forwards] == ["op"]


def test_function_mode_calls_the_op(forwards):
    seen = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x, w = torch.randn(3, 5), torch.randn(4, 5, requires_grad=True)
    with Record():
        ttg.linear(x, w)
        ttg.gemm(x, w.t())
    # the op, and nothing read of the tensors before it (not requires_grad)
    assert [f for f in seen if f not in (torch.Tensor.t,)] == [torch.ops.tiled.linear.default,
                                                               torch.ops.tiled.gemm.default], seen
    assert [p for _, p in forwards] == ["op", "op"]


def _in_vmap():
    out = []
    w = torch.randn(4, 5, requires_grad=True)
    torch.func.vmap(lambda x: out.append(ops.direct(x, w, None)) or x)(torch.randn(2, 5))
    return out[0]


def _below_autograd():
    with torch._C._AutoDispatchBelowAutograd():
        return ops.direct(torch.randn(3, 5), torch.randn(4, 5, requires_grad=True), None)


def _in_jit_trace():
    out = []

    def f(x):
        out.append(ops.direct(x, torch.randn(4, 5, requires_grad=True), None))
        return x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.trace is deprecated
        torch.jit.trace(f, torch.randn(3, 5), check_trace=False)
    return out[0]


def _python_dispatcher():
    from torch._dispatch.python import enable_python_dispatcher

    with enable_python_dispatcher():
        return ops.direct(torch.randn(3, 5), torch.randn(4, 5, requires_grad=True), None)


def _device_context():
    with torch.device("cpu"):
        return ops.direct(torch.randn(3, 5), torch.randn(4, 5, requires_grad=True), None)


@pytest.mark.parametrize("state", [_in_vmap, _below_autograd, _in_jit_trace, _python_dispatcher, _device_context])
def test_direct_false_where_the_op_differs(state):
    assert ops.direct(torch.randn(3, 5), torch.randn(4, 5, requires_grad=True), None)
    assert state() is False


def test_default_key_sets_from_a_fresh_thread():
    # Read in a new thread, so an import under a mode still gets torch's defaults.
    class Nothing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Nothing():
        assert torch._C._dispatch_tls_local_include_set() != ops._DEFAULT_INCLUDED
        assert ops._fresh_thread_included() == ops._DEFAULT_INCLUDED
    assert torch._C._dispatch_tls_local_include_set() == ops._DEFAULT_INCLUDED
    out = []
    t = threading.Thread(target=lambda: out.append(
        ops.direct(torch.randn(3, 5), torch.randn(4, 5, requires_grad=True), None)))
    t.start()
    t.join()
    assert out == [True]


# ---------------------------------------------------------------------------
# linear_act's direct path and the backward's GEMMs below autograd


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape,use_bias,grad", LINEAR_CASES)
@pytest.mark.parametrize("act", ["gelu", "none"])
def test_linear_act_direct_same_as_op(device, monkeypatch, xshape, use_bias, grad, act):
    torch.manual_seed(0)
    x0, w0 = torch.randn(xshape, device=device), torch.randn(4, 7, device=device)
    b0 = torch.randn(4, device=device) if use_bias else None
    taken = []
    inner = ttg.functional._linear_act_direct
    monkeypatch.setattr(ttg.functional, "_linear_act_direct", lambda *a: taken.append(1) or inner(*a))
    same_on_both_paths(monkeypatch, lambda x, w, b: ttg.linear_act(x, w, b, act), (x0, w0, b0), grad)
    assert taken == [1]


@pytest.mark.parametrize("device", DEVICES)
def test_linear_act_direct_errors_and_profile(device):
    x = torch.randn(3, 5, device=device, requires_grad=True)
    for w, b in ((torch.randn(4, 7, device=device), None), (torch.randn(4, 5, device=device), torch.randn(5)),
                 (torch.randn(4, 5, dtype=torch.float64, device=device), None)):
        with pytest.raises(RuntimeError) as op_err:
            torch.ops.tiled.linear_act(x, w, b, "gelu_erf")
        with pytest.raises(RuntimeError) as direct_err:
            ttg.linear_act(x, w, b, "gelu")
        assert str(direct_err.value) == str(op_err.value)
    w = torch.randn(4, 5, device=device)
    with torch.profiler.profile() as prof:
        ttg.linear_act(x, w, None, "relu")
    # (host events: on CUDA the record_function range shows on the GPU's
    # timeline too)
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    assert names.count("tiled::linear_act") == 1, names


@pytest.mark.parametrize("device", DEVICES)
def test_backward_gemms_below_autograd_same_as_op(device, monkeypatch):
    # The backward's GEMMs skip the Autograd kernel (grad mode is off there);
    # through the op instead, the same gradients bit for bit.
    torch.manual_seed(0)
    x0, w0, b0 = torch.randn(2, 3, 7, device=device), torch.randn(4, 7, device=device), torch.randn(4, device=device)
    a0 = torch.randn(3, 5, 7, device=device)
    grads = []
    for path in ("below", "op"):
        if path == "op":
            monkeypatch.setattr(ops, "_bwd_gemm", lambda a, b: ops._gemm(a, b))
        x, w, b = leaves(x0, w0, b0)
        a = a0.detach().clone().requires_grad_()
        (ttg.linear(x, w, b).sum() + ttg.linear_act(x, w, b, "silu").sum() + ttg.gemm(a, w.t()).sum()).backward()
        grads.append([t.grad for t in (x, w, b, a)])
    for g1, g2 in zip(*grads):
        assert torch.equal(g1, g2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_gated_linear_direct_same_as_op(device, monkeypatch, use_bias, act):
    torch.manual_seed(0)
    x0, wg0, wu0 = torch.randn(2, 3, 7, device=device), torch.randn(4, 7, device=device), torch.randn(4, 7, device=device)
    bg0 = torch.randn(4, device=device) if use_bias else None
    bu0 = torch.randn(4, device=device) if use_bias else None
    taken = []
    inner = ttg.functional._gated_linear_direct
    monkeypatch.setattr(ttg.functional, "_gated_linear_direct", lambda *a: taken.append(1) or inner(*a))
    same_on_both_paths(monkeypatch, lambda x, wg, wu, bg, bu: ttg.gated_linear(x, wg, wu, act, bg, bu),
                       (x0, wg0, wu0, bg0, bu0), (True,) * 5)
    assert taken == [1]


@pytest.mark.parametrize("device", DEVICES)
def test_gated_linear_direct_errors_and_profile(device):
    x = torch.randn(3, 5, device=device, requires_grad=True)
    w = torch.randn(4, 5, device=device)
    for wg, wu, bg in ((torch.randn(4, 7, device=device), w, None), (w, torch.randn(3, 5, device=device), None),
                       (w, w, torch.randn(5, device=device)), (w, w.double(), None)):
        with pytest.raises(RuntimeError) as op_err:
            torch.ops.tiled.gated_linear(x, wg, wu, "silu", bg, None)
        with pytest.raises(RuntimeError) as direct_err:
            ttg.gated_linear(x, wg, wu, "silu", bg, None)
        assert str(direct_err.value) == str(op_err.value)
    with pytest.raises(TypeError, match="argument 'w_up' \\(position 3\\) must be Tensor"):
        ttg.gated_linear(x, w, [[1.0]])
    with torch.profiler.profile() as prof:
        ttg.gated_linear(x, w, w, "silu")
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    assert names.count("tiled::gated_linear") == 1, names
