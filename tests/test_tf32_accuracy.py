"""tf32 accuracy of the sm_90a kernels.  cuBLAS rounds both operands to
tf32 to nearest; so does ours: TMA rounds fp32 operands loaded through a
TFLOAT32 tensor map (ties to even) on their way into shared memory, where
wgmma alone would truncate them (docs/hopper.md round 24).

On fresh random inputs, per configuration: ours matches the float64 product
of both operands rounded far more closely than any other combination of
rounded and truncated operands differs from it (so an operand truncated
shows); and the error against float64 stays within 1.2x cuBLAS's (measured
1.00; 2.7x when both were truncated).
"""
import pytest
import torch

from conftest import make_operands, needs_cuda, reference, rel_err, tf32_mode
from torch_tiled_gemm.functional import gemm, kernel_name

pytestmark = needs_cuda


def is_hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def tf32_rounded(x, nearest=True):
    """Finite fp32 values rounded to tf32's 10 mantissa bits: to nearest,
    ties to even (as TMA's TFLOAT32 loads round), or truncated."""
    bits = x.float().contiguous().view(torch.int32)
    if nearest:
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    return (bits & ~0x1FFF).view(torch.float32).reshape(x.shape)


# (name, environment (a configuration forced by name), M, N, K, layout,
# batch, kernel-name fragment)
CASES = [
    ("coop_256_c2", {}, 4096, 4096, 256, "NT", None, "128x256c2"),
    ("coop_256", {"TILED_CONFIG": "128x256"}, 4096, 4096, 256, "NT", None, "128x256_"),
    ("narrow_128x64", {}, 1024, 1024, 2048, "NT", None, "128x64"),
    ("tile_128x64_640", {"TILED_CONFIG": "128x64"}, 640, 1152, 512, "NT", None, "128x64_"),
    ("tile_192", {}, 1536, 1536, 512, "NN", None, "128x192"),
    ("streamk", {"TILED_CONFIG": "128x128streamk"}, 1536, 4096, 2048, "NT", None, "128x128streamk"),
    ("splitk", {"TILED_CONFIG": "128x128sk2"}, 128, 1024, 4096, "NT", None, "128x128sk2"),
    ("pingpong", {"TILED_CONFIG": "128x128pp"}, 1024, 1024, 512, "NT", None, "128x128pp"),
    ("nn_swapped", {}, 1000, 1032, 777, "NN", None, None),
    ("tt_register_a", {}, 1024, 1040, 520, "TT", None, None),
    ("tn_staged", {}, 512, 520, 1000, "TN", None, "staged"),
    ("nt_small_m", {}, 48, 4096, 1024, "NT", None, None),
    ("batched", {}, 256, 264, 520, "NT", 3, None),
    ("edges", {}, 130, 200, 77, "NT", None, None),
]


@pytest.fixture
def tf32():
    with tf32_mode(True):
        yield


@pytest.mark.skipif(not is_hopper(), reason="the tf32 tensor-core kernels need an H100/H200")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tf32_rounding(case, tf32, monkeypatch):
    name, env, M, N, K, layout, batch, frag = case
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=batch)
    kname = kernel_name(a, b)
    assert "tf32" in kname, kname
    if frag is not None:
        assert frag in kname, (kname, frag)
    out = gemm(a, b).double()
    # Every configuration, whichever operand it reads through registers and
    # whether it runs C^T = B^T A^T: both operands rounded to nearest.
    dist = {(ra, rb): (out - reference(tf32_rounded(a, ra), tf32_rounded(b, rb))).norm().item()
            for ra in (True, False) for rb in (True, False)}
    best = min(dist, key=dist.get)
    assert best == (True, True), f"{kname}: closest to A rounded {best[0]}, B rounded {best[1]}: {dist}"
    # sharply: the inputs of the two kinds of rounding differ by a tf32 ulp
    gap = min((reference(tf32_rounded(a, ra), tf32_rounded(b, rb)) -
               reference(tf32_rounded(a, best[0]), tf32_rounded(b, best[1]))).norm().item()
              for ra, rb in dist if (ra, rb) != best)
    assert dist[best] < 0.05 * gap, f"{kname}: {dist[best]:.3e} from the nearest, {gap:.3e} between candidates"


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
