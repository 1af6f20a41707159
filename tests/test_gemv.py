"""The few-row kernel (csrc/cuda/gemv): bf16 and fp16 with min(M, N) <= 8,
a stream of the big operand through CUDA-core FMAs, K split over clusters
and summed in rank order.

Every row count (1, 2, 4, 8 rows held; 3, 5 with rows past M), both layouts
of B (K-major: x @ W.T; N-major: x @ W) and of A, forced and automatic K
slices (cluster sizes 1..8), ragged K and N, the swapped orientation (small
N), batches, broadcast, bias, padded and offset views, unaligned operands
(another kernel), CUDA graphs, and bit-identical repeats.  Runs on sm_90.
"""
import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from conftest import assert_close_rel, graph_replay, rand, reference, run_poisoned
from test_skinny import operands

HAS_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
pytestmark = pytest.mark.skipif(not HAS_SM90, reason="needs a compute-capability 9.x GPU")

gemm = torch.ops.tiled.gemm
HALF = [torch.bfloat16, torch.float16]
TAG = {torch.bfloat16: "bf16", torch.float16: "f16"}
LAYOUTS = ["NN", "NT", "TN", "TT"]


@pytest.fixture(autouse=True)
def _small_shapes_too(monkeypatch):
    """The kernel takes only a large B by default (4 MB); these tests run it
    on small ragged shapes too, with the automatic K split unless a test
    forces one."""
    monkeypatch.setenv("TILED_GEMV_MIN_ELEMS", "0")
    monkeypatch.delenv("TILED_GEMV_SPLITS", raising=False)
    monkeypatch.delenv("TILED_GEMV_MAXM", raising=False)


def name(a, b):
    return torch.ops.tiled.gemm_kernel_name(a, b)


def held_rows(rows):
    return 1 if rows <= 1 else 2 if rows <= 2 else 4 if rows <= 4 else 8


def letters(a, b):
    """The caller's layout letters as kernel names spell them (an operand of
    one column counts as row-major, whatever its strides)."""
    return "".join("n" if t.shape[-1] <= 1 or t.stride(-1) == 1 else "t" for t in (a, b))


def check(a, b, bias=None, exact=False):
    M, N = a.shape[-2], b.shape[-1]
    batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
    out, _ = run_poisoned(lambda: gemm(a, b, bias), M * N * batch, a.dtype, "cuda")
    ref = reference(a, b, bias)
    if exact:  # integer data: the float64 sum is exact, then one rounding to the dtype
        ref = ref.to(a.dtype).double()
        bad = (out.double() != ref).nonzero()
        assert bad.numel() == 0, f"first wrong element at {bad[0].tolist()}: {out[tuple(bad[0])]} vs {ref[tuple(bad[0])]}"
    else:
        assert_close_rel(out, ref, a.dtype)
    return out


def int_bias(n, dtype):
    return torch.randint(-3, 4, (n,), device="cuda").to(dtype)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 8])
