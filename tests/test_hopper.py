"""Hopper (sm_90a) tensor-core kernels: every instantiated config is reachable
and correct; edges, layouts, batches, bias, determinism, and the fallback for
what the Hopper kernel refuses.

Runs only on a compute-capability 9.0 GPU, with the skinny kernel and the
dispatch table off (TILED_DISABLE_KERNELS=skinny,table, read once per
process): test_in_child_process runs the module's tests in a child process
so (to run some directly: TILED_DISABLE_KERNELS=skinny,table pytest
tests/test_hopper.py -k ...); the tests of dispatch between the one-slab
tiles and the skinny kernel run in this process.  Configurations other than
the rules' are forced by name (TILED_CONFIG, docs/dispatch.md).

Read failures top-down: the `test_a_*` smoke tests use small integers (exact
in bf16/f16/tf32 and in fp32 accumulation), so a wrong descriptor / swizzle /
fragment mapping shows up as an exact mismatch with its first bad (row, col)
printed, before the statistical tests run.
"""
import os
import subprocess
import sys

import pytest
import torch

import torch_tiled_gemm  # noqa: F401  (registers torch.ops.tiled)
from torch_tiled_gemm import tune
from conftest import TF32_TOL, assert_close_rel, make_operands, rand, reference, run_poisoned, tf32_mode

IS_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(not IS_SM90, reason="needs a compute-capability 9.0 (Hopper) GPU")

gemm = torch.ops.tiled.gemm


DISABLED = "skinny,table"
IN_CHILD = os.environ.get("TILED_DISABLE_KERNELS") == DISABLED
# Run in this process (the skinny kernel on): the rest in the child.
PARENT_TESTS = {"test_in_child_process", "test_slab_over_skinny", "test_slab_as_called_over_skinny",
                "test_l2_stream_rule"}


@pytest.fixture(autouse=True)
def _hopper_only(request, monkeypatch):
    """These tests are about the sm_90a kernels: the small-M/N family
    (tests/test_skinny.py) must not take their small shapes, nor the
    dispatch table their choices, so they run where TILED_DISABLE_KERNELS
    takes both out (test_in_child_process)."""
    monkeypatch.delenv("TILED_CONFIG", raising=False)
    parent = request.function.__name__ in PARENT_TESTS
    if parent and "TILED_DISABLE_KERNELS" in os.environ:
        pytest.skip("needs the skinny kernel and the table: runs in the parent process")
    if not parent and not IN_CHILD:
        pytest.skip("runs in a child process with TILED_DISABLE_KERNELS=" + DISABLED + " (test_in_child_process)")


def test_in_child_process():
    """Every test of this module but PARENT_TESTS, in a child process with
    the skinny kernel and the dispatch table off."""
    env = dict(os.environ, TILED_DISABLE_KERNELS=DISABLED)
    tests = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(__file__)],
                       env=env, capture_output=True, text=True, timeout=3600, cwd=tests)
    assert r.returncode == 0, r.stdout[-12000:] + r.stderr[-4000:]


def force(monkeypatch, config):
    """Runs the configuration(s) named (TILED_CONFIG: a variant such as
    "128x128pp" or a full name, a comma list: the first that takes the
    problem) where they can take the problem, else the rules' choice."""
    monkeypatch.setenv("TILED_CONFIG", config)


def cdiv(a, b):
    return -(-a // b)


def kernel_name(a, b):
    """The tensor-core config that runs, without the staging prefix (an
    unaligned operand is copied to an aligned one first: "staged_b+sm90_...")."""
    return torch.ops.tiled.gemm_kernel_name(a, b).split("+")[-1]

HALF = [torch.bfloat16, torch.float16]
TAG = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "tf32"}
LAYOUTS = ["NN", "NT", "TN", "TT"]


@pytest.fixture
def tf32():
    with tf32_mode(True):
        yield


def num_sms():
    return torch.cuda.get_device_properties(0).multi_processor_count


