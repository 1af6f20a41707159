"""Fused epilogues (activation, residual, gated MLP) and fuse_mlps: outputs
and gradients against the unfused torch chain, opcheck, compile, training,
state_dict round trips, real timm / transformers blocks where installed."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tiled_gemm as ttg
from conftest import DEVICES, HAS_CUDA, needs_cuda

ACTS = {
    "none": lambda z: z,
    "relu": F.relu,
    "gelu_erf": F.gelu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "silu": F.silu,
}
LOW = (torch.float16, torch.bfloat16)


def dtypes_for(device):
    return [torch.float32, torch.float64] + ([torch.float16, torch.bfloat16] if device == "cuda" else [torch.bfloat16])


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def assert_like_torch(ours, theirs, ref, label=""):
    """Our error against the float64 reference is within 2x (plus a floor) of
    torch's own error for the same computation in the same dtype."""
    e_ours, e_torch = rel(ours, ref), rel(theirs, ref)
    floor = {torch.float64: 1e-12, torch.float32: 2e-6}.get(ours.dtype, 2e-3)
    assert e_ours <= 2 * e_torch + floor, f"{label}: ours {e_ours:.3g} vs torch {e_torch:.3g}"


def run_both(fn_ours, fn_torch, tensors, dtype, grad=True):
    """Forward (and backward with one shared upstream gradient) of ours and
    torch's in `dtype`, and torch's in float64 as the reference."""
    outs = []
    for fn, dt in ((fn_ours, dtype), (fn_torch, dtype), (fn_torch, torch.float64)):
        ts = [t.detach().to(dt).requires_grad_(grad) if t is not None else None for t in tensors]
        y = fn(*ts)
        gs = []
        if grad:
            gen = torch.Generator(device=y.device).manual_seed(7)
            g = torch.randn(y.shape, generator=gen, device=y.device, dtype=torch.float32).to(dt)
            gs = torch.autograd.grad(y, [t for t in ts if t is not None], g)
        outs.append((y, gs))
    return outs


