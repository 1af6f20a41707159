"""TiledLinear and swap_linear: a drop-in nn.Linear."""
import copy

import pytest
import torch
from torch import nn

import torch_tiled_gemm as ttg
from conftest import DEVICES, DTYPES, assert_elementwise


def make_model(device):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(16, 32), nn.GELU(), nn.Sequential(nn.Linear(32, 32, bias=False), nn.ReLU()), nn.Linear(32, 8)
    ).to(device)


def test_constructor_init_state_dict():
    torch.manual_seed(1)
    ref = nn.Linear(10, 6)
    torch.manual_seed(1)
    lin = ttg.TiledLinear(10, 6)
    assert isinstance(lin, nn.Linear)
    torch.testing.assert_close(lin.weight, ref.weight)
    torch.testing.assert_close(lin.bias, ref.bias)
    assert lin.state_dict().keys() == ref.state_dict().keys()
    lin2 = ttg.TiledLinear(10, 6, bias=False, dtype=torch.float64)
    assert lin2.bias is None and lin2.weight.dtype == torch.float64
    # nn.Linear checkpoint loads into TiledLinear and back.
    lin.load_state_dict(nn.Linear(10, 6).state_dict())
    nn.Linear(10, 6).load_state_dict(lin.state_dict())
    assert "in_features=10" in repr(lin)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_outputs_and_grads_match_linear(device, dtype):
    lin = nn.Linear(24, 12, device=device, dtype=dtype)
    tl = ttg.TiledLinear.from_linear(copy.deepcopy(lin))
    x = torch.randn(3, 5, 24, device=device, dtype=dtype, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, ref = tl(x2), lin(x)
    torch.testing.assert_close(out, ref)
    g = torch.randn_like(ref)
    ref.backward(g)
    out.backward(g)
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(tl.weight.grad, lin.weight.grad)
    torch.testing.assert_close(tl.bias.grad, lin.bias.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_outputs_and_grads_elementwise(device, dtype):
    # Forward and every gradient of TiledLinear within the element-wise
    # bound of the GEMM each one is: y = x W^T + b, dx = g W, dW = g^T x
    # (one GEMM over all rows), db = the column sums of g.
    torch.manual_seed(3)
    tl = ttg.TiledLinear(96, 40, device=device, dtype=dtype)
    x = torch.randn(3, 50, 96, device=device).to(dtype).requires_grad_()
    out = tl(x)
    g = torch.randn(out.shape, device=device).to(dtype)
    out.backward(g)
    x2, g2, w = x.detach().reshape(-1, 96), g.reshape(-1, 40), tl.weight.detach()
    assert_elementwise(out.reshape(-1, 40), x2, w.t(), tl.bias.detach())
    assert_elementwise(x.grad.reshape(-1, 96), g2, w)
    assert_elementwise(tl.weight.grad, g2.t(), x2)
    assert_elementwise(tl.bias.grad.unsqueeze(0), torch.ones(1, 150, device=device, dtype=dtype), g2)


def test_from_linear_shares_parameters():
    lin = nn.Linear(4, 3)
    tl = ttg.TiledLinear.from_linear(lin)
    assert tl.weight is lin.weight and tl.bias is lin.bias
    assert type(lin) is nn.Linear  # the original is untouched
    tl.register_buffer("extra", torch.zeros(1))
    assert "extra" not in dict(lin.named_buffers())


@pytest.mark.parametrize("device", DEVICES)
def test_swap_linear_trains_like_linear(device):
    ref = make_model(device)
    model = copy.deepcopy(ref)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # built BEFORE the swap
    params_before = [id(p) for p in model.parameters()]
    ttg.swap_linear(model)
    assert [id(p) for p in model.parameters()] == params_before
    assert sum(isinstance(m, ttg.TiledLinear) for m in model.modules()) == 3
    assert not any(type(m) is nn.Linear for m in model.modules())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(2)
    for _ in range(3):
        x = torch.randn(10, 16, device=device)
        y = torch.randn(10, 8, device=device)
        for m, o in ((model, opt), (ref, opt_ref)):
            o.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    # state_dict round trip into a plain model
    plain = make_model(device)
    plain.load_state_dict(model.state_dict())
    x = torch.randn(4, 16, device=device)
    torch.testing.assert_close(plain(x), model(x), rtol=1e-4, atol=1e-5)


def test_swap_linear_filter_and_bare_linear():
    model = make_model("cpu")
    ttg.swap_linear(model, filter=lambda name, m: name != "0")
    assert type(model[0]) is nn.Linear and isinstance(model[3], ttg.TiledLinear)
    assert isinstance(model[2][0], ttg.TiledLinear)
    bare = ttg.swap_linear(nn.Linear(3, 2))
    assert isinstance(bare, ttg.TiledLinear)
    # idempotent
    ttg.swap_linear(model)
    assert sum(isinstance(m, ttg.TiledLinear) for m in model.modules()) == 3


class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D as its forward reads (CI has no transformers)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.2)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


class GPT2Like(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(24, 8)
        self.c_proj = Conv1D(8, 24)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.c_proj(torch.tanh(self.c_attn(x))))


def test_swap_linear_conv1d():
    """transformers' Conv1D layers change class in place: same module, Parameters
    and state_dict; outputs, gradients and training as before; filter applies."""
    torch.manual_seed(0)
    ref = GPT2Like()
    model = copy.deepcopy(ref)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    c_attn, c_proj = model.c_attn, model.c_proj
    params_before = [id(p) for p in model.parameters()]
    assert ttg.swap_linear(model) is model
    assert model.c_attn is c_attn and model.c_proj is c_proj  # the same modules
    assert [id(p) for p in model.parameters()] == params_before
    assert type(model.c_attn).__name__ == "TiledConv1D" and isinstance(model.c_attn, Conv1D)
    assert isinstance(model.head, ttg.TiledLinear)
    assert list(model.state_dict()) == list(ref.state_dict())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(2, 5, 8)
        for m, o in ((model, opt), (ref, opt_ref)):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    ref.load_state_dict(model.state_dict())
    # idempotent; the filter keeps a layer as it is
    ttg.swap_linear(model)
    assert type(model.c_attn).__name__ == "TiledConv1D"
    kept = ttg.swap_linear(GPT2Like(), filter=lambda name, m: name != "c_proj")
    assert type(kept.c_proj) is Conv1D and type(kept.c_attn).__name__ == "TiledConv1D"


def test_swap_linear_transformers_gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_embd=32, n_head=2, n_layer=2, vocab_size=50, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(cfg)
    model = copy.deepcopy(ref)
    ttg.swap_linear(model)
    assert sum(type(m).__name__ == "TiledConv1D" for m in model.modules()) == 8  # 4 a layer
    assert len(ttg.fuse_mlps(model, warn=False).fused) == 2  # composes: the MLPs' swapped layers still read
    ids = torch.randint(0, 50, (2, 9))
    torch.testing.assert_close(model(ids, labels=ids).loss, ref(ids, labels=ids).loss, rtol=1e-5, atol=1e-6)


def test_swap_linear_falcon_layers():
    """transformers' FalconLinear (x @ W.T, then + bias after a rounding): swapped without a bias only."""
    class FalconLinear(nn.Linear):
        def forward(self, x):
            h = x @ self.weight.T
            return h if self.bias is None else h + self.bias

    torch.manual_seed(0)
    model = nn.Sequential(FalconLinear(8, 16, bias=False), nn.ReLU(), FalconLinear(16, 4))
    ref = copy.deepcopy(model)
    ttg.swap_linear(model)
    assert isinstance(model[0], ttg.TiledLinear) and type(model[2]) is FalconLinear
    assert list(model.state_dict()) == list(ref.state_dict())
    x = torch.randn(3, 8)
    torch.testing.assert_close(model(x), ref(x), rtol=1e-5, atol=1e-6)
    transformers = pytest.importorskip("transformers")
    cfg = transformers.FalconConfig(hidden_size=32, num_attention_heads=2, num_hidden_layers=2, vocab_size=50,
                                    bias=False, new_decoder_architecture=False)
    torch.manual_seed(0)
    ref = transformers.FalconForCausalLM(cfg)
    model = copy.deepcopy(ref)
    ttg.swap_linear(model)
    assert not any(type(m).__name__ == "FalconLinear" for m in model.modules())
    ids = torch.randint(0, 50, (2, 9))
    torch.testing.assert_close(model(ids, labels=ids).loss, ref(ids, labels=ids).loss, rtol=1e-5, atol=1e-6)


def test_swap_linear_peft_lora_gpt2():
    """LoRA through peft on GPT-2 (fan_in_fan_out: the adapters wrap Conv1D layers): the wrapped
    Conv1D and the adapters' Linears are swapped; the same loss and gradients of the trainable ones."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    cfg = transformers.GPT2Config(n_embd=32, n_head=2, n_layer=2, vocab_size=50, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_fc"], fan_in_fan_out=True,
                           lora_dropout=0.0)
    ref = peft.get_peft_model(transformers.GPT2LMHeadModel(cfg), lora)
    for n, p in ref.named_parameters():
        if "lora_B" in n:
            nn.init.normal_(p, std=0.1)  # (zero at init: the adapters' path would not count)
    model = copy.deepcopy(ref)
    ttg.swap_linear(model)
    assert sum(type(m).__name__ == "TiledConv1D" for m in model.modules()) == 8
    assert sum(isinstance(m, ttg.TiledLinear) for m in model.modules()) == 9  # 4 adapters x A, B + lm_head
    ids = torch.randint(0, 50, (2, 9))
    losses = [m(ids, labels=ids).loss for m in (model, ref)]
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    for loss in losses:
        loss.backward()
    grads = [[p.grad for p in m.parameters() if p.requires_grad] for m in (model, ref)]
    assert len(grads[0]) == 8
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