def expected_tile(M, N, batch=1, dtype=None, K=0, streamk=None, a_mn=False):
    """Python mirror of hopper.cu's choose(), the rules' choice
    (streamk=True / False: the choice with stream-K on / off wherever the
    tile allows it, which the forced "...streamk" / plain names give; a_mn:
    A is M-major).
    16-bit problems with >= 4 waves of 128x128 tiles and >= 2 tile rows run
    cooperative 128x256 tiles, in 2-CTA clusters over tile-row pairs unless
    the pairs need more waves than single tiles, or ping-pong 128x128 tiles
    in clusters when their waves (each costing 0.54) come out cheaper; tf32
    the same, without ping-pong, except that a K-major A over <= 8 tile rows
    takes 128x128 tiles (no cluster) where the weighted waves below say so.  Otherwise 128x64 tiles when
    the 128x128 tiles fill at most half the SMs (unless stream-K takes them and
    N is 65..128) or N <= 64 (also over the tiles above, where they have no
    cluster nor ping-pong), else 128x128 unless 128x256
    needs fewer weighted waves (a 128x128 tile costs 0.5/0.9); a 128x256 grid
    without clusters becomes 128x192 where that needs fewer weighted waves
    (a 128x192 tile costs 0.75/0.95) unless stream-K is switched on.  128x64
    tiles that fill <= half the SMs split K over 2-CTA clusters (128x64sk2)
    when K has >= 32 k-blocks, stream-K does not take them and the tile rows
    are no more than the tile columns.  Very few
    tiles (128x128 tiles <= 1/12 of the SMs) and >= 128 k-blocks: split-K
    over clusters of 8 (128x128sk8).  A cooperative
    tile without clusters runs stream-K ("streamk" appended) when switched
    on, or by default when the 128x128 tiles fill <= a quarter of the SMs and
    K has >= 128 k-blocks, provided hopper.h's stream_k_tiles is not 0 (the
    tile count is not a multiple of the SM count and every CTA gets a
    k-block).  K = 0: a shallow K."""
    sms = num_sms()
    tm = cdiv(M, 128)
    tiles128 = tm * cdiv(N, 128) * batch
    w256 = cdiv(tm * cdiv(N, 256) * batch, sms)
    w128 = cdiv(tiles128, sms)
    kb = cdiv(K, 32 if dtype == torch.float32 else 64)
    if tiles128 * 12 <= sms and kb >= 128:  # very few tiles, deep K: split-K over 8-CTA clusters
        return "128x128sk8"
    if tm >= 2 and tiles128 >= 4 * sms:
        w_pairs = cdiv(cdiv(tm, 2) * cdiv(N, 256) * batch, sms // 2)
        w_pp = cdiv(cdiv(tm, 2) * cdiv(N, 128) * batch, sms // 2)
        tile = "128x256c2" if w_pairs <= w256 else "128x256"
        if dtype in HALF and w_pp * 54 < (w_pairs if tile.endswith("c2") else w256) * 100:
            tile = "128x128ppc2"  # (16-bit only)
        if dtype == torch.float32 and not a_mn and tm <= 8 and w128 * 5 < w256 * 9:
            tile = "128x128"
        if N <= 64 and tile in ("128x256", "128x128"):  # (no cluster, no ping-pong)
            tile = "128x64"
    elif (tiles128 * 2 <= sms or N <= 64) and not (
            (streamk if streamk is not None else tiles128 * 4 <= sms and kb >= 128) and 64 < N <= 128):
        tile = "128x64"  # (not where stream-K takes 128x64 tiles that would split a 65..128-wide N)
    else:
        tile = "128x128" if w128 * 5 < w256 * 9 else "128x256"
    # 128x192 where it needs fewer weighted waves (0.75 of the work at 95%)
    # than a 128x256 grid without clusters; not with stream-K switched on
    if tile == "128x256" and streamk is not True and cdiv(tm * cdiv(N, 192) * batch, sms) * 135 < w256 * 171:
        return "128x192"
    if streamk is None:
        streamk = tiles128 * 4 <= sms and kb >= 128
    # 128x64 tiles filling <= half the SMs: K split over 2-CTA clusters
    # (not for more tile rows than tile columns)
    if tile == "128x64" and not streamk and tm * cdiv(N, 64) * batch * 2 <= sms and kb >= 32 and tm <= cdiv(N, 64):
        return "128x64sk2"
    if not streamk or tile.endswith("c2"):
        return tile
    tiles = tm * cdiv(N, int(tile.split("x")[1])) * batch
    if tiles % sms == 0:
        return tile
    sk = tiles if tiles < sms else tiles % sms + sms
    return tile + "streamk" if sk * kb >= sms else tile


def wave_cost(M, N, batch, tile):
    """Mirror of hopper.cu's wave_cost(): a whole-tile schedule's time in
    128x256 cooperative waves (x100), -1 for 128x64 tiles, split-K, stream-K."""
    if tile.startswith("128x64") or "sk" in tile or "streamk" in tile:
        return -1
    sms = num_sms()
    tm, tn = cdiv(M, 128), cdiv(N, int(tile[4:7]))
    waves = cdiv(cdiv(tm, 2) * tn * batch, sms // 2) if tile.endswith("c2") else cdiv(tm * tn * batch, sms)
    return waves * (54 if "pp" in tile else {"256": 100, "192": 79, "128": 56}[tile[4:7]])


def swap_waves(dtype, M, N, layout, batch=1, K=0, streamk=None):
    """Mirror of hopper.cu's swap_fills_waves(): a 16-bit
    problem (any layout) or a tf32 NT runs as C^T = B^T A^T where the swapped
    tiles (cooperative 128x256, with or without clusters) need >= 5% fewer
    weighted waves; C (fresh, contiguous) must be 16-byte aligned."""
    if dtype == torch.float32 and layout != "NT":
        return False
    align = 4 if dtype == torch.float32 else 8
    if N % align or (batch > 1 and M * N % align):
        return False
    swapped = expected_tile(N, M, batch, dtype, K, streamk)
    if swapped not in ("128x256", "128x256c2"):
        return False
    cost_p = wave_cost(M, N, batch, expected_tile(M, N, batch, dtype, K, streamk))
    cost_q = wave_cost(N, M, batch, swapped)
    return cost_p > 0 and cost_q > 0 and cost_q * 100 < cost_p * 95


SWAP_WIDTHS = (144, 160, 176, 200, 208, 224, 232)


def swappable16(dtype, M, N, layout, batch):
    """Whether a 16-bit problem may run swapped on the swapped-only tiles: a
    row-major A (so A^T is K-major) and a C (fresh, contiguous) TMA can store."""
    return dtype in HALF and layout[0] == "N" and N % 8 == 0 and (batch == 1 or M * N % 8 == 0)


def swap_width(dtype, M, N, layout, batch=1, K=0, streamk=None):
    """Mirror of hopper.cu's swap_width() (None where stream-K is forced on
    or off: streamk is not None): a 16-bit NN, NT or TN problem runs
    swapped on 128 x W tiles (W columns of M, W in SWAP_WIDTHS: the fewest
    weighted waves, each weighted W / 256 / 0.97, the narrowest of equals)
    where those come >= 5% under wave_cost of the choice as called (or of
    the 128x256 swap where swap_waves takes it, if lower); C (fresh,
    contiguous) must be 16-byte aligned.  The tile name ("128x144") or None."""
    if not swappable16(dtype, M, N, "NN" if layout == "TN" else layout, batch) or streamk is not None:
        return None  # (TN swapped is TN: both operands MN-major)
    cost_p = wave_cost(M, N, batch, expected_tile(M, N, batch, dtype, K, streamk))
    if cost_p <= 0:
        return None
    if swap_waves(dtype, M, N, layout, batch, K, streamk):  # the 128x256 swap's cost, if lower
        cost_q = wave_cost(N, M, batch, expected_tile(N, M, batch, dtype, K, streamk))
        cost_p = min(cost_p, cost_q) if cost_q > 0 else cost_p
    best, best_cost = None, cost_p * 95
    tn = layout == "TN"
    for w in SWAP_WIDTHS:
        waves = cdiv(cdiv(N, 128) * cdiv(M, w) * batch, num_sms())
        if tn and (w % 16 or waves > 2):
            continue  # (200, 232: slow with an N-major B; TN within two waves)
        cols = max(w, 53 * (128 + cdiv(w, 64) * 64) // 100) if tn else w  # TN: bound by B's whole 64-column boxes
        weight = (cols * 10000 + 256 * 97 // 2) // (256 * 97)
        cost = waves * weight * 100
        if cost < best_cost or (tn and best and cost == best_cost):  # (TN: the widest of equals)
            best, best_cost = f"128x{w}", cost
    return best


def tile_problem(dtype, M, N, layout, batch=1, K=0, streamk=None):
    """The (M, N) the tiles are chosen for: tf32 runs as C^T = B^T A^T in NN,
    and in NT where M <= 64 < N unless the swapped tiles would split K;
    16-bit types and tf32 NT also where swap_waves says so, 16-bit NN / NT
    where swap_width does."""
    if swap_width(dtype, M, N, layout, batch, K, streamk):
        return (N, M)
    if dtype == torch.float32 and (layout == "NN" or (
            layout == "NT" and M <= 64 < N and "sk" not in expected_tile(N, M, batch, dtype, K, streamk))):
        return (N, M)
    if swap_waves(dtype, M, N, layout, batch, K, streamk):
        return (N, M)
    return (M, N)


def expected_name(dtype, M, N, layout, batch=1, K=0, streamk=None, slab=True):
    """The config that runs (after any staging copy).  tf32 NN / TT run a
    register-A kernel unless their tiles split K or the MN-major operand's
    leading dimension is not 16-byte aligned: then an NT copy runs.
    slab=False: without the one-slab tiles."""
    one_slab = slab and slab_width(dtype, M, N, layout, batch, streamk=streamk, K=K)
    if one_slab:
        return f"sm90_{TAG[dtype]}_{one_slab}sw_{layout.lower()}"
    one_slab = slab and slab_width_as_called(dtype, M, N, layout, batch, streamk=streamk, K=K)
    if one_slab:
        return f"sm90_{TAG[dtype]}_{one_slab}_{layout.lower()}"
    one_slab = slab and mid_slab_width(dtype, M, N, layout, batch, K, streamk)
    if one_slab:
        return f"sm90_{TAG[dtype]}_{one_slab}sw_{layout.lower()}"
    one_slab = slab and tn_few_tiles_slab(dtype, M, N, layout, batch, K, streamk)
    if one_slab:
        return f"sm90_{TAG[dtype]}_{one_slab}_{layout.lower()}"
    cluster = off32_cluster(dtype, M, N, layout, batch, K, streamk)
    if cluster:
        return f"sm90_{TAG[dtype]}_{cluster}_{layout.lower()}"
    if low_k_pingpong(dtype, M, N, layout, batch, K, streamk):
        return f"sm90_{TAG[dtype]}_128x128pp_{layout.lower()}"
    width = swap_width(dtype, M, N, layout, batch, K, streamk)
    if width:
        return f"sm90_{TAG[dtype]}_{width}sw_{layout.lower()}"
    tile = expected_tile(*tile_problem(dtype, M, N, layout, batch, K, streamk), batch, dtype, K, streamk,
                         a_mn=layout in ("NN", "TT"))
    if dtype == torch.float32 and layout != "NT" and (
            "sk" in tile or (layout == "TT" and M % 4) or (layout == "NN" and N % 4)):
        return expected_name(dtype, M, N, "NT", batch, K, streamk)
    sw = "sw" if dtype in HALF and swap_waves(dtype, M, N, layout, batch, K, streamk) else ""  # (tf32: unmarked)
    return f"sm90_{TAG[dtype]}_{tile}{sw}_{layout.lower()}"


def off32_cluster(dtype, M, N, layout, batch, K, streamk=None):
    """Mirror of hopper.cu's off32_cluster (fresh, contiguous operands): a
    16-bit problem, not batched, M > 128, N >= 128, K >= 512, with an operand whose
    leading dimension is 8 mod 16 elements (its rows start 16 bytes off a
    32-byte boundary) and a choice as called that splits no K runs 128x256c2
    from 9/10 of a wave of those tiles (with a row-major A from more than a
    wave of 128x128 tiles), else 128x128ppc2 where 128x128 tiles fill a
    third to one wave; else None."""
    if dtype not in HALF or batch != 1 or M <= 128 or N < 128 or K < 8 * 64 or streamk is not None:
        return None
    lda = K if layout[0] == "N" else M
    ldb = N if layout[1] == "N" else K
    if lda % 16 == 0 and ldb % 16 == 0:
        return None
    tile = expected_tile(M, N, batch, dtype, K, streamk)
    if "sk" in tile or "streamk" in tile:
        return None
    tiles = cdiv(M, 128) * cdiv(N, 128)
    if tiles > num_sms() and (cdiv(M, 128) * cdiv(N, 256) * 10 >= num_sms() * 9 or layout[0] == "N"):
        return "128x256c2"
    return "128x128ppc2" if num_sms() <= tiles * 3 and tiles <= num_sms() else None


def low_k_pingpong(dtype, M, N, layout, batch, K, streamk):
    """Mirror of hopper.cu's low_k_pingpong (for a fresh, contiguous C): a
    16-bit problem of 2-20 k-blocks, not batched, not TT, N a multiple of 8,
    whose choice as called is 128x256c2."""
    return (dtype in HALF and batch == 1 and 2 <= cdiv(K, 64) <= 20 and layout != "TT" and N % 8 == 0
            and streamk is None and expected_tile(M, N, batch, dtype, K, streamk) == "128x256c2")


# Shapes that select each tile config (on a 132-SM H100/H200).
NARROW = (256, 512, 256)  # 128x64: 8 tiles of 128x128 fill <= half the SMs
SMALL = (1024, 1280, 256)  # 128x128: 80 tiles, one wave either way
LARGE = (2048, 2048, 256)  # 128x256: 128 tiles fill one wave, 128x128 would need two


def small_ints(shape, dtype, gen):
    return torch.randint(-2, 3, shape, generator=gen, device="cuda").to(dtype)


def layout_view(t, ch):
    return t.contiguous() if ch == "N" else t.transpose(-1, -2).contiguous().transpose(-1, -2)


def exact_check(M, N, K, dtype, layout, bias=True):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(M * 7 + N * 3 + K)
    a = layout_view(small_ints((M, K), dtype, gen), layout[0])
    b = layout_view(small_ints((K, N), dtype, gen), layout[1])
    bias_t = small_ints((N,), dtype, gen) if bias else None
    out, _ = run_poisoned(lambda: gemm(a, b, bias_t), M * N, dtype, "cuda")
    ref = reference(a, b, bias_t).to(dtype)
    bad = (out != ref).nonzero()
    assert bad.numel() == 0, (
        f"{kernel_name(a, b)}: {bad.shape[0]} of {M * N} elements differ; first (row, col): "
        f"{bad[:8].tolist()}; got {out[bad[0, 0], bad[0, 1]].item()} want {ref[bad[0, 0], bad[0, 1]].item()}"
    )


# ------------------------------------------------------------------ smoke (exact)

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_exact_one_tile(dtype, layout):
    # One 128x128 tile, one k-block: the smallest thing the kernel can do.
    M, N, K = 128, 128, 64
    a, b = make_operands(M, N, K, dtype, "cuda", layout)
    assert kernel_name(a, b) == expected_name(dtype, M, N, layout)
    exact_check(M, N, K, dtype, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_exact_each_tile_config(dtype, layout):
    # Several k-blocks (ring wrap, phase flips) and several tiles per CTA.
    for M, N, K in (NARROW, SMALL, LARGE):
        a, b = make_operands(M, N, 8, dtype, "cuda", layout)
        assert kernel_name(a, b) == expected_name(dtype, M, N, layout)
        exact_check(M, N, K, dtype, layout)


# tf32: NT reads both operands from shared memory; TT reads its M-major A
# into registers; NN runs as C^T = B^T A^T (B^T is the register A) and
# stores its tiles transposed.  TN (both MN-major) is staged.
TF32_LAYOUTS = ["NT", "NN", "TT"]


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_a_exact_tf32(tf32, layout):
    for M, N, K in (NARROW, SMALL, LARGE):
        a, b = make_operands(M, N, 8, torch.float32, "cuda", layout)
        assert kernel_name(a, b) == expected_name(torch.float32, M, N, layout)
        exact_check(M, N, K, torch.float32, layout)


# ------------------------------------------------------------------ every config, random data

def check(a, b, dtype, bias=True, tol=None, name=None):
    N = b.shape[-1]
    bias_t = rand((N,), dtype, "cuda") if bias else None
    if name is not None:
        assert kernel_name(a, b) == name
    numel = a.shape[-2] * N * (a.shape[0] if a.dim() == 3 else b.shape[0] if b.dim() == 3 else 1)
    out, _ = run_poisoned(lambda: gemm(a, b, bias_t), numel, dtype, "cuda")
    assert_close_rel(out, reference(a, b, bias_t), dtype, tol)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_every_config_random(dtype, layout):
    for M, N, K in [(NARROW[0], NARROW[1], 1000), (SMALL[0], SMALL[1], 1000), (LARGE[0], LARGE[1], 1032)]:
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        check(a, b, dtype, name=expected_name(dtype, M, N, layout, K=K))


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_tf32_configs(tf32, layout):
    for M, N, K in [(NARROW[0], NARROW[1], 1000), (SMALL[0], SMALL[1], 1000), (LARGE[0], LARGE[1], 1032)]:
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout)
        name = expected_name(torch.float32, M, N, layout, K=K)
        check(a, b, torch.float32, tol=TF32_TOL, name=name)
        if name.endswith(layout.lower()):
            assert torch.ops.tiled.gemm_kernel_name(a, b) == name  # not staged


def test_tf32_tn_is_staged(tf32):
    # Both operands MN-major: one is copied K-major, the other read as is.
    a, b = make_operands(300, 264, 200, torch.float32, "cuda", "TN")
    assert torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged_"), torch.ops.tiled.gemm_kernel_name(a, b)
    check(a, b, torch.float32, tol=TF32_TOL)


# (M, N, K, batch): each variant the register-A kernels take by default, in
# both orientations: 128x64, 128x128, 128x256, 128x192 (ring wraps, ragged
# edges), stream-K over 128x64 tiles (64 pieces), a batch, ragged M/N/K.
TF32_REGISTER_A_SHAPES = [(256, 512, 960, None), (1024, 1280, 520, None), (2048, 2048, 136, None),
                          (1536, 1536, 1032, None), (1500, 1532, 200, None), (512, 1024, 4096, None),
                          (136, 264, 520, 3), (300, 200, 136, None), (1000, 1000, 1000, None)]


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_tf32_register_a(tf32, layout):
    seen = set()
    for M, N, K, batch in TF32_REGISTER_A_SHAPES:
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=batch)
        tile = expected_tile(*tile_problem(torch.float32, M, N, layout, batch or 1, K), batch or 1, torch.float32, K,
                             a_mn=True)
        assert "sk" not in tile, (M, N, K)
        seen.add(tile)
        assert torch.ops.tiled.gemm_kernel_name(a, b) == variant_name(torch.float32, tile, layout), (M, N, K, batch)
        check(a, b, torch.float32, bias=(M % 2 == 0), tol=TF32_TOL)
        if batch is None:
            exact_check(M, N, K, torch.float32, layout, bias=(M % 2 == 1))
    assert seen == {"128x64", "128x128", "128x256", "128x192", "128x64streamk"}, seen


@pytest.mark.parametrize("layout", ["NN", "TT"])
def test_tf32_register_a_not_split(tf32, layout):
    # Split-K has no register-A kernels: those problems run on a K-major
    # copy (NT).
    a, b = make_operands(256, 256, 8192, torch.float32, "cuda", layout)  # split-K over 8-CTA clusters
    assert torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged_")
    assert kernel_name(a, b) == variant_name(torch.float32, "128x128sk8", "NT")
    check(a, b, torch.float32, tol=TF32_TOL)


# tf32 NT with M <= 64 < N runs swapped, C^T = B^T A^T (again NT: B^T is
# the tile-row operand), with C^T's tiles stored transposed by the
# shared-memory kernels, unless the swapped tiles would split K.
TF32_NT_SWAP_SHAPES = [  # (M, N, K, batch)
    (16, 4096, 4096, None),  # stream-K over 128x64 tiles
    (64, 520, 200, None),  # 128x64, ragged
    (8, 14336, 520, None),  # 128x128
    (1, 300, 72, 3),  # one row, batched
    (33, 100, 1032, 2),  # the swapped tiles split K: runs as called
    (40, 1001, 136, None),  # C's rows not 16-byte aligned: checked stores of C^T
]


def test_tf32_nt_swapped_small_m(tf32, monkeypatch):
    swapped = 0
    for M, N, K, batch in TF32_NT_SWAP_SHAPES:
        a, b = make_operands(M, N, K, torch.float32, "cuda", "NT", batch=batch)
        want = expected_name(torch.float32, M, N, "NT", batch or 1, K)
        swapped += tile_problem(torch.float32, M, N, "NT", batch or 1, K) == (N, M)
        assert torch.ops.tiled.gemm_kernel_name(a, b) == want, (M, N, K, batch)
        check(a, b, torch.float32, bias=M % 2 == 0, tol=TF32_TOL)
        if batch is None:
            exact_check(M, N, K, torch.float32, "NT", bias=(M % 2 == 1))
    assert swapped == len(TF32_NT_SWAP_SHAPES) - 1
    # As called, by name: the 128x64 tiles of the caller's problem
    force(monkeypatch, "128x64streamk")
    a, b = make_operands(100, 4096, 4096, torch.float32, "cuda", "NT")
    assert kernel_name(a, b) == variant_name(torch.float32, "128x64streamk", "NT")
    check(a, b, torch.float32, tol=TF32_TOL)


def test_tf32_few_tile_rows(tf32, monkeypatch):
    # tf32 with a K-major A over <= 8 tile rows keeps the wave rule's tile:
    # 1024x14336 (7 waves of 128x128, 4 of 128x256 pairs) runs 128x128;
    # forced, the 128x256 pairs that more tile rows would take.
    M, N, K = 1024, 14336, 72
    a, b = make_operands(M, N, K, torch.float32, "cuda", "NT")
    assert expected_tile(M, N, 1, torch.float32, K) == "128x128"
    check(a, b, torch.float32, tol=TF32_TOL, name=variant_name(torch.float32, "128x128", "NT"))
    force(monkeypatch, "128x256c2")
    check(a, b, torch.float32, tol=TF32_TOL, name=variant_name(torch.float32, "128x256c2", "NT"))


def check_swapped(a, b, dtype, shape, layout, bias, exact_bias):
    """A 16-bit problem run swapped (C^T's tiles stored by TMA boxes): close
    to the reference (a poisoned output: nothing unwritten); exact on small
    integers when not batched."""
    M, N, K, batch = shape
    check(a, b, dtype, bias=bias)
    if batch is None:
        exact_check(M, N, K, dtype, layout, bias=exact_bias)


# 16-bit problems run swapped (C^T = B^T A^T, C^T's tiles stored
# transposed) where the swapped tiles need fewer weighted waves: N just past
# a multiple of 256 (4104: 4.1 waves of 128x256 tiles, or ping-pong 128x128
# in clusters; swapped 4 waves), or a batch of 2048x640 (2 waves of 128x128
# against 1 of swapped 128x256).
SWAP16_SHAPES = [(4096, 4104, 72, None), (1024, 4104, 136, None), (2048, 640, 72, 3)]
# Forced (the swapped 128x256 names): shapes whose swapped problem takes 128x256
# tiles with and without clusters (ragged edges, a batch, several tiles per
# CTA among them), and shapes whose swapped tiles have no transposed-C
# kernel (128x64, 128x128, 128x192, split-K): those run as called.
SWAP16_FORCED_SHAPES = [(2048, 2048, 136, None), (4096, 4096, 136, None), (2000, 2504, 200, None),
                        (4000, 3000, 72, None), (600, 1536, 520, 3), (4104, 4096, 1032, None),
                        (512, 256, 960, None), (1280, 1024, 520, None), (1536, 1536, 72, None),
                        (128, 4096, 4096, None), (4096, 128, 4096, None)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_swap16_default(monkeypatch, dtype, layout):
    for M, N, K, batch in SWAP16_SHAPES:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        assert swap_waves(dtype, M, N, layout, batch or 1, K), (M, N, K, batch)
        want = expected_name(dtype, M, N, layout, batch or 1, K)
        assert "sw_" in want and kernel_name(a, b) == want, (M, N, K, batch)
        check_swapped(a, b, dtype, (M, N, K, batch), layout, bias=True, exact_bias=True)
    # As called, by name
    force(monkeypatch, "128x128ppc2")
    a, b = make_operands(4096, 4104, 72, dtype, "cuda", layout)
    assert kernel_name(a, b) == variant_name(dtype, "128x128ppc2", layout)
    check(a, b, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_swap16_forced_every_config(monkeypatch, dtype, layout):
    seen = set()
    for M, N, K, batch in SWAP16_FORCED_SHAPES:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        tile = expected_tile(N, M, batch or 1, dtype, K)
        seen.add(tile)
        if tile not in ("128x256", "128x256c2"):  # no swapped kernel: the tiles as called
            force(monkeypatch, expected_tile(M, N, batch or 1, dtype, K))
            assert kernel_name(a, b) == variant_name(dtype, expected_tile(M, N, batch or 1, dtype, K), layout)
            check(a, b, dtype)
            continue
        force(monkeypatch, tile + "sw")
        assert kernel_name(a, b) == variant_name(dtype, tile + "sw", layout), (M, N, K, batch)
        check_swapped(a, b, dtype, (M, N, K, batch), layout, bias=M % 2 == 0, exact_bias=M % 2 == 1)
    assert seen == {"128x64", "128x128", "128x192", "128x256", "128x256c2", "128x64sk2", "128x128ppc2"}, seen
    # Not where C's rows are not 16-byte aligned (N % 8): the rules.
    monkeypatch.delenv("TILED_CONFIG")
    for M, N, K in [(1000, 1001, 136), (2048, 2044, 136)]:
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert "sw_" not in kernel_name(a, b), (M, N, K)
        check(a, b, dtype)


# 16-bit NN / NT problems run swapped on 128 x 144 / 160 / 200 / 208 tiles
# (that many columns of M) where those pack M into fewer weighted waves:
# 1536^2 (132 tiles of 128x144 against 96 of 128x192), 1280 rows at N = 4096
# (2 waves of 128x160 against 3 of 128x128), 777 rows (128 tiles of 128x200
# against 112 of 128x256), 1792^2 (126 tiles of 128x200 against 98 of
# 128x256, whose 128x192 alternative needs two waves), 824 rows at N = 4096
# (128 tiles of 128x208; 200 columns would need 5 tile columns, 160 tiles),
# 3000x5008 (520 tiles of 128x232, 4 waves at 0.93, against 4 waves of
# 128x256 pairs; K of 22 k-blocks: with fewer, low_k_pingpong comes first).
SWAP_WIDTH_SHAPES = [(1536, 1536, 72, None), (1280, 4096, 136, None), (777, 4096, 72, None),
                     (1792, 1792, 200, None), (824, 4096, 72, None), (3000, 5008, 1408, None)]
# Forced (128x144sw ... 128x232sw): ragged M (the last tile's last 64-column
# chunk of C^T partly past M), ragged N, a batch, one tile, several tiles
# per CTA.
SWAP_WIDTH_FORCED_SHAPES = [(300, 1000, 136, None), (65, 72, 64, None), (145, 136, 200, 3),
                            (2000, 2504, 72, None), (208, 128, 520, None), (4096, 1024, 64, 2)]


@pytest.mark.parametrize("layout", ["NN", "NT"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_swap_width_default(monkeypatch, dtype, layout):
    for M, N, K, batch in SWAP_WIDTH_SHAPES:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        width = swap_width(dtype, M, N, layout, batch or 1, K)
        assert width, (M, N, K, batch)
        assert kernel_name(a, b) == variant_name(dtype, width + "sw", layout) == expected_name(
            dtype, M, N, layout, batch or 1, K), (M, N, K, batch)
        check(a, b, dtype, bias=(M % 2 == 0))
    assert swap_width(dtype, 1536, 1536, layout) == "128x144"
    assert swap_width(dtype, 1280, 4096, layout) == "128x160"
    assert swap_width(dtype, 777, 4096, layout) == "128x200"
    assert swap_width(dtype, 824, 4096, layout) == "128x208"
    assert swap_width(dtype, 3000, 5000, layout) == "128x232"
    # As called, by name
    a, b = make_operands(1536, 1536, 72, dtype, "cuda", layout)
    with monkeypatch.context() as m:
        force(m, "128x192")
        assert kernel_name(a, b) == variant_name(dtype, "128x192", layout)
    # TT swapped has a K-major A next to an N-major B (no such kernel): as
    # called.  TN swapped is TN again (both operands MN-major).
    assert swap_width(dtype, 1536, 1536, "TT") is None
    a, b = make_operands(1536, 1536, 72, dtype, "cuda", "TT")
    assert kernel_name(a, b) == variant_name(dtype, "128x192", "TT")
    assert swap_width(dtype, 1536, 1536, "TN") == "128x160"
    assert swap_width(dtype, 3072, 768, "TN") == "128x160"
    assert swap_width(dtype, 768, 3072, "TN") == "128x160"
    assert swap_width(dtype, 3072, 1024, "TN") == "128x208"
    assert swap_width(dtype, 2816, 1024, "TN") == "128x176"
    for M, N, K in ((1536, 1536, 72), (768, 3072, 200), (3072, 1024, 136)):
        a, b = make_operands(M, N, K, dtype, "cuda", "TN")
        assert kernel_name(a, b) == variant_name(dtype, swap_width(dtype, M, N, "TN") + "sw", "TN")
        check(a, b, dtype, bias=True)


@pytest.mark.parametrize("width", SWAP_WIDTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_swap_width_forced(monkeypatch, dtype, layout, width):
    force(monkeypatch, f"128x{width}sw")
    check_forced_swapped(monkeypatch, dtype, layout, SWAP_WIDTH_FORCED_SHAPES, f"128x{width}",
                         lambda name: "sw_" not in name or "128x256sw" in name, tn=True)


def check_forced_swapped(monkeypatch, dtype, layout, shapes, tile, as_called, tn=False):
    """Each (M, N, K, batch) runs on the forced swapped-only `tile` where its
    layout and C allow it (C^T's whole and partial 64-column chunks through
    TMA boxes), else as called (a column-major A has no K-major B when
    swapped, a C with N % 8 no TMA stores), which `as_called(name)` checks.
    tn: the tiles also take TN (both operands MN-major when swapped) where
    A's rows are 16-byte aligned, or staged so (dispatch stages an operand
    only where M and N are >= 64)."""
    for M, N, K, batch in shapes:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        lay = "N" + layout[1] if M == 1 else layout  # (a single row of A is row-major whatever its strides say)
        if (lay[0] == "T" and not (tn and lay == "TN" and (M % 8 == 0 or min(M, N) >= 64))) or N % 8:
            assert as_called(kernel_name(a, b)), (M, N, K, batch)
            check(a, b, dtype)
            continue
        assert kernel_name(a, b) == variant_name(dtype, tile + "sw", lay), (M, N, K, batch)
        check_swapped(a, b, dtype, (M, N, K, batch), lay, bias=M % 2 == 0, exact_bias=M % 2 == 1)


SLAB_WIDTHS = (8, 16, 24, 32, 40, 48, 56, 64)


def few_rows_slab(M, N, K, batch):
    """Mirror of hopper.cu's few_rows_slab(): 33..64 rows of the small side
    M, K 1024..2048, one batch, N / 64 tile rows within one wave: where the
    rule leaves the problem to the skinny kernel, one column of 64-wide
    one-slab tiles."""
    return batch == 1 and 32 < M <= 64 and 1024 <= K <= 2048 and cdiv(N, 64) <= num_sms()


def slab_width(dtype, M, N, layout, batch=1, rule=False, streamk=None, K=0):
    """Mirror of hopper.cu's slab_width() (rule: the rule itself, also where
    stream-K is forced; else None where streamk is not None): a 16-bit
    problem with a row-major A and M <= 128 runs
    swapped on 64 x W one-slab tiles (W a multiple of 8, 8 ... 64) where its
    N / 64 tile rows fill a quarter to one wave, M cut into as many tile
    columns as still fit that wave (at most 4); past one wave, M <= 64 runs
    as one tile column where the tile rows fill their waves to >= 60% (70%
    for M > 16; and, for M > 32, within two waves); for M <= 32 only with
    tile rows for >= 2/5 of the SMs.  With an N-major B (NN), never for
    M <= 16, nor for M <= 32 past one wave.  C (fresh, contiguous) must be 16-byte aligned.
    TN (C^T's B is A^T, N-major and M wide) as n_major_slab says.
    M > N: none (one-slab tiles lie along the longer side: slab_width_as_called).
    The tile name ("64x32") or None."""
    tn = layout == "TN"
    if M > N or (tn and M % 8) or not swappable16(dtype, M, N, "NN" if tn else layout, batch):
        return None
    width = lambda t: n_major_slab(t, M, "TN", swapped=True) if tn else t  # noqa: E731
    got = width(slab_rule(M, N, layout[1] == "N", batch, rule, streamk))
    return width("64x64") if got is None and (streamk is None or rule) and few_rows_slab(M, N, K, batch) else got


def slab_width_as_called(dtype, M, N, layout, batch=1, rule=False, streamk=None, K=0):
    """Mirror of hopper.cu's slab_width_as_called(): an NN / NT / TN problem
    (TT: none) with M > N runs as called on the one-slab tiles slab_width
    would give its swapped problem (N x M) with a K-major B, W columns of N
    by 64 rows of M, an N-major B (NN, TN) as n_major_slab says; C (fresh,
    contiguous) 16-byte aligned, a column-major A's rows too (M % 8 == 0).
    The tile name or None."""
    if M <= N or layout == "TT" or (layout[0] == "T" and M % 8) or not swappable16(dtype, M, N, "N" + layout[1], batch):
        return None
    width = lambda t: t if layout[1] == "T" else n_major_slab(t, N, layout)  # noqa: E731
    got = width(slab_rule(N, M, False, batch, rule, streamk))
    return width("64x64") if got is None and (streamk is None or rule) and few_rows_slab(N, M, K, batch) else got


MID_SLAB_WIDTHS = (8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 112, 128, 144, 160)


def mid_slab_width(dtype, M, N, layout, batch=1, K=0, streamk=None):
    """Mirror of hopper.cu's mid_slab_width(): a 16-bit NN / NT problem with
    M, N > 128 whose rules' choice is 128x64 tiles (whole or split in two)
    runs swapped on 64 x W one-slab tiles, W the narrowest of
    MID_SLAB_WIDTHS from 32 on at which its N / 64 tile rows (<= the SMs) times M / W
    tile columns fit one wave, where 64 * W is <= 85% of a 128x64 tile's
    work per SM and wave (halved when split); C (fresh, contiguous) 16-byte
    aligned.  The tile name ("64x88") or None (also where streamk is not None)."""
    if streamk is not None or M <= 128 or N <= 128 or not swappable16(dtype, M, N, layout, batch):
        return None
    tile = expected_tile(M, N, batch, dtype, K, streamk)
    if tile not in ("128x64", "128x64sk2", "128x128"):
        return None
    bn = int(tile[4:7].rstrip("s"))
    if bn == 128 and cdiv(M, 128) * cdiv(N, 128) * batch > num_sms():
        return None  # (128x128 tiles: within one wave)
    sms, rows = num_sms(), cdiv(N, 64) * batch
    if rows > sms:
        return None
    need = cdiv(M, sms // rows)
    w = next((x for x in MID_SLAB_WIDTHS if x >= need), None)
    if w is None or w < 32:
        return None
    split = 2 if tile == "128x64sk2" else 1
    waves = cdiv(cdiv(M, 128) * cdiv(N, bn) * batch * split, sms)
    return f"64x{w}" if 64 * w * 100 * split <= waves * 128 * bn * 85 else None


def tn_few_tiles_slab(dtype, M, N, layout, batch=1, K=0, streamk=None):
    """Mirror of hopper.cu's tn_few_tiles_slab(): a 16-bit TN problem (one
    batch, M and N past 64, K 1024-4096, A TMA-readable and B's rows whole
    32-byte sectors: M % 8, N % 16) whose rules' choice is 128x64 tiles,
    whole or split in two, filling at most half the SMs runs as called on
    64x64 one-slab tiles.  "64x64" or None (also where streamk is not None)."""
    if (dtype not in HALF or layout != "TN" or batch != 1 or streamk is not None or M <= 64 or N <= 64
            or not 1024 <= K <= 4096 or M % 8 or N % 16):
        return None
    if expected_tile(M, N, batch, dtype, K, streamk) not in ("128x64", "128x64sk2"):
        return None
    return "64x64" if cdiv(M, 128) * cdiv(N, 64) * 2 <= num_sms() else None


def n_major_slab(tile, N, layout, swapped=False):
    """The tile for an N-major B (NN, TN as called; TN swapped, N then the
    caller's M) given the rule's: none where B's rows are not 32-byte
    multiples (N % 16) or the rule says 8 or 56 wide; swapped only 32 or 64
    wide; as called one column up to N = 64 (16 wide, not for TN; 32; 64),
    64-wide columns past it."""
    if tile is None or N % 16 or tile in ("64x8", "64x56"):
        return None
    if swapped:
        return tile if tile in ("64x32", "64x64") else None
    if N <= 16:
        return None if layout == "TN" else "64x16"
    return "64x32" if N <= 32 else "64x64"


def slab_rule(M, N, b_n_major, batch, rule, streamk):
    """slab_width's rule for a problem of M <= N whose B is N-major or not."""
    if streamk is not None and not rule:
        return None  # (rule: also with stream-K forced)
    sms, rows = num_sms(), cdiv(N, 64) * batch
    if M > 128 or (b_n_major and (M <= 16 or (M <= 32 and rows > sms))):
        return None
    if rows > sms:
        waves = cdiv(rows, sms)
        if M > 64 or rows * 10 < waves * sms * (6 if M <= 16 else 7) or (M > 32 and waves > 2 and batch == 1):
            return None
        w = cdiv(M, 8) * 8
    elif sms // rows > 4:
        return None
    else:
        w = cdiv(cdiv(M, sms // rows), 8) * 8
    if w > 64 or (M <= 32 and rows * 5 < sms * 2):  # (M <= 32: tile rows for >= 2/5 of the SMs)
        return None
    return f"64x{w}"


# One-slab tiles: (M, N, K, NN, NT), by default and forced by name.
# 64x4096 -> 2 tiles of 32 columns per 64 rows of N, 48x2048 -> 3 of 16,
# 128x2048 -> 4 of 32, 64x8192 -> 1 of 64, 100 / 128 rows at N = 4096 -> 2
# of 56 / 64, 16 rows (NT only) -> 2 of 8; past a wave of tile rows (14336 / 64 = 224 > 132): one column,
# 40 / 24 rows (24: NT only); never: a last wave under 60% full (9000: 141
# rows), more than 4 tile columns (128x1024, 64x512), M > 128, or M > 64 /
# past two waves for M > 32 beyond one wave of tile rows (100x14336,
# 48x28672); 11008 (172 rows, 65% full): only up to 16 rows; 16x2304 /
# 8x2048 / 32x2048: M <= 32 on 36 / 32 tile rows, under 2/5 of the SMs.
SLAB_RULE_SHAPES = [(64, 4096, 1024, "64x32", "64x32"), (100, 4096, 520, "64x56", "64x56"),
                    (128, 4096, 136, "64x64", "64x64"), (48, 2048, 200, "64x16", "64x16"),
                    (128, 2048, 136, "64x32", "64x32"), (64, 8192, 72, "64x64", "64x64"),
                    (16, 4096, 72, None, "64x8"), (40, 14336, 72, "64x40", "64x40"),
                    (24, 14336, 72, None, "64x24"), (100, 14336, 72, None, None), (48, 28672, 72, None, None),
                    (16, 11008, 72, None, "64x16"), (32, 11008, 72, None, None), (16, 2304, 72, None, None),
                    (8, 2048, 72, None, None), (32, 2048, 72, None, None), (64, 9000, 72, None, None), (200, 4096, 72, None, None),
                    (128, 1024, 72, None, None), (64, 512, 72, None, None)]
# Forced (64xWsw): ragged N (the last tile's rows of C^T), ragged
# M (C^T's last columns past M), a batch, more tiles than SMs, one k-block.
SLAB_FORCED_SHAPES = [(64, 1000, 136, None), (33, 264, 200, 3), (70, 136, 72, None), (100, 9000, 72, None),
                      (130, 200, 520, None), (64, 72, 64, 2), (1, 4096, 64, None)]


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_rule(monkeypatch, dtype, layout):
    for M, N, K, nn, nt in SLAB_RULE_SHAPES:
        if layout == "TN" and M % 8:
            continue  # (no TMA for a column-major A)
        rule = nt if layout == "NT" else nn if layout == "NN" else n_major_slab(nn, M, "TN", swapped=True)
        assert slab_width(dtype, M, N, layout) == rule, (M, N)
        assert slab_width(dtype, M, N, layout, rule=True) == rule, (M, N)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert kernel_name(a, b) == expected_name(dtype, M, N, layout, K=K), (M, N, K)
        # without them (the choice without the one-slab tiles, by name), and the rule's
        for want in (None, rule):
            with monkeypatch.context() as m:
                if want is None:
                    without = expected_name(dtype, M, N, layout, K=K, slab=False)
                    force(m, without)
                    assert kernel_name(a, b) == without, (M, N, K)
                    assert "_64x" not in kernel_name(a, b)
                    continue
                force(m, want + "sw")
                assert kernel_name(a, b) == variant_name(dtype, want + "sw", layout), (M, N, K)
                check_swapped(a, b, dtype, (M, N, K, None), layout, bias=True, exact_bias=M % 2 == 0)
    # TT never has them.
    a, b = make_operands(64, 4096, 1024, dtype, "cuda", "TT")
    assert slab_width(dtype, 64, 4096, "TT") is None and "_64x" not in kernel_name(a, b)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_over_skinny(monkeypatch, dtype, layout):
    # Dispatch prefers one-slab tiles to the skinny kernel for M <= 64 where
    # they apply (M <= 16, and M <= 32 past a wave of tile rows, only with a
    # K-major B); they have no split, so the same bits every run.
    nt = layout == "NT"
    # (M, N, K, batch, want): batches too (tile rows count every batch: 4 x
    # 4096 / 64 = 256 > 132), from K = 256; 64x1000: 16 tile rows of N, 4
    # columns would not do.
    for M, N, K, batch, want in ((64, 4096, 256, None, "64x32sw"), (48, 4096, 256, None, "64x24sw"),
                                 (33, 2048, 256, None, "64x16sw"), (32, 4096, 256, None, "64x16sw"),
                                 (17, 4096, 256, None, "64x16sw"), (64, 14336, 256, None, "64x64sw"),
                                 (16, 4096, 256, None, "64x8sw" if nt else None),
                                 (24, 14336, 256, None, "64x24sw" if nt else None), (64, 1000, 256, None, None),
                                 (64, 4096, 256, 4, "64x64sw"), (16, 4096, 256, 4, "64x16sw" if nt else None),
                                 (33, 1000, 512, 2, "64x16sw"), (1, 4096, 128, 32, None)):
        if layout == "TN" and M % 8:
            continue  # (neither kernel reads a column-major A with unaligned rows)
        if layout == "TN" and want is not None:  # NN's, as n_major_slab takes it (C^T's B M wide)
            want = n_major_slab(want[:-2], M, "TN", swapped=True)
            want = want and want + "sw"
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        if want is None:
            assert kernel_name(a, b).startswith("skinny_"), (M, N, K, batch)
            continue
        assert kernel_name(a, b) == variant_name(dtype, want, layout), (M, N, K, batch)
        check(a, b, dtype)
    assert_deterministic(64, 4096, 4096, dtype, "64x32sw", runs=3)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
def test_few_rows_slab(dtype, layout):
    # 33..64 rows against at most a wave of tile rows at K = 1024..2048: one
    # column of 64-wide one-slab tiles where the rule left the skinny kernel
    # (hopper.cu's few_rows_slab); not at K = 8192.
    for M, N, K, batch in ((64, 1024, 2048, None), (1024, 64, 2048, None), (48, 512, 1024, None),
                           (512, 48, 1024, None), (64, 2048, 1536, None), (48, 4096, 2048, None)):
        want = expected_name(dtype, M, N, layout, batch or 1, K)
        assert "_64x" in want, (M, N, K, want)  # (64x16sw / 64x24sw where the rule had a width)
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        assert kernel_name(a, b) == want, (M, N, K)
        check(a, b, dtype)
    for M, N, K in ((64, 1024, 8192), (1024, 64, 8192)):  # (the skinny kernel's, where it is on)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert "_64x64" not in kernel_name(a, b), (M, N, K)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rows_off32_clusters(dtype, layout):
    # Operands whose rows start 16 bytes off a 32-byte boundary (hopper.cu's
    # off32_cluster): 2-CTA clusters in each band, by leading dimension (K =
    # 3000 / 1000 / 5000; NN's N, TN's M) and by base pointer; the aligned
    # K = 3008 keeps the other rules.
    clusters = set()
    for M, N, K in ((2048, 2048, 3000), (1024, 1024, 3000), (1000, 1000, 1000), (1536, 1536, 3000),
                    (4096, 1000, 4096), (3000, 512, 5000), (2048, 2048, 3008)):
        want = expected_name(dtype, M, N, layout, 1, K)
        cluster = off32_cluster(dtype, M, N, layout, 1, K)
        if cluster:
            assert want == variant_name(dtype, cluster, layout), (M, N, K)
            clusters.add(cluster)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert kernel_name(a, b) == want, (M, N, K)
        check(a, b, dtype)
    assert off32_cluster(dtype, 2048, 2048, layout, 1, 3008) is None
    assert clusters == {"128x256c2", "128x128ppc2"}, clusters
    # Aligned leading dimensions, A's base pointer 16 bytes past a 32-byte boundary.
    buf = rand((2048 * 3072 + 8,), dtype, "cuda")
    a = buf[8:].view(2048, 3072)
    b = make_operands(2048, 2048, 3072, dtype, "cuda", layout)[1]
    if layout[0] == "T":
        a = buf[8:].view(3072, 2048).t()
    assert kernel_name(a, b) == variant_name(dtype, "128x256c2", layout)
    check(a, b, dtype)


@pytest.mark.parametrize("width", SLAB_WIDTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_forced(monkeypatch, dtype, layout, width):
    force(monkeypatch, f"64x{width}sw")
    check_forced_swapped(monkeypatch, dtype, layout, SLAB_FORCED_SHAPES, f"64x{width}",
                         lambda name: "_64x" not in name, tn=True)


# The wide one-slab tiles (64 x 72 ... 128, swapped only, a K-major B: NN and
# NT), forced: a mid-size problem, ragged M and N, a batch, several tiles per
# CTA, one k-block; TN / TT and an unaligned C run as called.
WIDE_SLAB_WIDTHS = (72, 80, 88, 96, 112, 128, 144, 160)
WIDE_SLAB_FORCED_SHAPES = [(514, 1280, 264, None), (130, 200, 520, None), (33, 264, 200, 3), (1000, 9000, 72, None),
                           (300, 136, 64, None), (128, 64, 72, 2), (777, 1000, 136, None)]


@pytest.mark.parametrize("width", WIDE_SLAB_WIDTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_wide_slab_forced(monkeypatch, dtype, layout, width):
    force(monkeypatch, f"64x{width}sw")
    check_forced_swapped(monkeypatch, dtype, layout, WIDE_SLAB_FORCED_SHAPES, f"64x{width}",
                         lambda name: "_64x" not in name)
    # no as-called kernel of these widths: the name with no "sw" is declined (the rules' choice runs)
    a, b = make_operands(514, 1280, 264, dtype, "cuda", layout)
    force(monkeypatch, f"64x{width}")
    name = kernel_name(a, b)
    assert name == expected_name(dtype, 514, 1280, layout, K=264) if layout[0] == "N" else "_64x" not in name, name


# The mid-size rule (mid_slab_width), (M, N, K, the tile): 514 x 1280 on 20 x
# 6 tiles of 64x88, 1576 x 384 on 6 x 22 of 64x72, 308 x 768 (128x64 split
# in two by the rules) on 12 x 10 of 64x32; not 788 x 1024 (64x112: 0.875 of
# a 128x64 tile's work), 2048 x 1024 (128x128 tiles), 1024 x 1024 x 2048 TN
# (no K-major B when swapped), 1000 x 1000 (64x128: as much work as 128x64);
# where the rules give 128x128 tiles within one wave, 1584 x 768 on 12 x 11
# tiles of 64x144 and 308 x 3072 on 48 x 2 of 64x160.
MID_SLAB_SHAPES = [(514, 1280, 3840, "64x88"), (1576, 384, 1536, "64x72"), (308, 768, 3072, "64x32"),
                   (788, 1024, 3072, None), (2048, 1024, 1024, None), (1000, 1000, 200, None),
                   (1584, 768, 3072, "64x144"), (308, 3072, 768, "64x160")]


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_mid_slab_rule(dtype, layout):
    for M, N, K, tile in MID_SLAB_SHAPES:
        if layout == "TN" and M % 8:
            continue  # (no TMA for a column-major A: staged)
        want = tile if layout != "TN" else None
        assert mid_slab_width(dtype, M, N, layout, K=K) == want, (M, N, K)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        name = kernel_name(a, b)
        assert name == expected_name(dtype, M, N, layout, K=K), (M, N, K, name)
        assert (want is not None) == (name == variant_name(dtype, f"{tile}sw", layout)), (M, N, K, name)
        check(a, b, dtype, bias=M % 2 == 0)


# TN problems whose 128x64 tiles fill at most half the SMs (tn_few_tiles_slab;
# 132 SMs): 320 x 1024 (48 tiles; at K = 2048 the rules split K in two),
# 1024 x 384, 640 x 640 on 64x64 tiles as called; not 512 x 1536 (96 tiles),
# K = 8192 or 512, nor an N whose rows are not 32-byte multiples (1000).
TN_FEW_TILES = [(320, 1024, 1024, "64x64"), (320, 1024, 2048, "64x64"), (1024, 384, 4096, "64x64"),
                (640, 640, 2048, "64x64"), (512, 1536, 2048, None), (320, 1024, 8192, None),
                (640, 640, 512, None), (1024, 1000, 2048, None)]


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_tn_few_tiles_slab(dtype):
    for M, N, K, tile in TN_FEW_TILES:
        want = tile if num_sms() == 132 else tn_few_tiles_slab(dtype, M, N, "TN", K=K)
        assert tn_few_tiles_slab(dtype, M, N, "TN", K=K) == want, (M, N, K)
        a, b = make_operands(M, N, K, dtype, "cuda", "TN")
        name = kernel_name(a, b)
        assert name == expected_name(dtype, M, N, "TN", K=K), (M, N, K, name)
        assert (want is not None) == (name == variant_name(dtype, "64x64", "TN")), (M, N, K, name)
        check(a, b, dtype, bias=N % 4 == 0)
        if want is not None:
            exact_check(M, N, K, dtype, "TN", bias=True)


def check_as_called(a, b, dtype, shape, layout):
    """A problem on one-slab tiles as called (register vector stores; TMA
    boxes for 64 columns): close to the reference (a poisoned output:
    nothing unwritten); exact on small integers when not batched."""
    M, N, K, batch = shape
    check(a, b, dtype)
    if batch is None:
        exact_check(M, N, K, dtype, layout, bias=N % 2 == 0)


@pytest.mark.parametrize("layout", ["NN", "NT", "TN"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_as_called_rule(monkeypatch, dtype, layout):
    # A small N runs as called on the one-slab tiles the swapped problem
    # (N x M) would get with a K-major B: SLAB_RULE_SHAPES transposed, their
    # NT column (where C's rows, N long, are 16-byte aligned; an N-major B
    # (NN, TN) as n_major_slab says); TT never.
    for N, M, K, _, nt in SLAB_RULE_SHAPES:
        want = None if N % 8 else nt if layout == "NT" else n_major_slab(nt, N, layout)
        assert slab_width_as_called(dtype, M, N, layout) == want, (M, N)
        assert slab_width_as_called(dtype, M, N, layout, rule=True) == want, (M, N)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert kernel_name(a, b) == expected_name(dtype, M, N, layout, K=K), (M, N, K)
        if want is not None:
            assert kernel_name(a, b) == variant_name(dtype, want, layout), (M, N, K)
            check_as_called(a, b, dtype, (M, N, K, None), layout)
            with monkeypatch.context() as m:  # without them, by name
                without = expected_name(dtype, M, N, layout, K=K, slab=False)
                force(m, without)
                assert kernel_name(a, b) == without and "_64x" not in without, (M, N, K)
    a, b = make_operands(4096, 64, 1024, dtype, "cuda", "TT")
    assert slab_width_as_called(dtype, 4096, 64, "TT") is None and "_64x" not in kernel_name(a, b)


# Forced (64xW) with M > N: ragged M (the last tile's rows),
# ragged N (the last tile's columns, N % 8 == 0), a batch, more tiles than
# SMs, one k-block; N % 8 != 0 (no 16-byte rows of C) runs as before.
SLAB_AS_CALLED_SHAPES = [(1000, 64, 136, None), (264, 40, 200, 3), (136, 72, 72, None), (9000, 104, 72, None),
                         (200, 136, 520, None), (72, 64, 64, 2), (4096, 8, 64, None), (1000, 33, 200, None)]


@pytest.mark.parametrize("width", SLAB_WIDTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_as_called_forced(monkeypatch, dtype, layout, width):
    for M, N, K, batch in SLAB_AS_CALLED_SHAPES:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        if layout == "TT" or N % 8:  # the rules
            monkeypatch.delenv("TILED_CONFIG", raising=False)
            assert "_64x" not in kernel_name(a, b), (M, N, K, batch)
            check(a, b, dtype)
            continue
        force(monkeypatch, f"64x{width}")
        assert kernel_name(a, b) == variant_name(dtype, f"64x{width}", layout), (M, N, K, batch)
        check_as_called(a, b, dtype, (M, N, K, batch), layout)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_slab_as_called_over_skinny(monkeypatch, dtype):
    # Dispatch prefers the one-slab tiles as called to the skinny kernel
    # (which would run a small N swapped) where they apply: NN, NT, TN (not
    # TT), batches from K = 256 (from 33 columns at any K, past two waves of
    # tile rows too: attention PV products); no split, so the same bits every run.
    for M, N, K, batch, layout, want in ((4096, 64, 256, None, "NT", "64x32"), (4096, 32, 256, None, "NT", "64x16"),
                                         (14336, 16, 256, None, "NT", "64x16"), (4096, 64, 256, None, "NN", "64x64"),
                                         (4096, 16, 256, None, "NN", None), (4096, 48, 256, None, "NN", "64x64"),
                                         (4096, 40, 256, None, "NN", None), (4096, 32, 256, None, "NN", "64x32"),
                                         (2048, 64, 256, None, "NN", "64x64"), (2048, 64, 256, None, "TN", "64x64"),
                                         (4096, 32, 256, None, "TN", "64x32"), (2048, 32, 256, None, "TN", None),
                                         (4096, 64, 256, None, "TN", "64x64"), (8192, 64, 256, 2, "TN", "64x64"),
                                         (14336, 16, 256, None, "TN", None), (8192, 48, 256, None, "TN", "64x64"),
                                         (4096, 64, 256, None, "TT", None), (4096, 64, 256, 4, "NT", "64x64"),
                                         (4096, 1, 128, 32, "NT", None), (512, 64, 512, 128, "NN", "64x64"),
                                         (128, 64, 128, 384, "NN", "64x64"), (128, 16, 128, 384, "NN", None)):
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        # the rules' choice: a name forced by hand that runs nowhere here steps the shipped table aside
        with tune.config_env("cpu_blocked_baseline"):
            name = kernel_name(a, b)
        if want is None:
            assert name.startswith("skinny_"), (M, N, K, batch, layout)
            continue
        assert name == variant_name(dtype, want, layout), (M, N, K, batch)
        check(a, b, dtype)
    assert_deterministic(4096, 64, 4096, dtype, "64x32_nt", runs=3)


# (M, N, K, batch, layout, dtype, kernel-name part): operands read once or by
# a few CTAs of one wave, loaded under L2's evict_first policy by default
# (settings.h's l2_stream_bits): the skinny kernel (also swapped), one-slab
# tiles of one and of two columns, 128-row tiles with one tile row (stream-K
# for tf32), a batch whose B is broadcast (read by every batch: no hint).
L2_STREAM_CASES = [(1, 4096, 4096, None, "NN", torch.bfloat16, "skinny_"),
                   (2000, 8, 1000, None, "NN", torch.float16, "skinny_"),
                   (16, 14336, 512, None, "NT", torch.bfloat16, "64x16sw"),
                   (64, 4096, 1000, None, "NN", torch.bfloat16, "64x32sw"),
                   (64, 4096, 512, 2, "NN", torch.float16, "64x64sw"),
                   (128, 14336, 4096, None, "NT", torch.bfloat16, "128x128"),
                   (16, 4096, 4096, None, "NN", torch.float32, "streamk"),
                   (3, 4096, 1000, 3, "NN", torch.bfloat16, "")]


def test_l2_stream_rule():
    # The cache policy moves no data: the right answer, and the same bits on
    # a second run.
    for M, N, K, batch, layout, dtype, name_part in L2_STREAM_CASES:
        with tf32_mode(dtype == torch.float32):
            a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
            if batch == 3:
                b = b[0]  # broadcast over the batch
            assert name_part in kernel_name(a, b), (M, N, K, kernel_name(a, b))
            bias = rand((N,), dtype, "cuda")
            out = gemm(a, b, bias)
            tol = TF32_TOL if dtype == torch.float32 else None
            assert_close_rel(out, reference(a, b, bias), dtype, tol)
            assert torch.equal(gemm(a, b, bias), out), (M, N, K, batch, layout)


def test_tf32_nt_swapped_for_waves(tf32, monkeypatch):
    # tf32 NT takes the same wave rule as the 16-bit types (its kernel names
    # do not mark the swap): 4096x4104 as called is 5 waves of 128x256
    # pairs, swapped 4 waves of 128x256 tiles without clusters.
    for M, N, K, batch in SWAP16_SHAPES:
        a, b = make_operands(M, N, K, torch.float32, "cuda", "NT", batch=batch)
        assert tile_problem(torch.float32, M, N, "NT", batch or 1, K) == (N, M), (M, N, K, batch)
        assert kernel_name(a, b) == expected_name(torch.float32, M, N, "NT", batch or 1, K), (M, N, K, batch)
        check(a, b, torch.float32, tol=TF32_TOL)
    a, b = make_operands(4096, 4104, 72, torch.float32, "cuda", "NT")
    assert kernel_name(a, b) == variant_name(torch.float32, "128x256", "NT")
    force(monkeypatch, "128x256c2")  # as called, by name
    assert kernel_name(a, b) == variant_name(torch.float32, "128x256c2", "NT")


def test_f32_without_tf32_is_not_hopper():
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = make_operands(256, 256, 256, torch.float32, "cuda", "NT")
    assert not kernel_name(a, b).startswith("sm90")


# ------------------------------------------------------------------ edges

def padded(rows, cols, dtype, ch, pad=8):
    """A [rows, cols] view whose leading dimension is rounded up to `pad`
    elements (so TMA can take it) while the extents stay arbitrary; the padding
    holds huge values, which must never leak into the result."""
    if ch == "N":
        ld = -(-cols // pad) * pad
        base = torch.full((rows, ld), 1e4, dtype=dtype, device="cuda")
        base[:, :cols] = rand((rows, cols), dtype, "cuda")
        return base[:, :cols]
    ld = -(-rows // pad) * pad
    base = torch.full((cols, ld), 1e4, dtype=dtype, device="cuda")
    base[:, :rows] = rand((cols, rows), dtype, "cuda")
    return base[:, :rows].t()


EDGE_SHAPES = [
    (1, 8, 8), (127, 129, 63), (129, 255, 65), (131, 257, 137), (257, 127, 131), (67, 509, 521),
    (128, 256, 1), (255, 384, 200), (640, 520, 72),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_edges_padded_views(dtype, layout):
    for M, N, K in EDGE_SHAPES:
        a = padded(M, K, dtype, layout[0])
        b = padded(K, N, dtype, layout[1])
        if K > 1:  # K == 1: a column-major [M, 1] A is normalised to row-major, stride 1 (fallback)
            assert kernel_name(a, b).startswith("sm90_"), (M, N, K)
        check(a, b, dtype, bias=(M % 2 == 1))


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_edges_tf32(tf32, layout):
    for M, N, K in EDGE_SHAPES:
        a = padded(M, K, torch.float32, layout[0], pad=4)
        b = padded(K, N, torch.float32, layout[1], pad=4)
        assert kernel_name(a, b).startswith("sm90_tf32"), (M, N, K)
        if min(M, N, K) > 1:  # a dim of 1: its operand's layout may be normalised
            assert torch.ops.tiled.gemm_kernel_name(a, b).endswith("_" + layout.lower()), (M, N, K)
        check(a, b, torch.float32, tol=TF32_TOL)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_edges_contiguous(dtype):
    # Contiguous tensors: aligned leading dims, ragged tile edges, K % 64 != 0.
    for M, N, K in [(1, 8, 8), (129, 136, 72), (257, 264, 520), (1000, 1000, 1000)]:
        for layout in LAYOUTS:
            a, b = make_operands(M, N, K, dtype, "cuda", layout)
            if layout[0] == "T" and M % 8:
                continue  # column-major A needs M % 8 == 0 for TMA; covered by the fallback test
            assert kernel_name(a, b).startswith("sm90_"), (M, N, K, layout)
            check(a, b, dtype)


# ------------------------------------------------------------------ batches

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_batched(dtype, layout):
    B, M, N, K = 3, 200, 264, 136
    a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=B)
    assert kernel_name(a, b).startswith("sm90_")
    check(a, b, dtype)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_batched_broadcast(dtype):
    # A batch stride of 0 on either side (TMA batch coordinate pinned to 0).
    B, M, N, K = 4, 136, 200, 72
    a2, b2 = make_operands(M, N, K, dtype, "cuda", "TN")
    a3, b3 = make_operands(M, N, K, dtype, "cuda", "TN", batch=B)
    check(a2.expand(B, M, K), b3, dtype)
    check(a3, b2.expand(B, K, N), dtype)
    check(a3, b2, dtype)  # 3-D x 2-D with column-major A: not folded into M


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_batched_tf32(tf32, layout):
    B, M, N, K = 3, 136, 200, 72
    a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=B)
    assert kernel_name(a, b).startswith("sm90_tf32")
    check(a, b, torch.float32, tol=TF32_TOL)
    # a batch stride of 0 on either side
    a2, b2 = make_operands(M, N, K, torch.float32, "cuda", layout)
    check(a2.expand(B, M, K), b, torch.float32, tol=TF32_TOL)
    check(a, b2.expand(B, K, N), torch.float32, tol=TF32_TOL)


# ------------------------------------------------------------------ large, determinism

@pytest.mark.parametrize("layout", LAYOUTS)
def test_large_bf16(layout):
    # Several waves of persistent tiles, long K: ring phases over many tiles.
    a, b = make_operands(4096, 4096, 2048, torch.bfloat16, "cuda", layout)
    check(a, b, torch.bfloat16, name=expected_name(torch.bfloat16, 4096, 4096, layout))


def assert_deterministic(M, N, K, dtype, name_part, runs=2):
    """Same bits on repeated runs (NT, with bias) of the config named name_part."""
    a, b = make_operands(M, N, K, dtype, "cuda", "NT")
    bias = rand((N,), dtype, "cuda")
    assert name_part in kernel_name(a, b)
    first = gemm(a, b, bias)
    for _ in range(runs):
        assert torch.equal(gemm(a, b, bias), first)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_deterministic(dtype):
    assert_deterministic(1000, 2056, 1032, dtype, "sm90_")


# ------------------------------------------------------------------ what Hopper refuses

@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_unaligned_is_staged(dtype):
    # Leading dims that are not 16-byte multiples, and a misaligned pointer:
    # the offending operand is copied to an aligned one (staging).
    a, b = make_operands(257, 255, 129, dtype, "cuda", "NN")
    assert torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged_ab+sm90")
    check(a, b, dtype)
    base = rand((257 * 128 + 1,), dtype, "cuda")
    a = base[1:].view(257, 128)  # 2-byte offset from a 16-byte aligned block
    b = rand((128, 136), dtype, "cuda")
    assert torch.ops.tiled.gemm_kernel_name(a, b).startswith("staged_a+sm90")
    check(a, b, dtype)
    # too small to pay for a copy: the SIMT kernel reads it in place
    a, b = make_operands(7, 255, 129, dtype, "cuda", "NN")
    assert torch.ops.tiled.gemm_kernel_name(a, b) == "simt_general"
    check(a, b, dtype)


def test_float64_is_not_hopper():
    a, b = make_operands(256, 256, 256, torch.float64, "cuda", "NN")
    assert not kernel_name(a, b).startswith("sm90")



# ------------------------------------------------------------------ forced: 2-CTA clusters, B multicast

def cluster_name(dtype, M, N, layout, batch=1):
    # The rules' cooperative 128x256 choice, in clusters.
    return expected_name(dtype, M, N, layout, batch).replace("128x256_", "128x256c2_")


def force_cluster(monkeypatch, dtype, M, N, layout, batch=1):
    """Forces cluster_name (read on every call, so for the test only) and returns it."""
    name = cluster_name(dtype, M, N, layout, batch)
    force(monkeypatch, name)
    return name


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_cluster_exact(monkeypatch, dtype, layout):
    M, N, K = LARGE
    a, b = make_operands(M, N, 8, dtype, "cuda", layout)
    want = force_cluster(monkeypatch, dtype, M, N, layout)  # (forced first, then asked)
    assert kernel_name(a, b) == want
    exact_check(M, N, K, dtype, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_cluster_edges(monkeypatch, dtype, layout):
    # Odd tile-row count (the pair's second CTA runs a tile wholly past M),
    # ragged N and K, batches, and several waves of tile pairs.
    for M, N, K, batch in [(296, 11264, 200, None), (296, 5624, 72, 2), (4096, 4096, 1032, None)]:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        want = force_cluster(monkeypatch, dtype, M, N, layout, batch or 1)
        assert kernel_name(a, b) == want, (M, N, K, batch)
        check(a, b, dtype)


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_cluster_tf32(monkeypatch, tf32, layout):
    # tf32 takes clusters for cooperative 128x256 tiles only (NN: tiles over
    # C^T, so its shapes are given transposed).
    M, N, K = LARGE
    a, b = make_operands(M, N, 8, torch.float32, "cuda", layout)
    want = force_cluster(monkeypatch, torch.float32, M, N, layout)
    assert kernel_name(a, b) == want
    assert "c2_" in kernel_name(a, b)
    exact_check(M, N, K, torch.float32, layout)
    for M, N, K, batch in [(296, 11264, 200, None), (296, 5624, 72, 2), (4096, 4096, 1032, None)]:
        if layout == "NN":
            M, N = N, M
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=batch)
        want = force_cluster(monkeypatch, torch.float32, M, N, layout, batch or 1)
        assert kernel_name(a, b) == want, (M, N, K, batch)
        assert "c2_" in kernel_name(a, b)
        check(a, b, torch.float32, tol=TF32_TOL)


# ------------------------------------------------------------------ forced variants (by name, read per call)
#
# 128x128pp[c2]     128x128 tiles, one per consumer warpgroup, alternating
# 128x128sk2/4/8    split K over a cluster of CTAs, DSMEM reduction in fixed order

def variant_name(dtype, variant, layout):
    return f"sm90_{TAG[dtype]}_{variant}_{layout.lower()}"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_few_k_blocks_pingpong(dtype, layout):
    """hopper.cu's low_k_pingpong: 2-20 k-blocks where the choice as called
    is 128x256 in 2-CTA clusters run ping-pong 128x128 tiles (not TT, not a
    batch, not with 21 k-blocks), as the mirror says; results against float64."""
    for M, N, K, batch in [(4096, 4096, 512, None), (4096, 4096, 1280, None), (4096, 4096, 1344, None),
                           (4096, 4096, 512, 2), (6144, 4096, 96, None)]:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        want = expected_name(dtype, M, N, layout, batch or 1, K)
        few = 2 <= cdiv(K, 64) <= 20 and batch is None and layout != "TT"
        assert want.endswith("_128x128pp_" + layout.lower()) == few, (M, N, K, batch, want)
        check(a, b, dtype, bias=K % 3 == 0, name=want)


@pytest.fixture
def pingpong(monkeypatch):
    force(monkeypatch, "128x128pp")
    yield


# k-block counts around the 6-stage ring (1, 5, 6, 7, 17) and many tiles per
# CTA (the two warpgroups alternate; odd and even tile counts per CTA).
PINGPONG_SHAPES = [
    (128, 128, 64), (256, 512, 320), (1024, 4096, 384), (2048, 4096, 448), (4096, 4096, 64),
    (2048, 2048, 1088), (131, 257, 137), (1000, 1000, 1000),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_pingpong_exact(pingpong, dtype, layout):
    for M, N, K in PINGPONG_SHAPES:
        if layout[0] == "T" and M % 8:
            continue
        a, b = make_operands(M, N, 8, dtype, "cuda", layout)
        assert kernel_name(a, b) == variant_name(dtype, "128x128pp", layout), (M, N, K)
        exact_check(M, N, K, dtype, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_pingpong_edges_batched(pingpong, dtype, layout):
    for M, N, K in EDGE_SHAPES:
        a = padded(M, K, dtype, layout[0])
        b = padded(K, N, dtype, layout[1])
        if K > 1:
            assert kernel_name(a, b) == variant_name(dtype, "128x128pp", layout), (M, N, K)
        check(a, b, dtype, bias=(M % 2 == 1))
    a, b = make_operands(200, 264, 136, dtype, "cuda", layout, batch=3)
    check(a, b, dtype, name=variant_name(dtype, "128x128pp", layout))
    a, b = make_operands(4096, 4096, 2048, dtype, "cuda", layout)
    check(a, b, dtype, name=variant_name(dtype, "128x128pp", layout))


def test_pingpong_tf32(pingpong, tf32):
    for M, N, K in PINGPONG_SHAPES[:6]:
        a, b = make_operands(M, N, K, torch.float32, "cuda", "NT")
        check(a, b, torch.float32, tol=TF32_TOL, name=variant_name(torch.float32, "128x128pp", "NT"))
    for M, N, K in EDGE_SHAPES:
        a = padded(M, K, torch.float32, "N", pad=4)
        b = padded(K, N, torch.float32, "T", pad=4)
        check(a, b, torch.float32, tol=TF32_TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_pingpong_cluster(monkeypatch, dtype, layout):
    # Ping-pong inside 2-CTA clusters with B multicast (odd tile-row counts too).
    force(monkeypatch, "128x128ppc2")
    M, N, K = LARGE
    a, b = make_operands(M, N, 8, dtype, "cuda", layout)
    assert kernel_name(a, b) == variant_name(dtype, "128x128ppc2", layout)
    exact_check(M, N, K, dtype, layout)
    for M, N, K, batch in [(296, 11264, 200, None), (296, 5624, 72, 2), (4096, 4096, 1032, None)]:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        check(a, b, dtype, name=variant_name(dtype, "128x128ppc2", layout))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_pingpong_deterministic(pingpong, dtype):
    assert_deterministic(2000, 2056, 1032, dtype, "128x128pp")


def expected_split(M, N, K, setting, dtype=torch.bfloat16, batch=1):
    """The split a setting of S ways (2, 4, 8) comes to on K's k-blocks
    (halved until it fits them), or 0: the 128x128sk{S} that runs."""
    kb = cdiv(K, 32 if dtype == torch.float32 else 64)
    v = int(setting)
    s = 8 if v >= 8 else 4 if v >= 4 else 2 if v >= 2 else 0
    while s > kb:
        s //= 2
    return s if s >= 2 else 0


SPLIT_SHAPES = [  # (M, N, K, batch)
    (16, 4096, 1024, None), (128, 1000, 1000, None), (200, 264, 520, None), (67, 509, 521, None),
    (129, 256, 2000, None), (1, 8, 8, None), (128, 256, 130, None), (200, 264, 1032, 3),
]


def force_split(monkeypatch, M, N, K, setting, dtype, batch=1):
    """Forces the split expected_split gives (where it gives one) and returns it."""
    s = expected_split(M, N, K, setting, dtype, batch)
    if s:
        force(monkeypatch, f"128x128sk{s}")
    else:
        monkeypatch.delenv("TILED_CONFIG", raising=False)
    return s


@pytest.mark.parametrize("setting", ["2", "4", "8"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_splitk(monkeypatch, setting, dtype, layout):
    for M, N, K, batch in SPLIT_SHAPES:
        if layout[0] == "T" and M % 8:
            continue
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        s = force_split(monkeypatch, M, N, K, setting, dtype, batch or 1)
        if s:
            assert kernel_name(a, b) == variant_name(dtype, f"128x128sk{s}", layout), (M, N, K, batch)
        check(a, b, dtype)
    # exact (small integers): every split's partial and the fixed-order sum
    for M, N, K in [(128, 512, 1024), (16, 4096, 4096), (131, 264, 600)]:
        if layout[0] == "T" and M % 8:
            continue
        force_split(monkeypatch, M, N, K, setting, dtype)
        exact_check(M, N, K, dtype, layout)


def test_wave_cost_schedule():
    # M = 777, N = 14336: 7 tile rows run as 4 pairs (8 rows) in clusters,
    # 4 waves of pairs, against 3 waves of single 128x256 tiles: no clusters.
    # M = 768 (6 rows, no padding row): clusters.  M = 1024: 4 waves of
    # 128x256 pairs (the last 39% full) against 7 of ping-pong pairs (3.78).
    for M, want in [(777, "128x256"), (768, "128x256c2"), (1024, "128x128ppc2")]:
        a, b = make_operands(M, 14336, 64, torch.bfloat16, "cuda", "NN")
        assert expected_tile(M, 14336, 1, torch.bfloat16) == want, M
        assert kernel_name(a, b) == variant_name(torch.bfloat16, want, "NN"), M
        check(a, b, torch.bfloat16)


def test_splitk_tf32(monkeypatch, tf32):
    for setting in ["2", "4", "8"]:
        for M, N, K, batch in SPLIT_SHAPES:
            if (M, N, K) == (16, 4096, 1024):
                continue  # (runs swapped, C^T = B^T A^T: no name splits it as called)
            a, b = make_operands(M, N, K, torch.float32, "cuda", "NT", batch=batch)
            s = force_split(monkeypatch, M, N, K, setting, torch.float32, batch or 1)
            if s:
                assert kernel_name(a, b) == variant_name(torch.float32, f"128x128sk{s}", "NT")
            check(a, b, torch.float32, tol=TF32_TOL)


@pytest.mark.parametrize("setting", ["2", "8"])
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_splitk_deterministic(monkeypatch, setting, dtype):
    force(monkeypatch, f"128x128sk{setting}")
    a, b = make_operands(128, 4096, 4096, dtype, "cuda", "NT")
    bias = rand((4096,), dtype, "cuda")
    assert kernel_name(a, b) == variant_name(dtype, f"128x128sk{setting}", "NT")
    first = gemm(a, b, bias)
    for _ in range(5):
        assert torch.equal(gemm(a, b, bias), first)


def check_config_shapes(shapes, dtype, layout, variant, exact=True):
    """Each (M, N, K, batch) runs `variant` (and the Python mirror agrees)
    and matches the reference (bias on even M); with `exact`, 2-D ones also
    pass the small-integer exact check.  Column-major A needs M % 8 == 0
    (else it is staged): those shapes are skipped in T layouts."""
    for M, N, K, batch in shapes:
        if layout[0] == "T" and M % 8:
            continue
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        assert expected_tile(M, N, batch or 1, dtype, K) == variant, (M, N, K, batch)
        mid = mid_slab_width(dtype, M, N, layout, batch or 1, K)
        other = ((mid and mid + "sw") or tn_few_tiles_slab(dtype, M, N, layout, batch or 1, K)
                 or off32_cluster(dtype, M, N, layout, batch or 1, K))
        if other and "TILED_CONFIG" not in os.environ:
            # the off-32 rows, mid-size or TN few-tiles rule runs these on other tiles: that, then the variant by name
            assert kernel_name(a, b) == variant_name(dtype, other, layout), (M, N, K, batch)
            check(a, b, dtype, bias=(M % 2 == 0))
            with tune.config_env(variant):
                assert kernel_name(a, b) == variant_name(dtype, variant, layout), (M, N, K, batch)
                check(a, b, dtype, bias=(M % 2 == 0))
                if exact and batch is None:
                    exact_check(M, N, K, dtype, layout)
            continue
        assert kernel_name(a, b) == variant_name(dtype, variant, layout), (M, N, K, batch)
        check(a, b, dtype, bias=(M % 2 == 0), tol=TF32_TOL if dtype == torch.float32 else None)
        if exact and batch is None:
            exact_check(M, N, K, dtype, layout)


# ------------------------------------------------------------------ 128x64 tiles, K split over 2-CTA clusters

# (M, N, K, batch): 128x64 tiles filling <= half the SMs with >= 32
# k-blocks; ragged M, N and K (the split point inside a k-block range), a
# batch, one tile.
NARROW_SPLIT_SHAPES = [(128, 4096, 4096, None), (100, 1000, 2048, None), (200, 264, 2056, 3), (67, 64, 2104, None)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_narrow_splitk(monkeypatch, dtype, layout):
    force(monkeypatch, "128x64sk2")  # (100x1000 would run on 64x24 one-slab tiles)
    check_config_shapes(NARROW_SPLIT_SHAPES, dtype, layout, "128x64sk2", exact=False)
    exact_check(128, 1000, 2048, dtype, layout)
    exact_check(200, 264, 2120, dtype, layout, bias=False)


def test_narrow_splitk_tf32_and_bits(tf32, monkeypatch):
    force(monkeypatch, "128x64sk2")  # (128x4096 16-bit would run on 64x64 one-slab tiles)
    check_config_shapes([(128, 1000, 2048, None), (100, 2000, 1000, None)], torch.float32, "NT", "128x64sk2",
                        exact=False)
    exact_check(128, 1000, 2048, torch.float32, "NT")
    # the halves are added in a fixed order: same bits every run
    for dtype in HALF:
        assert_deterministic(128, 4096, 4096, dtype, "128x64sk2", runs=3)


# ------------------------------------------------------------------ 128x192 tiles (a badly filled last wave)

# (M, N, K, batch), each picked as 128x192 by default: the 5-stage ring wraps
# (K = 1032: 17 k-blocks), N not a multiple of 192 (a ragged last tile
# column; 4096 leaves one 64 wide), ragged M and K, a batch.
N192_SHAPES = [(1536, 1536, 1032, None), (640, 4096, 136, None), (768, 1000, 520, 3), (1500, 1530, 200, None)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_n192_tiles(monkeypatch, dtype, layout):
    # (NN and NT would run 1536^2 and 640x4096 swapped on 128x144 / 128x160 tiles)
    force(monkeypatch, "128x192")
    check_config_shapes(N192_SHAPES, dtype, layout, "128x192")
    # Forced on a full grid: several persistent tiles per CTA (176 tiles),
    # ring phases carried across tiles; and 128x256 instead.
    a, b = make_operands(2048, 2048, 136, dtype, "cuda", layout)
    assert kernel_name(a, b) == variant_name(dtype, "128x192", layout)
    check(a, b, dtype)
    exact_check(2048, 2048, 136, dtype, layout)
    force(monkeypatch, "128x256")
    a, b = make_operands(1536, 1536, 64, dtype, "cuda", layout)
    assert kernel_name(a, b) == variant_name(dtype, "128x256", layout)


def test_n192_tiles_tf32(tf32, monkeypatch):
    check_config_shapes(N192_SHAPES, torch.float32, "NT", "128x192", exact=False)
    exact_check(1536, 1536, 256, torch.float32, "NT")
    force(monkeypatch, "128x192")
    a, b = make_operands(2048, 2048, 136, torch.float32, "cuda", "NT")
    assert kernel_name(a, b) == variant_name(torch.float32, "128x192", "NT")
    check(a, b, torch.float32, tol=TF32_TOL)


# ------------------------------------------------------------------ 128x64 tiles (few tiles, no K split)

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_narrow_tiles(monkeypatch, dtype, layout):
    # 8-stage ring wraps (K = 1032: 17 k-blocks), ragged M/N/K, batches, bias,
    # several tiles per CTA when the 128x64 tiles outnumber the SMs.
    check_config_shapes([(256, 512, 1032, None), (300, 200, 136, None), (1024, 1024, 1000, None),
                         (136, 264, 520, 3), (640, 1000, 72, None)], dtype, layout, "128x64")
    force(monkeypatch, "128x128")
    a, b = make_operands(256, 512, 256, dtype, "cuda", layout)
    assert kernel_name(a, b) == variant_name(dtype, "128x128", layout)


def test_narrow_tiles_tf32(tf32):
    check_config_shapes([(256, 512, 960, None), (300, 200, 136, None), (1024, 1024, 512, None)], torch.float32,
                        "NT", "128x64", exact=False)
    exact_check(256, 512, 256, torch.float32, "NT")


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_narrow_tiles_forced(monkeypatch, dtype):
    # Forced: 128x64 tiles on a full grid (several persistent tiles per
    # CTA, ring phases carried across tiles).
    force(monkeypatch, "128x64")
    for layout in LAYOUTS:
        a, b = make_operands(2048, 2048, 136, dtype, "cuda", layout)
        assert kernel_name(a, b) == variant_name(dtype, "128x64", layout)
        check(a, b, dtype)
        exact_check(1536, 1536, 200, dtype, layout)


# ------------------------------------------------------------------ stream-K (forced by name)

def expected_streamk_tile(M, N, K, batch=1, dtype=torch.bfloat16):
    """The tile with stream-K on wherever the tile allows it."""
    return expected_tile(M, N, batch, dtype, K, streamk=True)


def force_streamk(monkeypatch, M, N, K, batch=1, dtype=torch.bfloat16):
    """Forces expected_streamk_tile and returns it."""
    tile = expected_streamk_tile(M, N, K, batch, dtype)
    force(monkeypatch, tile)
    return tile


# (M, N, K, batch): pieces per tile from ~8 (few tiles, deep K: each owner
# adds 7 partials) down to 2 (one wave and a part: every tile split at most
# once, whole tiles after); ragged M/N/K; batches.
STREAMK_SHAPES = [
    (256, 512, 4096, None),  # 16 tiles of 128x64, 64 k-blocks: ~8 pieces each
    (1536, 1536, 1536, None),  # 72 tiles of 128x256, 24 k-blocks: 2-3 pieces
    (1000, 1000, 1000, None),  # ragged everything, 128x128 tiles
    (2048, 2048, 520, None),  # 128 tiles of 128x256, 9 k-blocks (one ragged)
    (200, 300, 2000, 3),  # batched, ragged
    (129, 4096, 1032, None),  # a ragged second tile row
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_streamk_exact(monkeypatch, dtype, layout):
    # Small integers: every partial sum is exact, so the pieces must add up
    # to the reference bit for bit (a lost, doubled or misplaced piece shows).
    for M, N, K in [(256, 512, 4096), (1536, 1536, 1536), (129, 4096, 1032)]:
        assert force_streamk(monkeypatch, M, N, K, 1, dtype).endswith("streamk"), (M, N, K)
        a, b = make_operands(M, N, K, dtype, "cuda", layout)
        assert kernel_name(a, b) == variant_name(dtype, expected_streamk_tile(M, N, K, 1, dtype), layout)
        exact_check(M, N, K, dtype, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_streamk_random(monkeypatch, dtype, layout):
    for M, N, K, batch in STREAMK_SHAPES:
        a, b = make_operands(M, N, K, dtype, "cuda", layout, batch=batch)
        want = force_streamk(monkeypatch, M, N, K, batch or 1, dtype)
        assert kernel_name(a, b) == variant_name(dtype, want, layout), (M, N, K, batch)
        check(a, b, dtype, bias=(M % 2 == 0))


@pytest.mark.parametrize("layout", TF32_LAYOUTS)
def test_streamk_tf32(monkeypatch, tf32, layout):
    for M, N, K, batch in STREAMK_SHAPES:
        a, b = make_operands(M, N, K, torch.float32, "cuda", layout, batch=batch)
        want = expected_name(torch.float32, M, N, layout, batch or 1, K, streamk=True)
        force(monkeypatch, want.split("_")[2])
        assert kernel_name(a, b) == want, (M, N, K, batch)
        check(a, b, torch.float32, tol=TF32_TOL)


def test_streamk_whole_tiles_after(monkeypatch):
    # 3.5 waves of 128x256 tiles (464 on 132 SMs), no clusters: one full
    # wave and the partial one in stream-K pieces, two waves of whole tiles
    # after them.
    force(monkeypatch, "128x256streamk")
    M, N, K = 128 * 29 - 5, 4096, 1000
    assert expected_tile(M, N, 1, torch.bfloat16, K) == "128x256c2"  # the rules' choice
    a, b = make_operands(M, N, K, torch.bfloat16, "cuda", "NN")
    assert kernel_name(a, b) == variant_name(torch.bfloat16, "128x256streamk", "NN")
    check(a, b, torch.bfloat16)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_streamk_deterministic(monkeypatch, dtype):
    force_streamk(monkeypatch, 1536, 1536, 4096, 1, dtype)
    assert_deterministic(1536, 1536, 4096, dtype, "streamk_nt", runs=3)


def test_streamk_cuda_graph(monkeypatch):
    # The flags are reset by a memset node before every replay.
    force_streamk(monkeypatch, 1536, 1536, 1536)
    a, b = make_operands(1536, 1536, 1536, torch.bfloat16, "cuda", "NN")
    assert "streamk" in kernel_name(a, b)
    want = gemm(a, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gemm(a, b)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = gemm(a, b)
    for _ in range(3):
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_deep_k_defaults(monkeypatch, dtype):
    # Few tiles and a deep K (>= 128 k-blocks): split-K over 8-CTA clusters
    # for <= 11 tiles of 128x128, stream-K up to a quarter of the SMs.
    for M, N, K, kind in [(1536, 1536, 1536, "128x144sw_"), (256, 256, 8192, "sk8"), (384, 384, 8192, "sk8"),
                          (256, 256, 8128, "128x64sk2_"), (512, 512, 8192, "streamk"), (256, 1024, 8200, "streamk"),
                          (1000, 1000, 8192, "128x64_")]:
        a, b = make_operands(M, N, K, dtype, "cuda", "NT")
        assert kind in kernel_name(a, b), (M, N, K)
        assert kernel_name(a, b) == expected_name(dtype, M, N, "NT", 1, K), (M, N, K)
        check(a, b, dtype)
    force(monkeypatch, "128x64sk2")  # without stream-K: the 128x64 tiles split K in two
    a, b = make_operands(512, 512, 8192, dtype, "cuda", "NT")
    assert kernel_name(a, b) == variant_name(dtype, "128x64sk2", "NT")
    force(monkeypatch, "128x64")  # without a split
    a, b = make_operands(256, 256, 8192, dtype, "cuda", "NT")
    assert kernel_name(a, b) == variant_name(dtype, "128x64", "NT")


@pytest.mark.parametrize("layout", ["NT", "TT"])
def test_forced_swap_with_unaligned_c(monkeypatch, layout):
    # Forced by name, a swapped configuration takes a C whose rows are not
    # 16-byte aligned (N = 1001: 2002-byte rows), which the rules never swap:
    # C^T's tiles then leave through the register stores instead of TMA.  So
    # does a one-slab tile as called over 33 columns (66-byte rows).
    a, b = make_operands(1000, 1001, 264, torch.bfloat16, "cuda", layout)
    force(monkeypatch, "128x256sw")
    check(a, b, torch.bfloat16, name=f"sm90_bf16_128x256sw_{layout.lower()}")
    if layout == "NT":
        a, b = make_operands(1000, 33, 264, torch.bfloat16, "cuda", layout)
        force(monkeypatch, "64x40")
        check(a, b, torch.bfloat16, name="sm90_bf16_64x40_nt")