def check_both(outs, label):
    (yo, go), (yt, gt), (yr, gr) = outs
    assert yo.dtype == yt.dtype and yo.shape == yt.shape
    assert_like_torch(yo, yt, yr, label + " out")
    for i, (a, b, r) in enumerate(zip(go, gt, gr)):
        assert_like_torch(a, b, r, f"{label} grad{i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(ACTS))
def test_linear_act(device, act):
    torch.manual_seed(0)
    for dtype in dtypes_for(device):
        for with_bias, with_res in ((True, True), (False, False), (True, False)):
            x = torch.randn(3, 7, 24, device=device)
            w = torch.randn(40, 24, device=device) / 5
            b = torch.randn(40, device=device) if with_bias else None
            r = torch.randn(3, 7, 40, device=device) if with_res else None

            def ours(x, w, b, r):
                return ttg.linear_act(x, w, b, act, r)

            def theirs(x, w, b, r):
                y = ACTS[act](F.linear(x, w, b))
                return y + r if r is not None else y

            check_both(run_both(ours, theirs, [x, w, b, r], dtype), f"{dtype} {act} bias={with_bias} res={with_res}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ["silu", "gelu_erf", "gelu_tanh", "relu"])
def test_gated_linear(device, act):
    torch.manual_seed(1)
    for dtype in dtypes_for(device):
        for with_bias in (False, True):
            x = torch.randn(2, 9, 32, device=device)
            wg = torch.randn(48, 32, device=device) / 5
            wu = torch.randn(48, 32, device=device) / 5
            bg = torch.randn(48, device=device) if with_bias else None
            bu = torch.randn(48, device=device) if with_bias else None

            def ours(x, wg, wu, bg, bu):
                return ttg.gated_linear(x, wg, wu, act, bg, bu)

            def theirs(x, wg, wu, bg, bu):
                return ACTS[act](F.linear(x, wg, bg)) * F.linear(x, wu, bu)

            check_both(run_both(ours, theirs, [x, wg, wu, bg, bu], dtype), f"{dtype} {act} bias={with_bias}")


def epilogue_reference(a, b, bias, act, mul, res):
    z = torch.matmul(a.double(), b.double())
    if bias is not None:
        z = z + bias.double()
    y = ACTS[act](z)
    if mul is not None:
        y = y * mul.double()
    if res is not None:
        y = y + res.double()
    return z, y


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_epilogue_layouts_and_batches(device):
    """Every operand layout, batched / broadcast / folded, strided epilogue
    operands, and the saved pre-activation."""
    torch.manual_seed(2)
    dtype = torch.float64
    cases = [((5, 8), (8, 6)), ((3, 5, 8), (8, 6)), ((3, 5, 8), (3, 8, 6)), ((5, 8), (3, 8, 6)), ((3, 1, 8), (8, 6))]
    for sa, sb in cases:
        for ta in (False, True):
            for tb in (False, True):
                a = torch.randn(sa, device=device, dtype=dtype)
                b = torch.randn(sb, device=device, dtype=dtype)
                if ta:
                    a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
                if tb:
                    b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
                shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
                bias = torch.randn(b.shape[-1], device=device, dtype=dtype)
                # A residual that is a column slice of a wider tensor, a mul
                # that is transposed in memory (copied by the op).
                res = torch.randn(shape[:-1] + (2 * shape[-1],), device=device, dtype=dtype)[..., ::2]
                res = torch.randn(shape[:-1] + (shape[-1] + 3,), device=device, dtype=dtype)[..., : shape[-1]]
                mul = torch.randn(shape, device=device, dtype=dtype).transpose(-1, -2).contiguous().transpose(-1, -2)
                for act in ACTS:
                    out, pre = torch.ops.tiled.gemm_epilogue(a, b, bias, act, mul, res, True)
                    z, y = epilogue_reference(a, b, bias, act, mul, res)
                    torch.testing.assert_close(pre, z, rtol=1e-12, atol=1e-12)
                    torch.testing.assert_close(out, y, rtol=1e-12, atol=1e-12)
                    out2, pre2 = torch.ops.tiled.gemm_epilogue(a, b, None, act, None, None, False)
                    assert pre2.numel() == 0
                    torch.testing.assert_close(out2, ACTS[act](torch.matmul(a, b)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_epilogue_edges(device):
    # K == 0: act(bias) * mul + residual; an empty output.
    a = torch.randn(4, 0, device=device)
    b = torch.randn(0, 3, device=device)
    bias = torch.randn(3, device=device)
    res = torch.randn(4, 3, device=device)
    out, pre = torch.ops.tiled.gemm_epilogue(a, b, bias, "gelu_erf", None, res, True)
    torch.testing.assert_close(out, F.gelu(bias).expand(4, 3) + res)
    torch.testing.assert_close(pre, bias.expand(4, 3))
    out, pre = torch.ops.tiled.gemm_epilogue(torch.randn(0, 5, device=device), torch.randn(5, 3, device=device),
                                             None, "silu", None, None, True)
    assert out.shape == (0, 3) and pre.shape == (0, 3)
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        torch.ops.tiled.gemm_epilogue(res, torch.randn(3, 3, device=device), None, "tanh", None, None, False)
    with pytest.raises(RuntimeError, match="residual must have the output's shape"):
        torch.ops.tiled.gemm_epilogue(res, torch.randn(3, 3, device=device), None, "relu", None, bias, False)
    with pytest.raises(ValueError, match="unsupported activation"):
        ttg.linear_act(res, torch.randn(3, 3, device=device), None, "quick_gelu")


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    torch.manual_seed(3)
    dt = torch.float64
    x = torch.randn(2, 5, 8, device=device, dtype=dt, requires_grad=True)
    w = torch.randn(6, 8, device=device, dtype=dt, requires_grad=True)
    w2 = torch.randn(6, 8, device=device, dtype=dt, requires_grad=True)
    b = torch.randn(6, device=device, dtype=dt, requires_grad=True)
    r = torch.randn(2, 5, 6, device=device, dtype=dt, requires_grad=True)
    for act in ACTS:
        torch.library.opcheck(torch.ops.tiled.linear_act, (x, w, b, act, r))
        torch.library.opcheck(torch.ops.tiled.linear_act, (x, w, None, act, None))
        torch.library.opcheck(torch.ops.tiled.gemm_epilogue,
                              (x.detach()[0], w.detach().t(), b.detach(), act, None, r.detach()[0], True))
        if act != "none":
            torch.library.opcheck(torch.ops.tiled.gated_linear, (x, w, w2, act, b, None))
            torch.library.opcheck(torch.ops.tiled.gated_linear, (x, w, w2, act, None, b))


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward(device):
    """The fused ops' backward is made of differentiable ops where a graph is
    recorded (create_graph): gradgradcheck in float64, biases included."""
    torch.manual_seed(7)
    dt = torch.float64
    x = torch.randn(5, 4, device=device, dtype=dt, requires_grad=True)
    w = torch.randn(3, 4, device=device, dtype=dt, requires_grad=True)
    w2 = torch.randn(3, 4, device=device, dtype=dt, requires_grad=True)
    b = torch.randn(3, device=device, dtype=dt, requires_grad=True)
    for act in ("gelu_tanh", "silu"):
        torch.autograd.gradgradcheck(lambda *t: ttg.linear_act(*t, act), (x, w, b))
        torch.autograd.gradgradcheck(lambda *t: ttg.gated_linear(t[0], t[1], t[2], act, t[3], t[3]), (x, w, w2, b))


def test_gated_act_backward_cpu_refuses():
    t = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match="runs on CUDA tensors only"):
        torch.ops.tiled.gated_act_backward(t, t, t, "silu")
    with pytest.raises(RuntimeError, match="runs on CUDA tensors only"):
        torch.ops.tiled.gated_act_backward_(t, t.clone(), t.clone(), "silu")


@needs_cuda
def test_gated_backward_overwrites_saved_only_once():
    """The gated backward writes its elementwise results over the saved gate
    and up unless the graph is kept: a backward with retain_graph (results
    in new tensors) and the one after it (written over the saved ones) give
    the same bits, and a third one is refused by autograd, not wrong."""
    torch.manual_seed(8)
    x = torch.randn(3, 40, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    wg = (torch.randn(96, 64, device="cuda", dtype=torch.bfloat16) / 8).requires_grad_(True)
    wu = (torch.randn(96, 64, device="cuda", dtype=torch.bfloat16) / 8).requires_grad_(True)
    y = ttg.gated_linear(x, wg, wu, "silu")
    go = torch.randn_like(y)
    kept = torch.autograd.grad(y, (x, wg, wu), go, retain_graph=True)
    last = torch.autograd.grad(y, (x, wg, wu), go)
    for a, b in zip(kept, last):
        assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="backward through the graph a second time|freed"):
        torch.autograd.grad(y, (x, wg, wu), go)
    # the in-place op: the same bits as the out-of-place one
    g, z, u = (torch.randn(33, 72, device="cuda", dtype=torch.float16) for _ in range(3))
    want = torch.ops.tiled.gated_act_backward(g, z, u, "gelu_tanh")
    torch.ops.tiled.gated_act_backward_(g, z, u, "gelu_tanh")
    assert torch.equal(z, want[0]) and torch.equal(u, want[1])
    with pytest.raises(RuntimeError, match="must be contiguous"):
        torch.ops.tiled.gated_act_backward_(g, z.t().contiguous().t(), u, "silu")
    torch.library.opcheck(torch.ops.tiled.gated_act_backward_, (g, z.clone(), u.clone(), "silu"))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_gated_act_backward(dtype):
    """The gated backward's one pass against torch's ops: d_up = g * act(z),
    d_gate = g * up * act'(z); 16-byte vectors and the element-wise tail
    (an odd count), a transposed (copied) grad; opcheck."""
    torch.manual_seed(6)
    for shape in ((64, 96), (7, 13)):
        z = torch.randn(shape, device="cuda", dtype=torch.float64) * 3
        up = torch.randn(shape, device="cuda", dtype=torch.float64)
        g = torch.randn(shape[::-1], device="cuda", dtype=torch.float64).t()
        for act in ACTS:
            d_gate, d_up = torch.ops.tiled.gated_act_backward(g.to(dtype), z.to(dtype), up.to(dtype), act)
            assert d_gate.is_contiguous() and d_up.is_contiguous()
            # float64 references: torch's own backward ops
            zr = z.clone().requires_grad_(True)
            (want_gate,) = torch.autograd.grad(ACTS[act](zr), zr, g * up)
            want_up = g * ACTS[act](z)
            theirs = [t.to(dtype) for t in (g, z, up)]
            t_up = theirs[0] * ACTS[act](theirs[1])
            zt = theirs[1].clone().requires_grad_(True)
            (t_gate,) = torch.autograd.grad(ACTS[act](zt), zt, theirs[0] * theirs[2])
            assert_like_torch(d_up, t_up, want_up, f"{dtype} {act} {shape} d_up")
            assert_like_torch(d_gate, t_gate, want_gate, f"{dtype} {act} {shape} d_gate")
    for act in ACTS:
        torch.library.opcheck(torch.ops.tiled.gated_act_backward, (g.to(dtype), z.to(dtype), up.to(dtype), act))


class TinyMLPs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ttg.TiledLinear(16, 32, activation="gelu_tanh")
        self.wg = nn.Parameter(torch.randn(32, 16) / 4)
        self.wu = nn.Parameter(torch.randn(32, 16) / 4)
        self.fc2 = ttg.TiledLinear(32, 16)

    def forward(self, x):
        h = self.fc1(x) + ttg.gated_linear(x, self.wg, self.wu, "silu")
        return ttg.linear_act(h, self.fc2.weight, self.fc2.bias, "none", x)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = TinyMLPs().to(device)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    for n in (3, 17, 40):
        x = torch.randn(n, 16, device=device, requires_grad=True)
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
        g = torch.autograd.grad(out.sum(), (x, model.wg))
        g_ref = torch.autograd.grad(model(x).sum(), (x, model.wg))
        for a, b in zip(g, g_ref):
            torch.testing.assert_close(a, b)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


def test_tiled_linear_activation():
    lin = ttg.TiledLinear(8, 4, activation="gelu")
    assert lin.activation == "gelu_erf" and "activation=gelu_erf" in repr(lin)
    x = torch.randn(3, 8)
    torch.testing.assert_close(lin(x), F.gelu(F.linear(x, lin.weight, lin.bias)))
    plain = nn.Linear(8, 4)
    sw = ttg.TiledLinear.from_linear(plain)
    assert sw.activation == "none" and sw.weight is plain.weight
    # Same state_dict keys as nn.Linear: checkpoints load both ways.
    plain.load_state_dict(lin.state_dict())
    lin.load_state_dict(plain.state_dict())


# ------------------------------------------------------------ fuse_mlps

class MyMLP(nn.Module):  # an MLP-like block fuse_mlps does not know
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        return self.a(x)


class HandMlp(nn.Module):
    """timm's Mlp, spelled out (a class named Mlp with its children), so the
    fusing rules run in CI without timm."""

    def __init__(self, d, h, act=nn.GELU, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = act()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(h, d)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


HandMlp.__name__ = "Mlp"


class HandLlamaMLP(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.gate_proj = nn.Linear(d, h, bias=False)
        self.up_proj = nn.Linear(d, h, bias=False)
        self.down_proj = nn.Linear(h, d, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


HandLlamaMLP.__name__ = "LlamaMLP"


class Block(nn.Module):
    def __init__(self, d=16, h=48):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = HandMlp(d, h)
        self.glu = HandLlamaMLP(d, h)
        self.other = MyMLP.__new__(MyMLP)
        nn.Module.__init__(self.other)
        self.other.a = nn.Linear(d, d)
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        x = x + self.mlp(self.norm(x))
        x = x + self.glu(self.norm(x))
        return self.head(self.other(x)).mean(1)


def train_losses(model, steps=4, seed=0):
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        x = torch.randn(4, 6, 16)
        y = torch.randint(0, 3, (4,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_fuse_mlps_hand_built():
    torch.manual_seed(0)
    ref = Block()
    model = copy.deepcopy(ref)
    params_before = {n: p for n, p in model.named_parameters()}
    keys_before = list(model.state_dict())
    opt_params = list(model.parameters())
    with pytest.warns(UserWarning, match="other: unknown MLP block"):
        report = ttg.fuse_mlps(model)
    assert sorted(n for n, _ in report.fused) == ["glu", "mlp"]
    assert [n for n, _ in report.skipped] == ["other"]
    assert type(model.mlp).__name__ == "FusedMlp" and isinstance(model.mlp, HandMlp)
    # The same Parameter objects under the same keys.
    assert list(model.state_dict()) == keys_before
    assert all(p is params_before[n] for n, p in model.named_parameters())
    assert list(model.parameters()) == opt_params
    # Same training run.
    torch.testing.assert_close(train_losses(model), train_losses(ref), rtol=1e-5, atol=1e-6)
    # Checkpoints load both ways; unfuse restores the classes.
    ref.load_state_dict(model.state_dict())
    model.load_state_dict(ref.state_dict())
    ttg.unfuse_mlps(model)
    assert type(model.mlp) is HandMlp
    # Composes with swap_linear, in either order.
    m2 = ttg.swap_linear(copy.deepcopy(ref))
    ttg.fuse_mlps(m2, warn=False)
    m3 = copy.deepcopy(ref)
    ttg.fuse_mlps(m3, warn=False)
    ttg.swap_linear(m3)
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(m2(x), ref(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m3(x), ref(x), rtol=1e-5, atol=1e-6)


class HandPhi3MLP(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.gate_up_proj = nn.Linear(d, 2 * h, bias=False)
        self.down_proj = nn.Linear(h, d, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * self.activation_fn(gate))


HandPhi3MLP.__name__ = "Phi3MLP"


def t5_cast(h, w):
    """transformers' T5 blocks: the hidden state to wo's dtype (float32 in some checkpoints), unless int8."""
    return h.to(w.dtype) if h.dtype != w.dtype and w.dtype != torch.int8 else h


class HandT5Gated(nn.Module):
    def __init__(self, d, h, p=0.0):
        super().__init__()
        self.wi_0 = nn.Linear(d, h, bias=False)
        self.wi_1 = nn.Linear(d, h, bias=False)
        self.wo = nn.Linear(h, d, bias=False)
        self.dropout = nn.Dropout(p)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        h = self.dropout(self.act(self.wi_0(x)) * self.wi_1(x))
        return self.wo(t5_cast(h, self.wo.weight))


HandT5Gated.__name__ = "T5DenseGatedActDense"


class HandT5(nn.Module):
    def __init__(self, d, h, p=0.0):
        super().__init__()
        self.wi = nn.Linear(d, h, bias=False)
        self.wo = nn.Linear(h, d, bias=False)
        self.dropout = nn.Dropout(p)
        self.act = nn.ReLU()

    def forward(self, x):
        h = self.dropout(self.act(self.wi(x)))
        return self.wo(t5_cast(h, self.wo.weight))


HandT5.__name__ = "T5DenseActDense"


class HandNeoX(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(d, h)
        self.dense_4h_to_h = nn.Linear(h, d)
        self.act = nn.GELU()

    def forward(self, x):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))


HandNeoX.__name__ = "GPTNeoXMLP"


class HandStarcoder2(nn.Module):
    def __init__(self, d, h, p=0.0):
        super().__init__()
        self.c_fc = nn.Linear(d, h)
        self.c_proj = nn.Linear(h, d)
        self.act = nn.GELU(approximate="tanh")
        self.residual_dropout = p

    def forward(self, x):
        out = self.c_proj(self.act(self.c_fc(x)))
        return F.dropout(out, p=self.residual_dropout, training=self.training)


HandStarcoder2.__name__ = "Starcoder2MLP"


@pytest.mark.parametrize("make", [
    lambda: HandPhi3MLP(16, 24), lambda: HandT5Gated(16, 24), lambda: HandT5(16, 24), lambda: HandNeoX(16, 24),
    lambda: HandStarcoder2(16, 24), lambda: HandTorchvisionMLP(16, 24),
], ids=["Phi3MLP", "T5DenseGatedActDense", "T5DenseActDense", "GPTNeoXMLP", "Starcoder2MLP", "MLPBlock"])
def test_fuse_mlps_more_blocks_hand_built(make):
    """The transformers blocks as their forwards read (CI has no transformers):
    same outputs and gradients, the same state_dict."""
    model = check_fused_block(make, (2, 5, 16))
    assert type(model).__name__.startswith("Fused")
    ttg.unfuse_mlps(model)
    assert not type(model).__name__.startswith("Fused")


class HandTorchvisionMLP(nn.Sequential):
    def __init__(self, d, h, p=0.0):
        super().__init__(nn.Linear(d, h), nn.GELU(), nn.Dropout(p), nn.Linear(h, d), nn.Dropout(p))


HandTorchvisionMLP.__name__ = "MLPBlock"


@pytest.mark.parametrize("make", [lambda: HandT5Gated(16, 24, p=0.5), lambda: HandT5(16, 24, p=0.5),
                                  lambda: HandStarcoder2(16, 24, p=0.5), lambda: HandTorchvisionMLP(16, 24, p=0.5)],
                         ids=["t5-gated", "t5", "starcoder2", "torchvision"])
def test_fuse_mlps_dropout_kept(make):
    """The block's dropout still applies in training, and not in eval."""
    torch.manual_seed(0)
    ref = make()
    model = copy.deepcopy(ref)
    assert ttg.fuse_mlps(model, warn=False).fused
    x = torch.randn(2, 5, 16)
    ref.eval()
    model.eval()
    torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-6)
    model.train()
    assert not torch.allclose(model(x), ref(x))


def test_fuse_mlps_t5_wo_kept_in_float32():
    """T5 checkpoints keep wo in float32: the block casts its hidden state to wo's dtype, fused too."""
    torch.manual_seed(0)
    ref = HandT5Gated(16, 24).to(torch.bfloat16)
    ref.wo.float()
    model = copy.deepcopy(ref)
    assert ttg.fuse_mlps(model, warn=False).fused
    x = torch.randn(2, 5, 16, dtype=torch.bfloat16)
    y = model(x)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, ref(x), rtol=2e-2, atol=2e-2)


def test_fuse_mlps_unsupported_activation():
    m = HandMlp(8, 16, act=nn.Tanh)
    report = ttg.fuse_mlps(m, warn=False)
    assert not report.fused and "unsupported activation" in report.skipped[0][1]
    assert type(m) is HandMlp


def check_fused_block(make, x_shape, dtype=torch.float32, extra_inputs=()):
    torch.manual_seed(0)
    ref = make().to(dtype)
    model = copy.deepcopy(ref)
    report = ttg.fuse_mlps(model, warn=False)
    assert report.fused, report.skipped
    assert list(model.state_dict()) == list(ref.state_dict())
    for m in (ref, model):
        m.train()
    x = torch.randn(x_shape, dtype=dtype, requires_grad=True)
    extra = [torch.randn(s, dtype=dtype) for s in extra_inputs]
    y_ref = ref(x, *extra)
    y = model(x, *extra)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-5)
    g = torch.randn_like(y)
    gr = torch.autograd.grad(y_ref, [x] + list(ref.parameters()), g)
    gm = torch.autograd.grad(y, [x] + list(model.parameters()), g)
    for a, b in zip(gm, gr):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    return model


def test_timm_blocks():
    layers = pytest.importorskip("timm.layers")
    check_fused_block(lambda: layers.Mlp(16, 40, act_layer=nn.GELU), (2, 5, 16))
    check_fused_block(lambda: layers.Mlp(16, 40, act_layer=nn.ReLU, norm_layer=nn.LayerNorm), (2, 5, 16))
    check_fused_block(lambda: layers.GluMlp(16, 40, act_layer=nn.SiLU), (2, 5, 16))
    check_fused_block(lambda: layers.GluMlp(16, 40, act_layer=nn.GELU, gate_last=False), (2, 5, 16))
    check_fused_block(lambda: layers.SwiGLU(16, 40), (2, 5, 16))
    m = layers.Mlp(16, 32, use_conv=True)
    assert not ttg.fuse_mlps(m, warn=False).fused


def test_timm_vit_model():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    ref = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=5,
                            depth=2)
    model = copy.deepcopy(ref)
    report = ttg.fuse_mlps(model, warn=False)
    ttg.swap_linear(model)
    assert len(report.fused) == 2
    torch.testing.assert_close(train_losses_images(model), train_losses_images(ref), rtol=1e-4, atol=1e-5)


def train_losses_images(model, steps=3):
    torch.manual_seed(1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    out = []
    for _ in range(steps):
        x = torch.randn(2, 3, 32, 32)
        loss = F.cross_entropy(model(x), torch.tensor([1, 3]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def test_torchvision_vit_model():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    ref = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                               hidden_dim=16, mlp_dim=40, num_classes=5)
    model = copy.deepcopy(ref)
    report = ttg.fuse_mlps(model, warn=False)
    ttg.swap_linear(model)
    assert len(report.fused) == 2 and not report.skipped
    assert list(model.state_dict()) == list(ref.state_dict())
    torch.testing.assert_close(train_losses_images(model), train_losses_images(ref), rtol=1e-4, atol=1e-5)


def test_transformers_blocks():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.modeling_bert import BertIntermediate, BertOutput
    from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
    from transformers.models.llama.modeling_llama import LlamaMLP

    llama = transformers.LlamaConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2,
                                      num_key_value_heads=2)
    check_fused_block(lambda: LlamaMLP(llama), (2, 5, 16))
    gemma_cfg = transformers.GemmaConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2,
                                         num_key_value_heads=2, head_dim=8)
    from transformers.models.gemma.modeling_gemma import GemmaMLP
    check_fused_block(lambda: GemmaMLP(gemma_cfg), (2, 5, 16))
    gpt2 = transformers.GPT2Config(n_embd=16, n_head=2, resid_pdrop=0.0)
    check_fused_block(lambda: GPT2MLP(40, gpt2), (2, 5, 16))
    bert = transformers.BertConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2,
                                   hidden_dropout_prob=0.0)
    check_fused_block(lambda: BertIntermediate(bert), (2, 5, 16))
    check_fused_block(lambda: BertOutput(bert), (2, 5, 40), extra_inputs=[(2, 5, 16)])
    from transformers.models.vit.modeling_vit import ViTConfig
    import transformers.models.vit.modeling_vit as vit
    cfg = ViTConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2)
    if hasattr(vit, "ViTMLP"):
        check_fused_block(lambda: vit.ViTMLP(cfg), (2, 5, 16))
    else:
        check_fused_block(lambda: vit.ViTIntermediate(cfg), (2, 5, 16))


def test_transformers_more_blocks():
    transformers = pytest.importorskip("transformers")
    from transformers.models.phi3.modeling_phi3 import Phi3MLP
    from transformers.models.phi.modeling_phi import PhiMLP
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXMLP
    from transformers.models.falcon.modeling_falcon import FalconMLP
    from transformers.models.starcoder2.modeling_starcoder2 import Starcoder2MLP
    from transformers.models.t5.modeling_t5 import T5DenseActDense, T5DenseGatedActDense
    from transformers.models.clip.modeling_clip import CLIPMLP
    from transformers.models.siglip.modeling_siglip import SiglipMLP

    check_fused_block(lambda: Phi3MLP(transformers.Phi3Config(hidden_size=16, intermediate_size=40,
                                                               num_attention_heads=2)), (2, 5, 16))
    check_fused_block(lambda: PhiMLP(transformers.PhiConfig(hidden_size=16, intermediate_size=40,
                                                             num_attention_heads=2)), (2, 5, 16))
    check_fused_block(lambda: GPTNeoXMLP(transformers.GPTNeoXConfig(hidden_size=16, intermediate_size=40,
                                                                     num_attention_heads=2)), (2, 5, 16))
    check_fused_block(lambda: FalconMLP(transformers.FalconConfig(hidden_size=16, num_attention_heads=2,
                                                                   ffn_hidden_size=40, bias=False)), (2, 5, 16))
    check_fused_block(lambda: Starcoder2MLP(transformers.Starcoder2Config(
        hidden_size=16, intermediate_size=40, num_attention_heads=2, residual_dropout=0.0)), (2, 5, 16))
    t5_gated = transformers.T5Config(d_model=16, d_ff=40, num_heads=2, feed_forward_proj="gated-gelu",
                                     dropout_rate=0.0)
    check_fused_block(lambda: T5DenseGatedActDense(t5_gated), (2, 5, 16))
    check_fused_block(lambda: T5DenseActDense(transformers.T5Config(d_model=16, d_ff=40, num_heads=2,
                                                                    dropout_rate=0.0)), (2, 5, 16))
    check_fused_block(lambda: CLIPMLP(transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=40,
                                                                    num_attention_heads=2, hidden_act="gelu")),
                      (2, 5, 16))
    check_fused_block(lambda: SiglipMLP(transformers.SiglipVisionConfig(hidden_size=16, intermediate_size=40,
                                                                        num_attention_heads=2)), (2, 5, 16))
    # Left alone, with the reason: CLIP's QuickGELU, Falcon's layers with a bias (rounded before the add).
    clip = CLIPMLP(transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=40, num_attention_heads=2))
    assert "unsupported activation" in ttg.fuse_mlps(clip, warn=False).skipped[0][1]
    falcon = FalconMLP(transformers.FalconConfig(hidden_size=16, num_attention_heads=2, ffn_hidden_size=40,
                                                 bias=True))
    assert "not a plain linear layer" in ttg.fuse_mlps(falcon, warn=False).skipped[0][1]


def test_transformers_t5_and_phi3_models():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=40, num_layers=2, num_heads=2,
                                feed_forward_proj="gated-gelu", dropout_rate=0.0, pad_token_id=0,
                                decoder_start_token_id=0)
    ref = transformers.T5ForConditionalGeneration(cfg)
    model = copy.deepcopy(ref)
    assert len(ttg.fuse_mlps(model, warn=False).fused) == 4  # two encoder and two decoder layers
    ids = torch.randint(0, 50, (2, 7))
    torch.testing.assert_close(model(input_ids=ids, labels=ids).loss, ref(input_ids=ids, labels=ids).loss,
                               rtol=1e-5, atol=1e-6)
    cfg = transformers.Phi3Config(vocab_size=50, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                  num_key_value_heads=2, num_hidden_layers=2, pad_token_id=0)
    ref = transformers.Phi3ForCausalLM(cfg)
    model = copy.deepcopy(ref)
    assert len(ttg.fuse_mlps(model, warn=False).fused) == 2
    torch.testing.assert_close(model(ids, labels=ids).loss, ref(ids, labels=ids).loss, rtol=1e-5, atol=1e-6)


