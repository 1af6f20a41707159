"""The CPU kernel's exactness and accuracy, for every instruction-set build
the machine has (baseline, AVX2, AVX-512, and AMX for bf16).

* Exact products: small-integer operands whose products and partial sums
  are all exact in the accumulator (fp32, or fp64), over odd shapes, every
  layout, strided views at storage offsets, bias and batches, K across the
  summation levels (256-deep slices, 4096-deep groups): the output must
  equal the float64 reference rounded once to the dtype, element by
  element.  Any wrong panel, tile, edge or level shows as an unequal element.
* Accuracy over K: fp32's error against float64 stays within 2x that of
  torch.matmul on the same inputs for K up to 2^20; bf16 and fp16 take the
  fp32 path's bits (blocked builds) or an fp32 accuracy of their own (AMX).
"""
import pytest
import torch

from conftest import LAYOUTS, as_layout

gemm = torch.ops.tiled.gemm

CPU_ISAS = ["baseline", "avx2", "avx512", "amx"]
BLOCKED_ISAS = CPU_ISAS[:3]
INT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def use_isa(monkeypatch, isa, dtype):
    """Forces the CPU kernel's instruction set `isa` by name (TILED_CONFIG) and checks, by the kernel
    name, that this build is the one that runs; skips where the CPU (or, for
    AMX, the OS or the dtype) does not give it."""
    if isa == "amx" and dtype != torch.bfloat16:
        pytest.skip("the AMX kernel is bf16 only (other dtypes run the AVX-512 build)")
    monkeypatch.setenv("TILED_CONFIG", f"cpu_blocked_{isa}")
    probe = torch.zeros(2, 2, dtype=dtype)
    name = torch.ops.tiled.gemm_kernel_name(probe, probe)
    if name != f"cpu_blocked_{isa}":
        pytest.skip(f"this CPU has no {isa} (runs {name})")


def small_ints(shape, bound, dtype, gen):
    return torch.randint(-bound, bound + 1, shape, generator=gen, dtype=torch.int64).to(dtype)


def placed(t, layout_char, offset, extra):
    """The values of t (2-D or 3-D) in a strided view: row-major ('N') or
    column-major ('T'), its leading dimension `extra` elements wider than
    needed, starting `offset` elements into its storage."""
    if layout_char == "T":
        return placed(t.transpose(-1, -2), "N", offset, extra).transpose(-1, -2)
    rows, cols = t.shape[-2], t.shape[-1]
    lead = t.shape[:-2]
    per = rows * (cols + extra)
    n = int(torch.tensor(lead).prod().item()) if lead else 1
    storage = torch.full((offset + n * per,), float("nan"), dtype=t.dtype)
    view = storage[offset:].view(*lead, rows, cols + extra)[..., :cols]
    view.copy_(t)
    assert view.storage_offset() == offset
    return view


# (M, N, K): odd and unaligned edges of every build's panels (4 x 16, 8 / 12
# x 32, 32 x 32 AMX with K in steps of 32), row blocks, 256-deep slices, and
# K across the 4096-deep groups (one group exactly, a partial second group,
# two whole groups and a partial third).
EXACT_SHAPES = [(1, 1, 1), (7, 13, 5), (13, 33, 17), (37, 45, 257), (73, 100, 300), (130, 70, 513),
                (20, 40, 4096), (9, 35, 4353), (33, 17, 8223)]


