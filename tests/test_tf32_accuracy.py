"""tf32 accuracy of the sm_90a kernels: operands are rounded to tf32 to
nearest (as cuBLAS does), not truncated, in every configuration dispatch can
choose (register A, A and B rounded in shared memory, ping-pong, split-K,
stream-K, clusters, swapped, staged).

Two checks per configuration, on fresh random inputs:
- sharp: ours matches the float64 product of the operands rounded to tf32
  to nearest far more closely than the product of the truncated operands
  differs from it (so neither operand may be truncated, anywhere);
- against cuBLAS: ours is no more than 1.2x cuBLAS's error against float64.
"""
import pytest
import torch

from conftest import make_operands, needs_cuda, reference, rel_err, tf32_mode
from torch_tiled_gemm.functional import gemm, kernel_name

pytestmark = needs_cuda


def is_hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def tf32_rounded(x, nearest=True):
    """fp32 values rounded to tf32's 10 mantissa bits: to nearest (ties away
    from zero, cvt.rna) or truncated."""
    bits = x.float().contiguous().view(torch.int32)
    if nearest:
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32).reshape(x.shape)


# (name, env switches, M, N, K, layout, batch, kernel-name fragment)
CASES = [
    ("coop_256_c2", {}, 4096, 4096, 256, "NT", None, "128x256c2"),
    ("coop_256", {"TILED_SM90_CLUSTER": "1"}, 4096, 4096, 256, "NT", None, "128x256_"),
    ("narrow_128x64", {}, 1024, 1024, 2048, "NT", None, "128x64"),
    ("tile_128x128", {"TILED_SM90_CLUSTER": "1"}, 640, 1152, 512, "NT", None, None),
    ("tile_192", {}, 1536, 1536, 512, "NN", None, "128x192"),
    ("streamk", {"TILED_SM90_STREAMK": "1"}, 1536, 4096, 2048, "NT", None, "streamk"),
    ("splitk", {"TILED_SM90_SPLITK": "2"}, 128, 1024, 4096, "NT", None, "sk2"),
    ("pingpong", {"TILED_SM90_SCHEDULE": "pingpong"}, 1024, 1024, 512, "NT", None, "pp"),
    ("nn_swapped", {}, 1000, 1032, 777, "NN", None, None),
    ("tt_register_a", {}, 1024, 1040, 520, "TT", None, None),
    ("tn_staged", {}, 512, 520, 1000, "TN", None, "staged"),
    ("nt_small_m", {}, 48, 4096, 1024, "NT", None, None),
    ("batched", {}, 256, 264, 520, "NT", 3, None),
    ("edges", {}, 130, 200, 77, "NT", None, None),
    ("smallm_idle_slab", {"TILED_SM90_SMALLM": "1", "TILED_SM90_SLAB": "0"}, 200, 1024, 1024, "NT", None, None),
]


@pytest.fixture
def tf32():
    with tf32_mode(True):
        yield


@pytest.mark.skipif(not is_hopper(), reason="the tf32 tensor-core kernels need an H100/H200")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tf32_rounds_to_nearest(case, tf32, monkeypatch):
    name, env, M, N, K, layout, batch, frag = case
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=batch)
    kname = kernel_name(a, b)
    assert "tf32" in kname, kname
    if frag is not None:
        assert frag in kname, (kname, frag)
    out = gemm(a, b).double()
    ref_rn = reference(tf32_rounded(a), tf32_rounded(b))
    ref_tr = reference(tf32_rounded(a, False), tf32_rounded(b, False))
    # only A or only B truncated: each must be caught as well
    ref_tr_a = reference(tf32_rounded(a, False), tf32_rounded(b))
    ref_tr_b = reference(tf32_rounded(a), tf32_rounded(b, False))
    dist = (out - ref_rn).norm().item()
    for other in (ref_tr, ref_tr_a, ref_tr_b):
        gap = (other - ref_rn).norm().item()
        assert dist < 0.05 * gap, f"{kname}: |ours - rounded| {dist:.3e} vs |truncated - rounded| {gap:.3e}"


@pytest.mark.skipif(not is_hopper(), reason="the tf32 tensor-core kernels need an H100/H200")
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1024, 1024, 8192), (128, 4096, 4096), (777, 1000, 3000)])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_tf32_error_within_cublas(shape, layout, tf32):
    M, N, K = shape
    a, b = make_operands(M, N, K, torch.float32, "cuda", layout)
    assert "tf32" in kernel_name(a, b)
    ref = reference(a, b)
    ours = rel_err(gemm(a, b), ref)
    cublas = rel_err(torch.matmul(a, b), ref)
    assert ours <= 1.2 * cublas, f"{kernel_name(a, b)}: ours {ours:.3e}, cuBLAS {cublas:.3e}"
