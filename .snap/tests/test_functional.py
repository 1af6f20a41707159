"""matmul and linear: torch's semantics through the op."""
import pytest
import torch
import torch.nn.functional as F

import torch_tiled_gemm as ttg
from conftest import DEVICES

SHAPES = [
    ((7,), (7,)), ((7,), (7, 3)), ((5, 7), (7,)), ((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((2, 5, 7), (7,)),
    ((7,), (2, 7, 3)), ((2, 1, 5, 7), (3, 7, 4)), ((3, 5, 7), (1, 7, 4)), ((4, 2, 5, 7), (4, 2, 7, 3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_matches_torch(device, sa, sb):
    a = torch.randn(sa, dtype=torch.float64, device=device)
    b = torch.randn(sb, dtype=torch.float64, device=device)
    ref = torch.matmul(a, b)
    out = ttg.matmul(a, b)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_errors(device):
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ttg.matmul(torch.randn(3, 4, device=device), torch.randn(5, 6, device=device))
    with pytest.raises(RuntimeError, match="at least 1D"):
        ttg.matmul(torch.tensor(1.0, device=device), torch.randn(5, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape", [(7,), (5, 7), (2, 3, 7), (0, 7)])
@pytest.mark.parametrize("use_bias", [False, True])
def test_linear_matches_F_linear(device, xshape, use_bias):
    x = torch.randn(xshape, dtype=torch.float64, device=device)
    w = torch.randn(4, 7, dtype=torch.float64, device=device)
    bias = torch.randn(4, dtype=torch.float64, device=device) if use_bias else None
    torch.testing.assert_close(ttg.linear(x, w, bias), F.linear(x, w, bias))


def test_linear_errors():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ttg.linear(torch.randn(3, 5), torch.randn(4, 7))
    with pytest.raises(RuntimeError, match="bias must be 1-D"):
        ttg.linear(torch.randn(3, 5), torch.randn(4, 5), torch.randn(5))
    with pytest.raises(RuntimeError, match="weight must be 2-D"):
        ttg.linear(torch.randn(3, 5), torch.randn(5))
