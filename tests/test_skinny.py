"""The small-M / small-N tensor-core kernel (csrc/cuda/skinny): bf16 and fp16
with min(M, N) <= 64, K split over the SMs and reduced deterministically.

Every block height (16, 32, 64), several row tiles (TILED_SKINNY_BM caps
the height), every layout, K slices forced and automatic,
the swapped orientation (small N), batches, broadcast, bias, edges (M, N, K
not multiples of the tiles, K < 8), padded views, and bit-identical repeats.
Runs on sm_80 or newer.
"""
import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from conftest import assert_close_rel, graph_replay, padded_operands, rand, reference, run_poisoned

HAS_SM80 = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
pytestmark = pytest.mark.skipif(not HAS_SM80, reason="needs a compute-capability >= 8.0 GPU")

gemm = torch.ops.tiled.gemm
HALF = [torch.bfloat16, torch.float16]
TAG = {torch.bfloat16: "bf16", torch.float16: "f16"}
LAYOUTS = ["NN", "NT", "TN", "TT"]


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    monkeypatch.delenv("TILED_SKINNY_SPLITK", raising=False)
    monkeypatch.delenv("TILED_SKINNY_CLUSTER", raising=False)
    monkeypatch.delenv("TILED_SKINNY_MAXM", raising=False)
    monkeypatch.delenv("TILED_SKINNY_BM", raising=False)
    monkeypatch.delenv("TILED_SKINNY_DEEP", raising=False)
    # 33..64 rows would go to the Hopper kernel's one-slab tiles where they
    # apply (tests/test_hopper.py, test_slab_over_skinny): these tests are
    # about the skinny kernel.
    monkeypatch.setenv("TILED_SM90_SLAB", "0")


def operands(M, N, K, dtype, layout, seed, batch=None, ints=False):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return padded_operands(M, N, K, dtype, layout, gen, batch, ints)


def name(a, b):
    return torch.ops.tiled.gemm_kernel_name(a, b)


def expected_bm(small):
    return 16 if small <= 16 else 32 if small <= 32 else 64


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
        assert_close_rel(out, ref, a.dtype)
    return out


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [1, 16, 17, 32, 33, 64])
def test_exact_each_block_height(dtype, layout, M):
    N, K = 300, 200  # 3 column tiles, the last partial; K = 3 k-blocks + 8
    a, b = operands(M, N, K, dtype, layout, seed=M, ints=True)
    assert name(a, b) == f"skinny_{TAG[dtype]}_{expected_bm(M)}x128_{layout.lower()}"
    bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype)
    check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("splits", ["1", "2", "3", "8", "16"])
@pytest.mark.parametrize("cluster", ["1", "0"], ids=["cluster", "workspace"])
def test_exact_forced_splits(monkeypatch, dtype, layout, splits, cluster):
    """S = 2, 4, 8 reduce through a cluster on sm_90 (or the workspace with
    TILED_SKINNY_CLUSTER=0); other S always through the workspace."""
    monkeypatch.setenv("TILED_SKINNY_SPLITK", splits)
    monkeypatch.setenv("TILED_SKINNY_CLUSTER", cluster)
    for M, N, K in [(7, 136, 1000), (40, 257, 520), (64, 128, 64)]:
        a, b = operands(M, N, K, dtype, layout, seed=M + int(splits), ints=True)
        assert name(a, b).startswith("skinny_")
        bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype) if M % 2 else None
        check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_decode_shapes(dtype, layout):
    """Automatic K split on model-sized shapes, random data, against float64."""
    for M, N, K in [(1, 4096, 4096), (8, 14336, 4096), (16, 4096, 4096), (33, 1000, 3000), (64, 4096, 14336)]:
        a, b = operands(M, N, K, dtype, layout, seed=N + M)
        assert name(a, b).startswith("skinny_")
        check(a, b, rand((N,), dtype, "cuda"))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("K", [1, 5, 8, 63, 65, 129])
