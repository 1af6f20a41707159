"""The Ampere-style tensor-core family (csrc/cuda/sm80): bf16, fp16 and tf32
with mma.sync, forced on for every case.

On a GPU without the Hopper family (A100, L4, RTX 30/40, sm_100+ through
PTX) the family runs by default; on an H100 / H200 it runs only with the
Hopper family off.  TILED_DISABLE_KERNELS is read once per process, so the
cases run in a child process with TILED_DISABLE_KERNELS=hopper,skinny,staging
(skinny off too, so that small M and N reach this family), one child per
dtype: every layout, both configurations, edge tiles (M, N, K not multiples
of the tile, K below one chunk, the last k-block partly past K), K split
over a small grid, batches with and without broadcast operands, bias, a
NaN-poisoned output, every element within torch_tiled_gemm/testing.py's
bound of a float64 reference, integer data compared exactly, bit-identical
repeats, NaN / Inf operands, and the alignment the family declines.  Skips without a
compute-capability >= 8.0 GPU.
"""
import os
import subprocess
import sys

import pytest
import torch

from conftest import (TF32_TOL, assert_close_rel, assert_nan_inf_match, make_operands, padded_operands as operands,
                      rand, reference, run_poisoned)

HAS_SM80 = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
pytestmark = pytest.mark.skipif(not HAS_SM80, reason="needs a compute-capability >= 8.0 GPU")

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32}
LAYOUTS = ["NN", "NT", "TN", "TT"]
FORCED = "hopper,skinny,staging"
STAGED = "hopper,skinny"  # staging copies on: run_staged


def name(a, b):
    return torch.ops.tiled.gemm_kernel_name(a, b)


def check(tag, a, b, bias=None, exact=False, expect_sm80=True):
    """One case: the kernel name, a poisoned output, the bound (or exact
    equality), and the same bits on a second run."""
    dtype = DT[tag]
    kname = name(a, b)
    if expect_sm80:
        lay = ("n" if a.stride(-1) == 1 else "t") + ("n" if b.stride(-1) == 1 else "t")
        assert kname.startswith(f"sm80_{tag}_") and kname.endswith("_" + lay), (kname, a.shape, b.shape)
    batch = a.shape[0] if a.dim() == 3 else (b.shape[0] if b.dim() == 3 else 1)
    numel = a.shape[-2] * b.shape[-1] * batch
    out, _ = run_poisoned(lambda: torch.ops.tiled.gemm(a, b, bias), numel, dtype, "cuda")
    ref = reference(a, b, bias)
    if exact:
        want = ref.to(dtype).double()
        bad = (out.double() != want).nonzero()
        assert bad.numel() == 0, (kname, f"first wrong element at {bad[0].tolist()}: "
                                  f"{out[tuple(bad[0])].item()} vs {want[tuple(bad[0])].item()}")
    else:
        assert_close_rel(out, ref, dtype, tol=TF32_TOL if tag == "tf32" else None, tf32=tag == "tf32")
    again = torch.ops.tiled.gemm(a, b, bias)
    assert torch.equal(out, again), (kname, "not bit-identical on a second run")
    return kname


# Shapes: (M, N, K).  Edges of every kind, under the rules' choice of
# configuration (sm80.cu); every configuration is also forced by name.
SHAPES = [
    (1, 1, 1), (1, 8, 8), (5, 3, 7), (16, 8, 16), (17, 9, 65),
    (127, 129, 65), (128, 128, 64), (128, 256, 64), (129, 257, 200),
    (300, 64, 1000), (257, 511, 33), (64, 300, 129), (1000, 1000, 100),
    (2048, 4096, 200), (4096, 2048, 72),
]


def configs(tag):
    """sm80.h's configurations of a dtype class that fit this GPU (the
    128 x 256 one needs 144 KB of shared memory: A100, H100; not sm_86 /
    sm_89 / sm_120)."""
    bk = 32 if tag == "tf32" else 64
    out = [f"128x128x{bk}s3"]
    if torch.cuda.get_device_properties(0).shared_memory_per_block_optin >= 144 * 1024:
        out.append(f"128x256x{bk}s3")
    return out


