"""The small-M / small-N tensor-core kernel (csrc/cuda/skinny): bf16, fp16 and
fp32 with TF32 allowed (this module allows it; tf32 runs its k-blocks of 32
elements, so its K are halved to keep the k-block counts the 16-bit cases
have), with min(M, N) <= 64, K split over the SMs and reduced
deterministically.

Every block height (16, 32, 64), several row tiles (a forced 32-row
configuration on up to 128 rows), every layout, K slices forced and automatic,
the swapped orientation (small N), batches, broadcast, bias, edges (M, N, K
not multiples of the tiles, K < 8), padded views, and bit-identical repeats.
Runs on sm_80 or newer.  Where the rules would give a shape to the Hopper
kernel's one-slab tiles (tests/test_hopper.py, test_slab_over_skinny) the
test forces the skinny configuration by name (TILED_CONFIG,
docs/dispatch.md): these tests are about the skinny kernel.
"""
import re

import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from conftest import (TF32_TOL, as_layout, assert_close_rel, graph_replay, padded_operands, rand, reference,
                      run_poisoned, tf32_mode)

HAS_SM80 = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
pytestmark = pytest.mark.skipif(not HAS_SM80, reason="needs a compute-capability >= 8.0 GPU")
HOPPER = HAS_SM80 and torch.cuda.get_device_capability() == (9, 0)

gemm = torch.ops.tiled.gemm
HALF = [torch.bfloat16, torch.float16]
TC = HALF + [torch.float32]  # float32: tf32 (allowed in this module)
TAG = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "tf32"}
LAYOUTS = ["NN", "NT", "TN", "TT"]


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    monkeypatch.delenv("TILED_CONFIG", raising=False)
    with tf32_mode(True):
        yield


def kk(K, dtype):
    """K of as many k-blocks in `dtype` as K has in a 16-bit dtype (a k-block
    is 128 bytes of K: 64 16-bit elements, 32 fp32)."""
    return K if dtype != torch.float32 else K // 2


def tol_for(dtype):
    """The whole-matrix bound: tf32's for fp32 (TF32 allowed here), else the dtype's."""
    return TF32_TOL if dtype == torch.float32 else None


def rules_take(dtype, layout):
    """Whether the rules surely give a skinny shape to this kernel: on a
    Hopper, tf32 goes to the Hopper kernel wherever that reads the operands
    in place (NT and TT; NN mostly, as C^T = B^T A^T: dispatch.cu's
    hopper_over_skinny), so only TN surely comes here."""
    return not (HOPPER and dtype == torch.float32 and layout != "TN")


def force(monkeypatch, config):
    """Runs the configuration named `config` (docs/dispatch.md) where it can
    take the problem; None: the rules."""
    if config is None:
        monkeypatch.delenv("TILED_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TILED_CONFIG", config)


def operands(M, N, K, dtype, layout, seed, batch=None, ints=False):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return padded_operands(M, N, K, dtype, layout, gen, batch, ints)


def name(a, b):
    return torch.ops.tiled.gemm_kernel_name(a, b)


def expected_bm(small):
    return 16 if small <= 16 else 32 if small <= 32 else 64


def skinny(dtype, layout, variant, swap=False):
    """The full name of a skinny configuration."""
    return f"skinny_{TAG[dtype]}_{variant}_{layout.lower()}" + ("_swap" if swap else "")


def assert_runs(a, b, dtype, layout, variant):
    """The problem runs on the skinny configuration `variant` where this GPU
    has it (a cluster reduction needs sm_90a on a 9.0 GPU, the 64-row deep
    pipeline more shared memory than an sm_80 GPU's: elsewhere the forced
    name is declined and the rules' skinny choice runs)."""
    nm = name(a, b)
    if not HOPPER and (re.search(r"sk\d+c", variant) or (variant.startswith("64x") and variant.endswith("deep"))):
        assert nm.startswith("skinny_"), nm
    else:
        assert nm == skinny(dtype, layout, variant), nm