def test_exact_each_row_count(dtype, layout, M):
    N, K = 300, 1000  # a partial last column tile; K not a multiple of 256 (a K-major B's warp step)
    a, b = operands(M, N, K, dtype, layout, seed=M, ints=True)
    assert name(a, b) == f"gemv_{TAG[dtype]}_m{held_rows(M)}_{letters(a, b)}"
    check(a, b, int_bias(N, dtype), exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("splits", ["1", "2", "3", "5", "8"])
def test_exact_forced_splits(monkeypatch, dtype, layout, splits):
    """S slices of K in one cluster, summed over distributed shared memory."""
    monkeypatch.setenv("TILED_GEMV_SPLITS", splits)
    for M, N, K in [(1, 136, 1000), (6, 257, 520), (8, 64, 4100)]:
        a, b = operands(M, N, K, dtype, layout, seed=M + int(splits), ints=True)
        assert name(a, b).startswith("gemv_")
        check(a, b, int_bias(N, dtype) if M % 2 else None, exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("K", [1, 5, 8, 9, 255, 257, 2049])
def test_ragged_k(monkeypatch, dtype, layout, K):
    """K below one 16-byte chunk, a last chunk partly past K, slices whose
    last one is short."""
    for M, N, splits in [(1, 70, "1"), (4, 260, "2"), (7, 33, "3")]:
        monkeypatch.setenv("TILED_GEMV_SPLITS", splits)
        a, b = operands(M, N, K, dtype, layout, seed=K + M, ints=True)
        nm = name(a, b)
        # (with K = 1 a column-major A is one column: another kernel may take it)
        assert nm.startswith("gemv_") or K == 1, nm
        check(a, b, int_bias(N, dtype), exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_small_n_swapped(dtype, layout):
    """Small N (M large) runs the same kernels on C^T = B^T A^T, bias by row."""
    for M, N, K in [(1000, 1, 256), (4096, 8, 1024), (777, 3, 520), (300, 6, 72)]:
        a, b = operands(M, N, K, dtype, layout, seed=M + N, ints=True)
        nm = name(a, b)
        assert nm == f"gemv_{TAG[dtype]}_m{held_rows(N)}_{letters(a, b)}_swap", nm
        check(a, b, int_bias(N, dtype), exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_batched_and_broadcast(monkeypatch, dtype, layout):
    a, b = operands(5, 200, 520, dtype, layout, seed=5, batch=3, ints=True)
    assert name(a, b).startswith("gemv_")
    bias = int_bias(200, dtype)
    check(a, b, bias, exact=True)
    monkeypatch.setenv("TILED_GEMV_SPLITS", "2")
    check(a, b, bias, exact=True)
    monkeypatch.delenv("TILED_GEMV_SPLITS")
    # a 2-D B against a batched A, and an expanded B with batch stride 0
    check(a, b[0], exact=True)
    check(a, b[:1].expand(3, -1, -1), exact=True)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_random_decode_shapes(dtype, layout, monkeypatch):
    """The default size limit and K split on model-sized shapes, random data,
    against float64."""
    monkeypatch.delenv("TILED_GEMV_MIN_ELEMS")
    for M, N, K in [(1, 4096, 4096), (8, 14336, 4096), (4, 4096, 14336), (3, 1024, 4096)]:
        a, b = operands(M, N, K, dtype, layout, seed=N + M)
        assert name(a, b).startswith("gemv_"), name(a, b)
        check(a, b, rand((N,), dtype, "cuda"))
    a, b = operands(8, 1000, 1000, dtype, layout, seed=1)  # 1M elements of B: below the limit
    assert not name(a, b).startswith("gemv_")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", ["NN", "NT"])
def test_deterministic_and_graph_replay(dtype, layout):
    """Same bits on every run with the K split on, and under a CUDA graph."""
    a, b = operands(8, 4096, 4096, dtype, layout, seed=11)
    bias = rand((4096,), dtype, "cuda")
    first = gemm(a, b, bias)
    for _ in range(5):
        assert torch.equal(gemm(a, b, bias), first)
    a_new = rand(a.shape, dtype, "cuda")
    replayed = graph_replay(lambda: gemm(a, b, bias), lambda: a.copy_(a_new))
    assert torch.equal(replayed, gemm(a, b, bias))
    assert_close_rel(replayed, reference(a, b, bias), dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_padded_offset_and_unaligned_views(dtype):
    """Leading dimensions above the extent (multiples of 8) and storage
    offsets of 8 elements stay on the kernel; an odd offset of B goes
    elsewhere, correctly; an odd offset of A (read element by element) stays."""
    g = torch.Generator(device="cuda")
    g.manual_seed(3)
    big_a = rand((8, 1048), dtype, "cuda", g)
    big_b = rand((1040, 520), dtype, "cuda", g)
    a, b = big_a[:5, 8:1008], big_b[16:1016, 8:392]
    assert name(a, b).startswith("gemv_")
    check(a, b)
    b_odd = big_b[16:1016, 1:385]
    assert not name(a, b_odd).startswith("gemv_")
    check(a, b_odd)
    a_odd = big_a[:5, 1:1001]
    assert name(a_odd, b).startswith("gemv_")
    check(a_odd, b)


def test_limits_and_off_switch(monkeypatch):
    a, b = operands(9, 4096, 1024, torch.bfloat16, "NT", seed=1)
    assert not name(a, b).startswith("gemv_")  # 9 rows: the tensor-core kernels'
    a, b = operands(8, 4096, 1024, torch.bfloat16, "NT", seed=1)
    assert name(a, b).startswith("gemv_")
    monkeypatch.setenv("TILED_GEMV_MAXM", "4")
    assert not name(a, b).startswith("gemv_")
    monkeypatch.setenv("TILED_GEMV_MAXM", "0")
    a, b = operands(1, 4096, 1024, torch.bfloat16, "NT", seed=1)
    assert not name(a, b).startswith("gemv_")
    check(a, b)
    a32, b32 = a.float(), b.float()
    monkeypatch.delenv("TILED_GEMV_MAXM")
    assert not name(a32, b32).startswith("gemv_")  # fp32: not this family