def test_transformers_llama_model():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                   num_key_value_heads=2, num_hidden_layers=2, vocab_size=50)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(cfg)
    model = copy.deepcopy(ref)
    report = ttg.fuse_mlps(model, warn=False)
    assert len(report.fused) == 2
    ids = torch.randint(0, 50, (2, 7))
    torch.testing.assert_close(model(ids, labels=ids).loss, ref(ids, labels=ids).loss, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ CUDA families

CUDA_FAMILY_CASES = [
    # (M, N, K, dtype, env, expected kernel-name fragment or None)
    (512, 768, 256, torch.bfloat16, {}, "sm90"),
    (300, 520, 192, torch.float16, {}, "sm90"),
    (256, 384, 256, torch.bfloat16, {"TILED_CONFIG": "128x64"}, "128x64_"),
    (256, 256, 256, torch.bfloat16, {"TILED_CONFIG": "128x128pp"}, "128x128pp_"),
    (256, 256, 4096, torch.bfloat16, {"TILED_CONFIG": "128x128sk4"}, "128x128sk4_"),
    (256, 256, 8192, torch.bfloat16, {"TILED_CONFIG": "128x128sk8"}, "128x128sk8_"),
    (16, 512, 1024, torch.bfloat16, {}, None),  # skinny or one-slab
    (512, 24, 512, torch.float16, {}, None),    # small N: swapped skinny / one-slab as called
    (8, 304, 2048, torch.bfloat16, {"TILED_CONFIG": "16x128sk8c"}, "skinny_bf16_16x128sk8c_"),
    (200, 130, 70, torch.float32, {}, None),    # strict fp32: simt_fast (+ epilogue pass)
    (70, 90, 33, torch.float64, {}, "simt_general"),
    # (TILED_DISABLE_KERNELS is read once per process: no family is switched off here)
    (100, 60, 33, torch.bfloat16, {}, None),    # unaligned rows, too small to stage
]


@needs_cuda
@pytest.mark.parametrize("case", range(len(CUDA_FAMILY_CASES)))
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_cuda_families(case, layout, monkeypatch):
    M, N, K, dtype, env, frag = CUDA_FAMILY_CASES[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    torch.manual_seed(case)
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = (torch.randn(K, N, device="cuda") / K**0.5).to(dtype)
    if layout[0] == "T":
        a = a.t().contiguous().t()
    if layout[1] == "T":
        b = b.t().contiguous().t()
    name = ttg.kernel_name(a, b)
    if frag is not None and layout == "NN":
        assert frag in name, name
    bias = torch.randn(N, device="cuda").to(dtype)
    res = torch.randn(M, N, device="cuda").to(dtype)
    mul = torch.randn(M, N, device="cuda").to(dtype)
    for act in ACTS:
        for m_, r_ in ((None, None), (mul, res), (None, res)):
            out, pre = torch.ops.tiled.gemm_epilogue(a, b, bias, act, m_, r_, True)
            z, y = epilogue_reference(a, b, bias, act, m_, r_)
            # torch's own low-precision chain as the yardstick
            zt = torch.matmul(a, b) + bias
            yt = ACTS[act](zt)
            if m_ is not None:
                yt = yt * m_
            if r_ is not None:
                yt = yt + r_
            label = f"{name} {layout} {act} mul={m_ is not None} res={r_ is not None}"
            assert_like_torch(pre, zt, z, label + " pre")
            assert_like_torch(out, yt, y, label)
            # the plain path is unchanged
        plain = torch.ops.tiled.gemm(a, b, bias)
        assert_like_torch(plain, torch.matmul(a, b) + bias, epilogue_reference(a, b, bias, "none", None, None)[1],
                          name + " plain")


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_pass_vector_and_scalar(dtype):
    """The families that run the epilogue as a second pass (sm90, simt_fast)
    store acc + bias into the kept pre-activation and read it from there:
    16-byte vectors where every tensor allows them, element by element where
    one does not (a residual with an odd row stride), batched, and with no
    activation at all (the pass copies pre into the output)."""
    torch.manual_seed(5)
    for batch, (M, N, K) in ((1, (384, 512, 256)), (3, (136, 264, 128))):
        a = torch.randn(batch, M, K, device="cuda").to(dtype)
        b = (torch.randn(K, N, device="cuda") / K**0.5).to(dtype)
        bias = torch.randn(N, device="cuda").to(dtype)
        wide = torch.randn(batch, M, N + 3, device="cuda").to(dtype)
        for res in (wide[..., :N].contiguous(), wide[..., :N]):
            for act in ("none", "gelu_erf", "silu"):
                out, pre = torch.ops.tiled.gemm_epilogue(a, b, bias, act, None, res, True)
                z, y = epilogue_reference(a, b, bias, act, None, res)
                zt = torch.matmul(a, b) + bias
                label = f"{ttg.kernel_name(a[0], b)} {dtype} batch={batch} act={act} strided={not res.is_contiguous()}"
                assert_like_torch(pre, zt, z, label + " pre")
                assert_like_torch(out, ACTS[act](zt) + res, y, label)
                assert pre.data_ptr() != out.data_ptr()


@needs_cuda
def test_cuda_deterministic():
    a = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 512, device="cuda", dtype=torch.bfloat16)
    r = torch.randn(1000, 768, device="cuda", dtype=torch.bfloat16)
    outs = [ttg.linear_act(a, w, None, "gelu_tanh", r) for _ in range(3)]
    assert all(torch.equal(outs[0], o) for o in outs)