def check(a, b, bias=None, exact=False):
    M, N = a.shape[-2], b.shape[-1]
    numel = M * N * (a.shape[0] if a.dim() == 3 else 1)
    out, _ = run_poisoned(lambda: gemm(a, b, bias), numel, a.dtype, "cuda")
    ref = reference(a, b, bias)
    if exact:  # integer data: the float64 sum is exact, then one rounding to the dtype
        ref = ref.to(a.dtype).double()
        bad = (out.double() != ref).nonzero()
        assert bad.numel() == 0, f"first wrong element at {bad[0].tolist()}: {out[tuple(bad[0])]} vs {ref[tuple(bad[0])]}"
    else:
        assert_close_rel(out, ref, a.dtype, tol_for(a.dtype))
    return out


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [1, 16, 17, 32, 33, 64])
def test_exact_each_block_height(monkeypatch, dtype, layout, M):
    N, K = 300, kk(200, dtype)  # 3 column tiles, the last partial; K = 3 k-blocks + 8 (tf32: + 4)
    force(monkeypatch, f"{expected_bm(M)}x128sk1")
    a, b = operands(M, N, K, dtype, layout, seed=M, ints=True)
    assert name(a, b) == skinny(dtype, layout, f"{expected_bm(M)}x128sk1")
    bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype)
    check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("splits", [1, 2, 8])
@pytest.mark.parametrize("cluster", ["c", ""], ids=["cluster", "workspace"])
def test_exact_forced_splits(monkeypatch, dtype, layout, splits, cluster):
    """S = 2 and 8 reduce through a cluster on sm_90 (`c`) or the workspace;
    a K of one k-block declines a split (the rules' S = 1 runs).  S = 8 on
    the 9 k-blocks of K = 520 is left out (a cluster declines it)."""
    for M, N, K in [(7, 136, kk(1000, dtype)), (40, 257, kk(520, dtype)), (64, 128, kk(64, dtype))]:
        if splits == 8 and K == kk(520, dtype):
            continue
        variant = f"{expected_bm(M)}x128sk{splits}" + (cluster if splits > 1 else "")
        force(monkeypatch, variant)
        a, b = operands(M, N, K, dtype, layout, seed=M + splits, ints=True)
        if K > kk(64, dtype):
            assert_runs(a, b, dtype, layout, variant)
        elif rules_take(dtype, layout):  # one k-block: the split is declined, the rules run
            assert_runs(a, b, dtype, layout, f"{expected_bm(M)}x128sk1")
        bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype) if M % 2 else None
        check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("splits", [16, 32])
def test_exact_many_splits(monkeypatch, dtype, layout, splits):
    """S = 16 and 32 (workspace only: a portable cluster has at most 8 CTAs),
    on K of 33 k-blocks (S = 32: 17 slices of 2, none empty) and on one that
    has fewer k-blocks than S (the forced split declines it)."""
    variant = f"16x128sk{splits}"
    force(monkeypatch, variant)
    a, b = operands(9, 300, kk(2100, dtype), dtype, layout, seed=splits, ints=True)
    assert_runs(a, b, dtype, layout, variant)
    check(a, b, torch.randint(-3, 4, (300,), device="cuda").to(dtype), exact=True)
    a, b = operands(9, 300, kk(64 * 12, dtype), dtype, layout, seed=splits + 1, ints=True)
    assert not name(a, b).startswith(skinny(dtype, layout, variant))
    check(a, b, exact=True)


def m_major_splits(tiles, k_blocks, sms):
    """Mirror of skinny.cu's auto_splits for an A read along M (a_kmajor
    false): S up to 32 while tiles * S <= 2.4 x SMs, each slice >= 4 k-blocks."""
    s = 1
    while s < 32 and tiles * s * 2 <= 24 * sms // 10 and k_blocks >= 8 * s:
        s *= 2
    return s


