"""torch.compile (fake kernel, dynamic shapes) and torch.library.opcheck."""
import pytest
import torch

import torch_tiled_gemm as ttg
from conftest import DEVICES, HAS_CUDA, make_operands, rand

gemm = torch.ops.tiled.gemm


def opcheck_cases(device):
    dtypes = [torch.float32, torch.float64] + ([torch.float16, torch.bfloat16] if device == "cuda" else [])
    for dtype in dtypes:
        for layout in ("NN", "NT", "TN", "TT"):
            a, b = make_operands(9, 7, 5, dtype, device, layout)
            yield (a.requires_grad_(), b.requires_grad_(), None)
        a, b = make_operands(4, 6, 3, dtype, device, "NN", batch=2)
        yield (a, b.requires_grad_(), rand((6,), dtype, device).requires_grad_())
        a, b = make_operands(33, 17, 65, dtype, device, "TN")
        yield (a, b, rand((17,), dtype, device))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for args in opcheck_cases(device):
        torch.library.opcheck(gemm, args)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_linear(device):
    for xs in ((5, 7), (2, 3, 7), (7,)):
        x = torch.randn(xs, device=device, requires_grad=True)
        w = torch.randn(4, 7, device=device, requires_grad=True)
        torch.library.opcheck(torch.ops.tiled.linear, (x, w, torch.randn(4, device=device, requires_grad=True)))
        torch.library.opcheck(torch.ops.tiled.linear, (x, w, None))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_ladder_schema(device):
    if device != "cuda":
        pytest.skip("the ladder op runs on CUDA only")
    a, b = make_operands(33, 17, 65, torch.float32, device, "NN")
    torch.library.opcheck(torch.ops.tiled.gemm_ladder, (a, b, 1),
                          test_utils=("test_schema", "test_faketensor"))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ttg.TiledLinear(32, 64)
        self.fc2 = ttg.TiledLinear(64, 16)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_dynamic(device):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = MLP().to(device)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    for n in (3, 17, 40):
        x = torch.randn(n, 32, device=device, requires_grad=True)
        out = compiled(x)
        ref = model(x)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
    # Dynamic shapes: one graph for all batch sizes.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, dict(torch._dynamo.utils.counters["stats"])


@pytest.mark.parametrize("device", DEVICES)
def test_compile_op_direct(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(a, b, c):
        return gemm(a, b, c) * 2

    a, b = make_operands(12, 10, 8, torch.float32, device, "TN")
    c = rand((10,), torch.float32, device)
    torch.testing.assert_close(f(a, b, c), (a @ b + c) * 2)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(3, 5, 7, device="cuda")
        b = torch.empty(7, 4, device="cuda")
        assert gemm(a, b).shape == (3, 5, 4)
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            gemm(b, b)
