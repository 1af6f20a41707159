"""Autocast: the op runs in the autocast dtype, like aten::mm."""
import pytest
import torch

from conftest import DEVICES, assert_close_rel, assert_elementwise, make_operands, rand, reference

gemm = torch.ops.tiled.gemm


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_dtype(device):
    dtypes = [torch.bfloat16] + ([torch.float16] if device == "cuda" else [])
    a, b = make_operands(37, 29, 45, torch.float32, device, "NT")
    bias = rand((29,), torch.float32, device)
    for dtype in dtypes:
        with torch.autocast(device, dtype=dtype):
            out = gemm(a, b, bias)
            mm = torch.mm(a, b)
        assert out.dtype == mm.dtype == dtype
        assert_close_rel(out, reference(a.to(dtype), b.to(dtype), bias.to(dtype)), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_backward(device):
    a, b = make_operands(16, 8, 12, torch.float32, device)
    a.requires_grad_()
    b.requires_grad_()
    with torch.autocast(device, dtype=torch.bfloat16):
        out = gemm(a, b)
    out.float().sum().backward()
    assert a.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
    ref_a = torch.ones(16, 8, dtype=torch.float64, device=device) @ b.detach().double().t()
    assert_close_rel(a.grad, ref_a, torch.float32, tol=1e-2)
    # computed in bf16 (ones @ b^T), then widened: exact in bf16, each
    # element within the bf16 bound
    g = a.grad.to(torch.bfloat16)
    assert torch.equal(g.float(), a.grad)
    assert_elementwise(g, torch.ones(16, 8, dtype=torch.bfloat16, device=device), b.detach().to(torch.bfloat16).t())


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_leaves_float64_and_disabled(device):
    a, b = make_operands(5, 4, 3, torch.float64, device)
    with torch.autocast(device, dtype=torch.bfloat16):
        assert gemm(a, b).dtype == torch.float64
    a, b = make_operands(5, 4, 3, torch.float32, device)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=False):
        assert gemm(a, b).dtype == torch.float32


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_fused_ops(device):
    # linear_act / gated_linear / gemm_epilogue run in the autocast dtype, every
    # floating-point argument cast (the residual too); the gradients reach the
    # float32 parameters in float32.
    from torch_tiled_gemm.ops import _activation

    dt = torch.bfloat16
    x = rand((6, 24), torch.float32, device).requires_grad_()
    w = rand((16, 24), torch.float32, device).requires_grad_()
    w2 = rand((16, 24), torch.float32, device)
    bias = rand((16,), torch.float32, device)
    res = rand((6, 16), torch.float32, device)
    with torch.autocast(device, dtype=dt):
        y = torch.ops.tiled.linear_act(x, w, bias, "gelu_tanh", res)
        g = torch.ops.tiled.gated_linear(x, w, w2, "silu")
        e, _ = torch.ops.tiled.gemm_epilogue(x, w.t(), bias, "relu", None, None, False)
    assert y.dtype == g.dtype == e.dtype == dt
    xb, wb, w2b = x.detach().to(dt).double(), w.detach().to(dt).double(), w2.detach().to(dt).double()
    z = xb @ wb.t() + bias.to(dt).double()
    assert_close_rel(y, _activation(z, "gelu_tanh") + res.to(dt).double(), dt)
    assert_close_rel(g, torch.nn.functional.silu(xb @ wb.t()) * (xb @ w2b.t()), dt)
    assert_close_rel(e, torch.relu(z), dt)
    (y.float().sum() + g.float().sum()).backward()
    assert x.grad.dtype == w.grad.dtype == torch.float32