@pytest.mark.parametrize("isa", CPU_ISAS)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_cpu_small_integers_exact(monkeypatch, isa, dtype):
    # Operands in [-4, 4]: every product is at most 16 and every partial sum
    # at most 16 K < 2^24, exact in fp32; the bias in [-64, 64].  The exact
    # result, rounded once to the dtype (fp16 / bf16 outputs past 2048 / 256
    # round), is what the kernel must give.
    use_isa(monkeypatch, isa, dtype)
    gen = torch.Generator().manual_seed(1234)
    for i, (M, N, K) in enumerate(EXACT_SHAPES):
        assert 16 * K < 2 ** 24
        a0 = small_ints((M, K), 4, dtype, gen)
        b0 = small_ints((K, N), 4, dtype, gen)
        bias = small_ints((N,), 64, dtype, gen) if i % 2 == 0 else None
        exact = a0.double() @ b0.double() + (bias.double() if bias is not None else 0)
        want = exact.to(dtype)
        for j, layout in enumerate(LAYOUTS):
            # Offsets 0-3 elements and wider rows: in-place and packed reads,
            # aligned and not.
            a = placed(a0, layout[0], j, 3 * (j % 2))
            b = placed(b0, layout[1], (j + 1) % 4, 5 * (j // 2))
            out = gemm(a, b, bias)
            assert torch.equal(out, want), (M, N, K, layout, (out != want).sum().item())
            if layout == "NN":
                assert torch.equal(gemm(a, b, bias), out), "rerun differs"


@pytest.mark.parametrize("isa", CPU_ISAS)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_cpu_small_integers_exact_batched(monkeypatch, isa, dtype):
    # 3-D x 3-D, and 3-D x 2-D (a row-major A folds its batches into M, a
    # column-major one runs as a batch against a broadcast B), every layout.
    use_isa(monkeypatch, isa, dtype)
    gen = torch.Generator().manual_seed(99)
    for batch, M, N, K, b_batched in [(3, 17, 29, 300, True), (2, 5, 40, 4353, True), (4, 11, 23, 130, False),
                                      (3, 40, 9, 4100, False)]:
        a0 = small_ints((batch, M, K), 4, dtype, gen)
        b0 = small_ints((batch, K, N) if b_batched else (K, N), 4, dtype, gen)
        bias = small_ints((N,), 64, dtype, gen)
        want = (a0.double() @ b0.double() + bias.double()).to(dtype)
        for layout in LAYOUTS:
            a, b = as_layout(a0, layout[0]), as_layout(b0, layout[1])
            out = gemm(a, b, bias)
            assert torch.equal(out, want), (batch, M, N, K, b_batched, layout, (out != want).sum().item())


def test_exact_check_catches_damage():
    # The exact comparison fails on one element off by one, on a 16 x 16 tile
    # of the wrong sign and on a column without its bias.
    gen = torch.Generator().manual_seed(7)
    a, b = small_ints((40, 300), 4, torch.float32, gen), small_ints((300, 50), 4, torch.float32, gen)
    bias = small_ints((50,), 64, torch.float32, gen)
    out = gemm(a, b, bias)
    want = (a.double() @ b.double() + bias.double()).float()
    assert torch.equal(out, want)
    one = out.clone()
    one[17, 23] += 1
    tile = out.clone()
    tile[16:32, 16:32] *= -1
    column = out.clone()
    column[:, 41] -= bias[41]
    for damaged in (one, tile, column):
        assert not torch.equal(damaged, want)


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


# (M, N, K): M = N = 64 up to 65536; 16 x 16 at 2^20 (its operands are
# 64 MB each in fp32).
ACCURACY_SHAPES = [(64, 64, 4096), (64, 64, 65536), (16, 16, 1 << 20)]


@pytest.mark.parametrize("isa", BLOCKED_ISAS)
@pytest.mark.parametrize("shape", ACCURACY_SHAPES, ids=str)
def test_cpu_fp32_error_within_2x_torch(monkeypatch, isa, shape):
    # One running sum over all of K has an error growing like sqrt(K)
    # (measured before the summation levels: 3.2x torch's at K = 4096, 11.7x
    # at 65536, 25x at 2^20); the levels keep it at or below torch's.
    use_isa(monkeypatch, isa, torch.float32)
    M, N, K = shape
    gen = torch.Generator().manual_seed(K + M)
    a = torch.randn(M, K, generator=gen)
    b = torch.randn(K, N, generator=gen)
    ref = a.double() @ b.double()
    ours, theirs = rel_err(gemm(a, b), ref), rel_err(torch.matmul(a, b), ref)
    assert ours <= 2 * theirs, f"error {ours:.3e} against torch's {theirs:.3e}"


@pytest.mark.parametrize("isa", BLOCKED_ISAS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_cpu_16bit_sums_like_fp32(monkeypatch, isa, dtype):
    # The blocked builds convert 16-bit operands to fp32 and run the fp32
    # kernel: the output is the fp32 kernel's on the same values (+ bias),
    # rounded once, bit for bit, so the fp32 accuracy test holds for them.
    use_isa(monkeypatch, isa, dtype)
    gen = torch.Generator().manual_seed(5)
    for M, N, K, layout in [(64, 64, 65536, "NN"), (13, 70, 8223, "TN"), (40, 33, 4097, "NT")]:
        a0 = torch.randn(M, K, generator=gen).to(dtype)
        b0 = (torch.randn(K, N, generator=gen) / 4).to(dtype)
        bias = torch.randn(N, generator=gen).to(dtype)
        a, b = as_layout(a0, layout[0]), as_layout(b0, layout[1])
        want = gemm(a.float(), b.float(), bias.float()).to(dtype)
        assert torch.equal(gemm(a, b, bias), want), (M, N, K, layout)


def cancelling(M, N, K, gen):
    """bf16 operands whose exact product is 0: the second half of K holds
    the first half's products negated, in another order.  The output is then
    the accumulation's rounding error alone (bf16 keeps it to 8 bits)."""
    h = K // 2
    a = torch.randn(M, h, generator=gen).bfloat16()
    b = torch.randn(h, N, generator=gen).bfloat16()
    perm = torch.randperm(h, generator=gen)
    return torch.cat([a, a[:, perm]], 1), torch.cat([b, -b[perm]], 0)


@pytest.mark.parametrize("shape", [(64, 64, 65536), (64, 64, 1 << 18), (16, 16, 1 << 20)], ids=str)
def test_cpu_amx_sums_as_accurate_as_fp32(monkeypatch, shape):
    # The tile instructions accumulate in fp32; with one running sum over K
    # their error here was 2.7x, 3.2x and 3.3x that of torch's fp32 matmul
    # on the same values (now 1.0x, 0.65x, 0.41x).  The absolute error of an
    # exactly-zero product must stay within 2x torch's fp32 (on the bf16
    # values, exact in fp32).
    use_isa(monkeypatch, "amx", torch.bfloat16)
    M, N, K = shape
    a, b = cancelling(M, N, K, torch.Generator().manual_seed(K))
    ref = a.double() @ b.double()
    ours = (gemm(a, b).double() - ref).norm().item()
    theirs = (torch.matmul(a.float(), b.float()).double() - ref).norm().item()
    assert 0 < theirs and ours <= 2 * theirs, f"error {ours:.3e} against torch fp32's {theirs:.3e}"


@pytest.mark.parametrize("isa", CPU_ISAS)
def test_cpu_groups_do_not_change_with_threads(monkeypatch, isa):
    # K past one 4096-deep group: the groups' sums go through a second
    # per-task block.  The bits must not depend on the thread count (other
    # task sizes) and must repeat.
    dtype = torch.bfloat16 if isa == "amx" else torch.float32
    use_isa(monkeypatch, isa, dtype)
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(150, 9000, generator=gen).to(dtype)
    b = as_layout(torch.randn(9000, 200, generator=gen).to(dtype), "T")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = gemm(a, b)
        torch.set_num_threads(max(16, threads))
        many = gemm(a, b)
        again = gemm(a, b)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many) and torch.equal(many, again)
