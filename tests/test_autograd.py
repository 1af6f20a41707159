"""Autograd: backward is the same op on transposed views; gradcheck; no copies."""
import pytest
import torch

from conftest import DEVICES, DTYPES, LAYOUTS, assert_close_rel, assert_elementwise, make_operands, rand

gemm = torch.ops.tiled.gemm


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [((5, 7), (7, 4)), ((3, 5, 7), (7, 4)), ((5, 7), (3, 7, 4)), ((3, 5, 7), (3, 7, 4))])
def test_gradcheck(device, shapes):
    a = torch.randn(*shapes[0], dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(*shapes[1], dtype=torch.float64, device=device, requires_grad=True)
    c = torch.randn(shapes[1][-1], dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(gemm, (a, b, c))
    assert torch.autograd.gradcheck(lambda x, y: gemm(x, y), (a, b))
    assert torch.autograd.gradgradcheck(gemm, (a, b, c))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_grads_match_matmul(device, dtype, layout):
    a, b = make_operands(67, 45, 33, dtype, device, layout)
    bias = rand((45,), dtype, device)
    grad = rand((67, 45), dtype, device)
    a64, b64, bias64 = (t.detach().double().requires_grad_() for t in (a, b, bias))
    (a64 @ b64 + bias64).backward(grad.double())
    for t in (a, b, bias):
        t.requires_grad_()
    gemm(a, b, bias).backward(grad)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 3e-3, torch.bfloat16: 2e-2}[dtype]
    assert_close_rel(a.grad, a64.grad, dtype, tol)
    assert_close_rel(b.grad, b64.grad, dtype, tol)
    assert_close_rel(bias.grad, bias64.grad, dtype, tol)
    # element by element: grad_a = grad @ b^T, grad_b = a^T @ grad (the op on
    # transposed views), grad_bias = the column sums of grad
    a0, b0 = a.detach(), b.detach()
    assert_elementwise(a.grad, grad, b0.mT)
    assert_elementwise(b.grad, a0.mT, grad)
    assert_elementwise(bias.grad.unsqueeze(0), torch.ones(1, 67, dtype=dtype, device=device), grad)


@pytest.mark.parametrize("device", DEVICES)
def test_only_needed_grads(device):
    a, b = make_operands(16, 8, 12, torch.float32, device)
    b.requires_grad_()
    with torch.profiler.profile() as prof:
        gemm(a, b).sum().backward()
    assert a.grad is None and b.grad is not None
    # forward + one backward gemm (grad_b), not two
    assert sum(e.name == "tiled::gemm" for e in prof.events()) == 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batched", [False, True])
def test_backward_makes_no_copies(device, batched):
    shape_a = (2, 48, 32) if batched else (48, 32)
    a = torch.randn(*shape_a, device=device, requires_grad=True)
    b = torch.randn(32, 24, device=device).t().contiguous().t().requires_grad_()  # column-major weight
    bias = torch.randn(24, device=device, requires_grad=True)
    out = gemm(a, b, bias)
    grad = torch.randn_like(out)
    with torch.profiler.profile() as prof:
        # autograd.grad, not backward(): AccumulateGrad may copy a gradient to
        # match a leaf's strides (the layout contract), which is not ours.
        torch.autograd.grad(out, (a, b, bias), grad)
    names = [e.name for e in prof.events()]
    assert not set(names) & {"aten::copy_", "aten::clone", "aten::contiguous"}, names
    assert names.count("tiled::gemm") == 2, names


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward(device):
    a = torch.randn(6, 5, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, device=device, requires_grad=True)
    out = gemm(a, b)
    (ga,) = torch.autograd.grad(out.pow(2).sum(), a, create_graph=True)
    (gb,) = torch.autograd.grad(ga.sum(), b)
    a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
    (ga_ref,) = torch.autograd.grad((a2 @ b2).pow(2).sum(), a2, create_graph=True)
    (gb_ref,) = torch.autograd.grad(ga_ref.sum(), b2)
    torch.testing.assert_close(ga, ga_ref)
    torch.testing.assert_close(gb, gb_ref)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_weight_grad_in_weight_layout(device):
    # grad_weight comes out of one [out, in] row-major GEMM: no transpose copy,
    # not even AccumulateGrad's layout fix-up.
    import torch_tiled_gemm as ttg

    x = torch.randn(2, 40, 32, device=device, requires_grad=True)
    w = torch.randn(24, 32, device=device, requires_grad=True)
    bias = torch.randn(24, device=device, requires_grad=True)
    out = ttg.linear(x, w, bias)
    grad = torch.randn_like(out)
    with torch.profiler.profile() as prof:
        out.backward(grad)
    names = [e.name for e in prof.events()]
    assert not set(names) & {"aten::copy_", "aten::clone", "aten::contiguous"}, names
    assert names.count("tiled::gemm") == 2, names
    assert w.grad.is_contiguous()
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, bias))
    torch.nn.functional.linear(x64, w64, b64).backward(grad.double())
    for t, r in ((x, x64), (w, w64), (bias, b64)):
        torch.testing.assert_close(t.grad.double(), r.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_gradcheck(device):
    import torch_tiled_gemm as ttg

    x = torch.randn(2, 3, 5, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(ttg.linear, (x, w, b))
    assert torch.autograd.gradgradcheck(ttg.linear, (x, w, b))