def test_short_and_ragged_k(dtype, layout, K):
    """K below one 16-byte chunk, and the last k-block partly past K."""
    for M, N in [(3, 70), (20, 256)]:
        a, b = operands(M, N, K, dtype, layout, seed=K + M, ints=True)
        # (with K = 1 a column-major A is one column: its stride normalises
        # to 1, no 16-byte rows to read, so another kernel takes it)
        assert name(a, b).startswith("skinny_") or (K == 1 and layout[0] == "T")
        check(a, b, exact=True)
    # the same shape with leading dimensions of exactly K (or M, N): not
    # 16-byte aligned unless they are multiples of 8, then another kernel
    a = rand((20, K), dtype, "cuda")
    b = rand((K, 256), dtype, "cuda")
    assert name(a, b).startswith("skinny_") == (K % 8 == 0)
    check(a, b)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_small_n_swapped(dtype, layout):
    """Small N (M large) runs the same kernels on C^T = B^T A^T, bias by row."""
    for M, N, K in [(1000, 1, 256), (4096, 16, 4096), (777, 40, 520), (300, 64, 72)]:
        a, b = operands(M, N, K, dtype, layout, seed=M + N, ints=True)
        nm = name(a, b)
        assert nm.startswith("skinny_") and nm.endswith("_swap"), nm
        if N > 1:  # (a 1-column B has no layout)
            assert nm.endswith(f"_{layout.lower()}_swap"), nm
        bias = torch.randint(-3, 4, (N,), device="cuda").to(dtype)
        check(a, b, bias, exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_and_broadcast(monkeypatch, dtype, layout):
    a, b = operands(12, 200, 136, dtype, layout, seed=5, batch=3, ints=True)
    assert name(a, b).startswith("skinny_")
    bias = torch.randint(-3, 4, (200,), device="cuda").to(dtype)
    check(a, b, bias, exact=True)
    for splits in ("3", "2"):  # per-batch partials: workspace, then cluster
        monkeypatch.setenv("TILED_SKINNY_SPLITK", splits)
        check(a, b, bias, exact=True)
    monkeypatch.delenv("TILED_SKINNY_SPLITK")
    # 2-D B broadcast against a batched A (folded into one tall GEMM or a
    # zero batch stride, whichever the op picks), and a batched A against an
    # expanded B with batch stride 0
    b2 = b[0]
    check(a, b2, exact=True)
    b0 = b[:1].expand(3, -1, -1)
    check(a, b0, exact=True)


@pytest.mark.parametrize("dtype", HALF)
def test_padded_and_offset_views(dtype):
    """Leading dimensions larger than the extent (multiples of 8) and storage
    offsets of 8 elements stay on the kernel; odd ones go elsewhere, correctly."""
    g = torch.Generator(device="cuda")
    g.manual_seed(3)
    big_a = rand((40, 1048), dtype, "cuda", g)
    big_b = rand((1040, 520), dtype, "cuda", g)
    a, b = big_a[:33, 8:1008], big_b[16:1016, 8:392]
    assert name(a, b).startswith("skinny_")
    check(a, b)
    a_odd = big_a[:33, 1:1001]
    assert not name(a_odd, b).startswith("skinny_")
    check(a_odd, b)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cluster_and_workspace_agree_bitwise(monkeypatch, dtype, layout):
    """Both reductions add the S partials in slice order from zero: same bits."""
    for M, N, K in [(16, 4096, 4096), (64, 1000, 2048), (5, 300, 520)]:
        a, b = operands(M, N, K, dtype, layout, seed=M + K)
        bias = rand((N,), dtype, "cuda")
        outs = []
        for cluster in ("1", "0"):
            monkeypatch.setenv("TILED_SKINNY_CLUSTER", cluster)
            monkeypatch.setenv("TILED_SKINNY_SPLITK", "4")
            outs.append(gemm(a, b, bias))
        assert torch.equal(outs[0], outs[1])
        assert_close_rel(outs[0], reference(a, b, bias), dtype)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [1, 17, 33, 64])