@pytest.mark.skipif(not HOPPER, reason="the rules' split counts for a Hopper's SMs")
@pytest.mark.parametrize("dtype", TC)
def test_m_major_a_splits(dtype):
    """LoRA weight gradients (TN) and small-N products run swapped (NN, TN):
    the A the kernel reads along M gets up to two CTAs per SM of K slices,
    reduced through the workspace, and the result is right."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K, layout in [(16, 768, 12608, "TN"), (8, 4096, 4096, "TN"), (4096, 8, 4096, "NN"),
                            (14336, 16, 8192, "TN"), (16, 4096, 8192, "TT")]:
        if not rules_take(dtype, layout):
            continue
        small, big = min(M, N), max(M, N)
        tiles = -(-small // 16) * -(-big // 128)
        s = m_major_splits(tiles, -(-K // kk(64, dtype)), sms)
        a, b = operands(M, N, K, dtype, layout, seed=K + M)
        want = skinny(dtype, layout, f"16x128sk{s}") + ("_swap" if M > N else "")
        assert name(a, b) == want, (M, N, K, layout, name(a, b), want)
        check(a, b)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_decode_shapes(monkeypatch, dtype, layout):
    """The K splits the rules give model-sized shapes (where the one-slab
    tiles do not take them), random data, against float64."""
    for M, N, K, variant in [(1, 4096, 4096, "16x128sk4c"), (8, 14336, 4096, "16x128sk1"),
                             (16, 4096, 4096, "16x128sk4c"), (33, 1000, 3000, "64x128sk8"),
                             (64, 4096, 14336, "64x128sk4")]:
        force(monkeypatch, variant)
        a, b = operands(M, N, K, dtype, layout, seed=N + M)
        assert_runs(a, b, dtype, layout, variant)
        check(a, b, rand((N,), dtype, "cuda"))


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("K", [1, 5, 8, 63, 65, 129])
def test_short_and_ragged_k(dtype, layout, K):
    """K below one 16-byte chunk, and the last k-block partly past K."""
    for M, N in [(3, 70), (20, 256)]:
        a, b = operands(M, N, K, dtype, layout, seed=K + M, ints=True)
        # (with K = 1 a column-major A is one column: its stride normalises
        # to 1, no 16-byte rows to read, so another kernel takes it)
        assert name(a, b).startswith("skinny_") or (K == 1 and layout[0] == "T") or not rules_take(dtype, layout)
        check(a, b, exact=True)
    # the same shape with leading dimensions of exactly K (or M, N): not
    # 16-byte aligned unless they are multiples of 8 (4 fp32), then another kernel
    a = rand((20, K), dtype, "cuda")
    b = rand((K, 256), dtype, "cuda")
    if rules_take(dtype, "NN"):
        assert name(a, b).startswith("skinny_") == (K % (16 // a.element_size()) == 0)
    check(a, b)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_small_n_swapped(monkeypatch, dtype, layout):
    """Small N (M large) runs the same kernels on C^T = B^T A^T, bias by row."""
    for M, N, K, variant in [(1000, 1, 256, "16x128sk1"), (4096, 16, 4096, "16x128sk4c"),
                             (777, 40, 520, "64x128sk2"), (300, 64, 72, "64x128sk1")]:
        K = kk(K, dtype)
        force(monkeypatch, variant)
        a, b = operands(M, N, K, dtype, layout, seed=M + N, ints=True)
        nm = name(a, b)
        assert nm.startswith(f"skinny_{TAG[dtype]}_{variant}_" if HOPPER else "skinny_") and nm.endswith("_swap"), nm
        if N > 1:  # (a 1-column B has no layout)
            assert nm.endswith(f"_{layout.lower()}_swap"), nm
        bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype)
        check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_and_broadcast(monkeypatch, dtype, layout):
    a, b = operands(12, 200, kk(136, dtype), dtype, layout, seed=5, batch=3, ints=True)
    assert name(a, b).startswith("skinny_") or not rules_take(dtype, layout)
    bias = torch.randint(-3, 4, (200,), device="cuda").to(dtype)
    check(a, b, bias, exact=True)
    for variant in ("16x128sk2", "16x128sk2c"):  # per-batch partials: workspace, then cluster
        force(monkeypatch, variant)
        assert_runs(a, b, dtype, layout, variant)
        check(a, b, bias, exact=True)
    force(monkeypatch, None)
    # 2-D B broadcast against a batched A (folded into one tall GEMM or a
    # zero batch stride, whichever the op picks), and a batched A against an
    # expanded B with batch stride 0
    b2 = b[0]
    check(a, b2, exact=True)
    b0 = b[:1].expand(3, -1, -1)
    check(a, b0, exact=True)


@pytest.mark.parametrize("dtype", TC)
def test_padded_and_offset_views(monkeypatch, dtype):
    """Leading dimensions larger than the extent (multiples of 8) and storage
    offsets of 8 elements stay on the kernel (by the rules, and forced by
    name); odd ones go elsewhere, correctly."""
    g = torch.Generator(device="cuda")
    g.manual_seed(3)
    big_a = rand((40, 1048), dtype, "cuda", g)
    big_b = rand((1040, 520), dtype, "cuda", g)
    a, b = big_a[:33, 8:1008], big_b[16:1016, 8:392]
    assert name(a, b).startswith("skinny_") or not rules_take(dtype, "NN")
    check(a, b)
    a_odd = big_a[:33, 1:1001]
    assert not name(a_odd, b).startswith("skinny_")
    check(a_odd, b)
    force(monkeypatch, "64x128sk2")
    assert_runs(a, b, dtype, "NN", "64x128sk2")
    check(a, b)
    assert not name(a_odd, b).startswith("skinny_")


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cluster_and_workspace_agree_bitwise(monkeypatch, dtype, layout):
    """Both reductions add the S partials in slice order from zero: same bits."""
    for M, N, K, splits in [(16, 4096, 4096, 4), (64, 1000, 2048, 4), (5, 300, 520, 2)]:
        K = kk(K, dtype)
        a, b = operands(M, N, K, dtype, layout, seed=M + K)
        bias = rand((N,), dtype, "cuda")
        outs = []
        for cluster in ("c", ""):
            variant = f"{expected_bm(M)}x128sk{splits}{cluster}"
            force(monkeypatch, variant)
            assert_runs(a, b, dtype, layout, variant)
            outs.append(gemm(a, b, bias))
        assert torch.equal(outs[0], outs[1])
        assert_close_rel(outs[0], reference(a, b, bias), dtype, tol_for(dtype))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [1, 17, 33, 64])
def test_deep_pipeline_same_bits(monkeypatch, dtype, layout, M):
    """The `deep` configurations (7 stages) change only how far the copies
    run ahead: exact on integers, and the same bits as the default depth on
    random data, with no split, a cluster split and a workspace split."""
    for split in ("sk1", "sk2c", "sk4"):
        variant = f"{expected_bm(M)}x128{split}"
        force(monkeypatch, variant)
        a, b = operands(M, 520, 1000, dtype, layout, seed=M + 7)
        bias = rand((520,), dtype, "cuda")
        assert_runs(a, b, dtype, layout, variant)
        shallow = gemm(a, b, bias)
        force(monkeypatch, variant + "deep")
        assert_runs(a, b, dtype, layout, variant + "deep")
        assert torch.equal(gemm(a, b, bias), shallow)
        ai, bi = operands(M, 520, 1000, dtype, layout, seed=M + 8, ints=True)
        check(ai, bi, exact=True)


@pytest.mark.parametrize("dtype", TC)
def test_deterministic(monkeypatch, dtype):
    """Same bits on every run, with the K split on (partials summed in order)."""
    force(monkeypatch, "16x128sk4c")
    a, b = operands(16, 4096, 4096, dtype, "NT", seed=11)
    assert_runs(a, b, dtype, "NT", "16x128sk4c")
    first = gemm(a, b)
    for _ in range(5):
        assert torch.equal(gemm(a, b), first)


@pytest.mark.parametrize("dtype", TC)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [33, 64, 100])
def test_exact_several_row_tiles(monkeypatch, dtype, layout, M):
    """A forced 32-row configuration on M > 32 runs several 32-row tiles (a
    forced name takes up to 128 rows, so M = 100 too)."""
    force(monkeypatch, "32x128sk1")
    a, b = operands(M, 300, kk(200, dtype), dtype, layout, seed=M + 64, ints=True)
    assert name(a, b) == skinny(dtype, layout, "32x128sk1")
    check(a, b, torch.randint(-3, 4, (300,), device="cuda").to(dtype), exact=True)
    force(monkeypatch, "32x128sk2c")
    assert_runs(a, b, dtype, layout, "32x128sk2c")
    check(a, b, exact=True)


def test_threshold_and_another_family_forced(monkeypatch):
    a, b = operands(65, 4096, 256, torch.bfloat16, "NN", seed=1)
    assert not name(a, b).startswith("skinny_")  # M = 65 is the Hopper kernel's
    # a Hopper configuration forced by name takes a skinny shape off the
    # skinny kernel (on an H100 / H200; elsewhere it is declined)
    force(monkeypatch, "128x64")
    a, b = operands(16, 4096, 256, torch.bfloat16, "NN", seed=1)
    assert (name(a, b) == "sm90_bf16_128x64_nn") == HOPPER, name(a, b)
    check(a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_long_n_rows_33_to_64_go_to_hopper(monkeypatch, layout):
    """33..64 rows against N >= 6144: with the one-slab tiles left out, the
    rules give them to the Hopper kernel's 128-row tiles on an H100/H200
    (which stream B faster there), forced here by name, and the skinny
    kernel takes them as well; 32 rows, N = 4096 and batches: skinny.  (The
    rules themselves: tests/test_hopper.py, test_slab_over_skinny.)"""
    for M, N, K, sm90 in [(64, 14336, 264, "128x128"), (33, 8200, 136, "128x64")]:
        force(monkeypatch, sm90)
        a, b = operands(M, N, K, torch.bfloat16, layout, seed=M)
        nm = name(a, b)
        assert nm == f"sm90_bf16_{sm90}_{layout.lower()}" if HOPPER else nm.startswith("skinny_"), (M, N, K)
        bias = rand((N,), torch.bfloat16, "cuda")
        check(a, b, bias)
        force(monkeypatch, "64x128sk1")
        assert name(a, b) == skinny(torch.bfloat16, layout, "64x128sk1"), (M, N, K)
        check(a, b, bias)
    for M, N, K, batch in [(32, 14336, 264, None), (64, 4096, 264, None), (64, 9000, 136, 2)]:
        variant = f"{expected_bm(M)}x128sk1"
        force(monkeypatch, variant)
        a, b = operands(M, N, K, torch.bfloat16, layout, seed=M + 1, batch=batch)
        assert name(a, b) == skinny(torch.bfloat16, layout, variant), (M, N, K, batch)
        check(a, b)


def test_strict_float32_is_not_skinny():
    a, b = operands(16, 256, 256, torch.float32, "TN", seed=2)
    assert name(a, b).startswith("skinny_tf32_16x128")  # TF32 allowed (this module)
    with tf32_mode(False):
        assert not name(a, b).startswith("skinny_")
        check(a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tf32_rounds_to_nearest(layout):
    """The operands are rounded to tf32 to nearest, not truncated: elements
    a little above the midpoint between two tf32 values (1 + 3 * 2^-12 times
    small integers) against integer B, whose products the fp32 sums hold
    exactly: the result is the GEMM of the rounded A, bit for bit."""
    M, N, K = 16, 256, 64
    g = torch.Generator(device="cuda")
    g.manual_seed(3)
    a = torch.randint(1, 4, (M, K), device="cuda", generator=g).float() * (1 + 3 * 2.0 ** -12)
    b = torch.randint(-3, 4, (K, N), device="cuda", generator=g).float()
    rounded = ((a.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
    assert not torch.equal(rounded, a) and not torch.equal(rounded, (a.view(torch.int32) & ~0x1FFF).view(torch.float32))
    a, b = as_layout(a, layout[0]), as_layout(b, layout[1])
    assert name(a, b).startswith("skinny_tf32") or not rules_take(torch.float32, layout)
    assert torch.equal(gemm(a, b).double(), reference(rounded, b))


def test_cuda_graph_capture(monkeypatch):
    """The workspace comes from the caching allocator, so capture and replay work."""
    force(monkeypatch, "16x128sk4c")
    a, b = operands(16, 4096, 1024, torch.bfloat16, "NT", seed=4)
    assert_runs(a, b, torch.bfloat16, "NT", "16x128sk4c")
    eager = gemm(a, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gemm(a, b)  # warm up on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    out = graph_replay(lambda: gemm(a, b), lambda: a.copy_(a * 2))
    assert torch.equal(out, gemm(a, b))
    assert not torch.equal(out, eager)