def run_cases(tag):
    """Every case of one dtype (in a child with the family forced)."""
    dtype = DT[tag]
    torch.backends.cuda.matmul.allow_tf32 = tag == "tf32"
    gen = torch.Generator(device="cuda").manual_seed(80)
    seen = set()
    for layout in LAYOUTS:
        for i, (M, N, K) in enumerate(SHAPES):
            a, b = operands(M, N, K, dtype, layout, gen)
            bias = rand((N,), dtype, "cuda", gen) if i % 2 else None
            # Single rows / columns / K = 1 may normalise to a unit leading
            # dimension (not 16-byte rows): declined, another kernel runs.
            degenerate = min(M, N, K) == 1
            kname = check(tag, a, b, bias, expect_sm80=not degenerate)
            if kname.startswith("sm80_"):
                seen.add(kname.split("_")[2])
        # (Grids of few tiles over a long K split K: 300 x 200 x 1000 in 2 or 4,
        # 256 x 512 x 4096 in 8, the batched one in 4 or 8; sm80.cu's build.)
        for M, N, K in [(129, 257, 200), (300, 200, 1000), (2048, 2048, 128), (256, 512, 4096)]:
            a, b = operands(M, N, K, dtype, layout, gen, ints=True)
            bias = torch.randint(-3, 4, (N,), generator=gen, device="cuda").to(dtype)
            check(tag, a, b, bias, exact=True)
        a, b = operands(130, 256, 2000, dtype, layout, gen, batch=3, ints=True)
        check(tag, a, b, torch.randint(-3, 4, (256,), generator=gen, device="cuda").to(dtype), exact=True)
        a, b = operands(130, 256, 2000, dtype, layout, gen, batch=3)
        check(tag, a, b, rand((256,), dtype, "cuda", gen))
        # K below a chunk and around k-block edges (64 16-bit / 32 fp32 elements).
        for K in (2, 3, 8, 31, 33, 63, 64, 65, 127, 129):
            a, b = operands(70, 136, K, dtype, layout, gen, ints=True)
            check(tag, a, b, exact=True)
        # Batches: strided, and a broadcast A or B (batch stride 0).
        a, b = operands(65, 130, 70, dtype, layout, gen, batch=3)
        check(tag, a, b, rand((130,), dtype, "cuda", gen))
        a1, b1 = operands(65, 130, 70, dtype, layout, gen)
        check(tag, a1.expand(3, -1, -1), b)
        check(tag, a, b1.expand(3, -1, -1), rand((130,), dtype, "cuda", gen))
        a, b = operands(200, 264, 96, dtype, layout, gen, batch=5, ints=True)
        check(tag, a, b, torch.randint(-3, 4, (264,), generator=gen, device="cuda").to(dtype), exact=True)
        # NaN and Inf operands: NaN and the same infinities where the float64
        # reference has them (tf32: the rounding keeps an infinity one).
        a, b = operands(130, 136, 72, dtype, layout, gen)
        a[3, 4], a[7, 2], b[5, 9] = float("nan"), float("inf"), float("-inf")
        assert name(a, b).startswith(f"sm80_{tag}_"), name(a, b)
        assert_nan_inf_match(torch.ops.tiled.gemm(a, b), a, b)
        # Every configuration forced by name (the rules weigh them by their
        # measured efficiency: on an H100 the 128 x 128 one, two CTAs per SM,
        # takes every grid), over edge and full tiles, bias, exact data.
        for cfg in configs(tag):
            os.environ["TILED_CONFIG"] = cfg
            try:
                for M, N, K in [(129, 257, 200), (300, 200, 1000), (257, 511, 33), (256, 512, 256)]:
                    a, b = operands(M, N, K, dtype, layout, gen, ints=True)
                    bias = torch.randint(-3, 4, (N,), generator=gen, device="cuda").to(dtype)
                    kname = check(tag, a, b, bias, exact=True)
                    assert kname.split("_")[2] == cfg, (kname, cfg)
            finally:
                del os.environ["TILED_CONFIG"]
    # The rules chose among the configurations this GPU holds.
    assert seen and seen <= set(configs(tag)), seen
    # Leading dimensions that are not multiples of 16 bytes: declined (the
    # general kernel runs them), still correct.
    for M, N, K in [(33, 35, 37), (100, 99, 130)]:
        a, b = rand((M, K), dtype, "cuda", gen), rand((K, N), dtype, "cuda", gen)
        kname = check(tag, a, b, expect_sm80=False)
        assert not kname.startswith("sm80_"), kname
    # An operand whose base is not 16-byte aligned: declined too.
    store = rand((64 * 136 + 1,), dtype, "cuda", gen)
    a = store[1:].view(64, 136)
    b = rand((136, 64), dtype, "cuda", gen)
    assert not check(tag, a, b, expect_sm80=False).startswith("sm80_")


def run_staged(tag):
    """Operands cp.async cannot copy (leading dimensions that are not
    multiples of 16 bytes): aligned copies first, then this family
    (dispatch.cu's tensor_core_plan), every layout, batches, bias."""
    dtype = DT[tag]
    torch.backends.cuda.matmul.allow_tf32 = tag == "tf32"
    gen = torch.Generator(device="cuda").manual_seed(81)
    for layout in LAYOUTS:
        for i, (M, N, K, batch) in enumerate([(1000, 1001, 999, None), (257, 130, 77, 3), (130, 67, 1030, None)]):
            a, b = make_operands(M, N, K, dtype, "cuda", layout, batch, seed=81 + i)
            kname = check(tag, a, b, rand((N,), dtype, "cuda", gen), expect_sm80=False)
            assert kname.startswith("staged_") and f"+sm80_{tag}_" in kname, (kname, layout, M, N, K)


def in_child(fn, tag, disabled):
    """test_sm80.<fn>(tag) in a child process with TILED_DISABLE_KERNELS=disabled
    (read once per process)."""
    env = dict(os.environ, TILED_DISABLE_KERNELS=disabled)
    tests = os.path.dirname(os.path.abspath(__file__))
    code = f"import test_sm80; test_sm80.{fn}({tag!r}); print('ok')"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900, cwd=tests)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-4000:] + r.stderr[-8000:]


@pytest.mark.parametrize("tag", ["bf16", "tf32"])
def test_staged_unaligned(tag):
    in_child("run_staged", tag, STAGED)


@pytest.mark.parametrize("tag", ["bf16", "f16", "tf32"])
def test_forced_every_case(tag):
    in_child("run_cases", tag, FORCED)


def test_default_choice():
    """Without switches: the Hopper family keeps its problems on a 9.0 GPU
    (when this build has it); any other sm_80+ GPU runs large bf16 on sm80."""
    if "TILED_DISABLE_KERNELS" in os.environ:
        pytest.skip("TILED_DISABLE_KERNELS is set for this process")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    kname = name(a, a)
    if torch.cuda.get_device_capability() == (9, 0) and kname.startswith("sm90"):
        return
    assert kname.startswith("sm80_bf16_"), kname