def test_deep_pipeline_same_bits(monkeypatch, dtype, layout, M):
    """TILED_SKINNY_DEEP=1 (7 stages) changes only how far the copies run
    ahead: exact on integers, and the same bits as the default depth on
    random data, with no split, a cluster split and a workspace split."""
    for splits, cluster in (("1", "1"), ("2", "1"), ("3", "0")):
        monkeypatch.setenv("TILED_SKINNY_SPLITK", splits)
        monkeypatch.setenv("TILED_SKINNY_CLUSTER", cluster)
        a, b = operands(M, 520, 1000, dtype, layout, seed=M + 7)
        bias = rand((520,), dtype, "cuda")
        monkeypatch.delenv("TILED_SKINNY_DEEP", raising=False)
        shallow = gemm(a, b, bias)
        monkeypatch.setenv("TILED_SKINNY_DEEP", "1")
        assert name(a, b).startswith("skinny_")
        assert torch.equal(gemm(a, b, bias), shallow)
        ai, bi = operands(M, 520, 1000, dtype, layout, seed=M + 8, ints=True)
        check(ai, bi, exact=True)
        monkeypatch.delenv("TILED_SKINNY_DEEP")


@pytest.mark.parametrize("dtype", HALF)
def test_deterministic(dtype):
    """Same bits on every run, with the K split on (partials summed in order)."""
    a, b = operands(16, 4096, 4096, dtype, "NT", seed=11)
    first = gemm(a, b)
    for _ in range(5):
        assert torch.equal(gemm(a, b), first)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [33, 64, 100])
def test_exact_several_row_tiles(monkeypatch, dtype, layout, M):
    """TILED_SKINNY_BM=32 caps the block height: M > 32 runs several 32-row
    tiles (and TILED_SKINNY_MAXM=128 lets M = 100 in)."""
    monkeypatch.setenv("TILED_SKINNY_BM", "32")
    monkeypatch.setenv("TILED_SKINNY_MAXM", "128")
    a, b = operands(M, 300, 200, dtype, layout, seed=M + 64, ints=True)
    assert name(a, b) == f"skinny_{TAG[dtype]}_32x128_{layout.lower()}"
    check(a, b, torch.randint(-3, 4, (300,), device="cuda").to(dtype), exact=True)
    monkeypatch.setenv("TILED_SKINNY_SPLITK", "2")
    check(a, b, exact=True)


def test_threshold_and_off_switch(monkeypatch):
    a, b = operands(65, 4096, 256, torch.bfloat16, "NN", seed=1)
    assert not name(a, b).startswith("skinny_")  # M = 65 is the Hopper kernel's
    monkeypatch.setenv("TILED_SKINNY_MAXM", "0")
    a, b = operands(16, 4096, 256, torch.bfloat16, "NN", seed=1)
    assert not name(a, b).startswith("skinny_")
    check(a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_long_n_rows_33_to_64_go_to_hopper(monkeypatch, layout):
    """On an H100/H200 33..64 rows against N >= 6144 run on the Hopper kernel
    (its 128x128 tiles stream B faster there), unless TILED_SKINNY_MAXM sets
    the limit explicitly; 32 rows, N = 4096 and batches stay skinny (with
    the one-slab tiles off, as here)."""
    hopper = torch.cuda.get_device_capability() == (9, 0)
    for M, N, K in [(64, 14336, 264), (33, 8200, 136)]:
        a, b = operands(M, N, K, torch.bfloat16, layout, seed=M)
        assert name(a, b).startswith("sm90_" if hopper else "skinny_"), (M, N, K)
        bias = rand((N,), torch.bfloat16, "cuda")
        check(a, b, bias)
        monkeypatch.setenv("TILED_SKINNY_MAXM", "64")
        assert name(a, b).startswith("skinny_"), (M, N, K)
        check(a, b, bias)
        monkeypatch.delenv("TILED_SKINNY_MAXM")
    for M, N, K, batch in [(32, 14336, 264, None), (64, 4096, 264, None), (64, 9000, 136, 2)]:
        a, b = operands(M, N, K, torch.bfloat16, layout, seed=M + 1, batch=batch)
        assert name(a, b).startswith("skinny_"), (M, N, K, batch)


def test_float32_is_not_skinny():
    a, b = operands(16, 256, 256, torch.float32, "NN", seed=2)
    assert not name(a, b).startswith("skinny_")


def test_cuda_graph_capture():
    """The workspace comes from the caching allocator, so capture and replay work."""
    a, b = operands(16, 4096, 1024, torch.bfloat16, "NT", seed=4)
    eager = gemm(a, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gemm(a, b)  # warm up on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    out = graph_replay(lambda: gemm(a, b), lambda: a.copy_(a * 2))
    assert torch.equal(out, gemm(a, b))
    assert not torch.equal(out, eager)
