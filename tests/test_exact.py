"""Exact small-integer results from every GPU kernel family and dtype.

Operands and bias are integers in [-2, 2]: every product and every partial
sum is exact in fp32 (and the operands exact in bf16, fp16 and tf32), so a
correct kernel's output is the float64 reference rounded once to the output
type, bit for bit, whatever the order of its sums, its split of K or its
tiles.  Any lost, doubled or misplaced k-slice, tile, partial or bias shows
as a mismatch.  Each case first asserts (ttg.kernel_name) that the family it
is about runs: the sm_90a tensor-core kernels (every tile, clusters,
ping-pong, split-K, stream-K, the swapped, swap-width and one-slab tiles,
128x192, tf32 with A from registers or shared memory), staging copies, the
skinny kernel (block heights, split-K, clusters, swapped), simt_fast
(small, mid and large configs, split-K, stream-K, staged B), simt_general
(every dtype: directly where dispatch picks it, and in a child process with
every other family disabled, TILED_DISABLE_KERNELS being read once per
process), and every ladder step.  GPU only; the CPU kernels' own exact tests
are elsewhere.
"""
import os
import re
import subprocess
import sys

import pytest
import torch

import torch_tiled_gemm as ttg
from conftest import HAS_CUDA, needs_cuda, reference, run_poisoned, tf32_mode

pytestmark = needs_cuda

IS_SM90 = HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)
HAS_SM80 = HAS_CUDA and torch.cuda.get_device_capability() >= (8, 0)
needs_sm90 = pytest.mark.skipif(not IS_SM90, reason="needs a compute-capability 9.0 (Hopper) GPU")
needs_sm80 = pytest.mark.skipif(not HAS_SM80, reason="needs a compute-capability >= 8.0 GPU")

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32, "fp32": torch.float32,
      "fp64": torch.float64}
LAYOUTS = ["NN", "NT", "TN", "TT"]
# Every per-call switch a case may set; each case starts from none of them.
SWITCHES = ["TILED_CONFIG", "TILED_AUTOTUNE_CACHE"]


def cfg(name):
    """A case's settings: the configuration `name` forced (TILED_CONFIG)."""
    return {"TILED_CONFIG": name}


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


def ints(shape, dtype, gen):
    return torch.randint(-2, 3, shape, generator=gen, device="cuda").to(dtype)


def operand(shape, dtype, ch, gen, pad=False):
    """Integers of `shape` ([..., rows, cols]); 'T': a column-major view.
    pad: the leading dimension rounded up to 8 elements, the padding NaN (a
    read past the extent poisons the result)."""
    rows, cols = shape[-2:]
    lead = shape[:-2]
    inner, outer = (cols, rows) if ch == "N" else (rows, cols)
    ld = -(-inner // 8) * 8 if pad else inner
    store = torch.full(lead + (outer, ld), float("nan"), dtype=dtype, device="cuda")
    view = store[..., :inner]
    view.copy_(ints(lead + (outer, inner), dtype, gen))
    return view if ch == "N" else view.transpose(-1, -2)


def exact(a, b, bias, name_pattern, tf32=False):
    """ours == the float64 reference rounded to the output type, bit for bit,
    on a poisoned output; the kernel's name matches `name_pattern`."""
    with tf32_mode(tf32):
        name = ttg.kernel_name(a, b)
        assert re.search(name_pattern, name), f"kernel {name!r} does not match {name_pattern!r}"
        M, N = a.shape[-2], b.shape[-1]
        batch = a.shape[0] if a.dim() == 3 else b.shape[0] if b.dim() == 3 else 1
        out, _ = run_poisoned(lambda: torch.ops.tiled.gemm(a, b, bias), batch * M * N, a.dtype, "cuda")
    want = reference(a, b, bias).to(a.dtype)
    bad = (out != want) & ~(torch.isnan(out) & torch.isnan(want))
    count = int(bad.sum())
    if count:
        first = bad.nonzero()[0].tolist()
        raise AssertionError(f"{name}: {count} of {out.numel()} elements differ; first at {first}: "
                             f"got {out[tuple(first)].item()} want {want[tuple(first)].item()}")
    return name


def run_cases(cases, dtype_name, layout, monkeypatch, seed, pad=False):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = DT[dtype_name]
    for (M, N, K, batch), env, pattern in cases:
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            lead = () if batch is None else (batch,)
            a = operand(lead + (M, K), dtype, layout[0], gen, pad)
            b = operand(lead + (K, N), dtype, layout[1], gen, pad)
            bias = ints((N,), dtype, gen) if (M + N) % 2 == 0 else None
            exact(a, b, bias, pattern.format(t={"bf16": "bf16", "f16": "f16", "tf32": "tf32"}.get(dtype_name, ""),
                                             l=layout.lower()), tf32=dtype_name == "tf32")


# ------------------------------------------------------------------ sm_90a tensor cores

# ((M, N, K, batch), settings, kernel-name pattern: {t} dtype tag, {l} layout).
# Each 16-bit case forces its configuration by name (so neither the skinny
# kernel nor the dispatch table takes it); the names were checked on the
# host drivers (tests/host/) for every layout.
SM90_16BIT = [
    ((256, 512, 256, None), cfg("128x64"), r"^sm90_{t}_128x64_{l}$"),
    ((1024, 1280, 256, None), cfg("128x128"), r"^sm90_{t}_128x128_{l}$"),
    ((2048, 2048, 256, None), cfg("128x256"), r"^sm90_{t}_128x256_{l}$"),
    ((2048, 2048, 256, None), cfg("128x256c2"), r"^sm90_{t}_128x256c2_{l}$"),
    ((1000, 1000, 1000, None), cfg("128x128pp"), r"^sm90_{t}_128x128pp_{l}$"),
    ((2048, 4096, 448, None), cfg("128x128ppc2"), r"^sm90_{t}_128x128ppc2_{l}$"),
    ((128, 512, 1024, None), cfg("128x128sk4"), r"^sm90_{t}_128x128sk4_{l}$"),
    ((128, 256, 8192, None), cfg("128x128sk8"), r"^sm90_{t}_128x128sk8_{l}$"),
    ((128, 1000, 2048, None), cfg("128x64sk2"), r"^sm90_{t}_128x64sk2_{l}$"),
    ((256, 512, 4096, None), cfg("128x64streamk"), r"^sm90_{t}_128x64streamk_{l}$"),
    ((1536, 1536, 1536, None), cfg("128x256streamk"), r"^sm90_{t}_128x256streamk_{l}$"),
    ((1536, 1536, 200, None), cfg("128x192"), r"^sm90_{t}_128x192_{l}$"),
    ((4096, 4104, 72, None), cfg("128x256sw"), r"^sm90_{t}_128x256sw_{l}$"),
    ((200, 264, 520, 3), cfg("128x64"), r"^sm90_{t}_128x64_{l}$"),
]
# Row-major A only (the swapped tiles read A^T as their K-major B).
SM90_16BIT_ROW_A = [
    ((1536, 1536, 72, None), cfg("128x144sw"), r"^sm90_{t}_128x144sw_{l}$"),
    ((64, 4096, 1024, None), cfg("64x32sw"), r"^sm90_{t}_64x32sw_{l}$"),
    ((300, 1000, 136, None), cfg("128x200sw"), r"^sm90_{t}_128x200sw_{l}$"),
]
SM90_TF32 = [
    ((256, 512, 256, None), {}, r"^sm90_tf32_128x\d+"),
    ((1024, 1280, 256, None), {}, r"^sm90_tf32_128x\d+"),
    ((2048, 2048, 256, None), {}, r"^sm90_tf32_128x\d+"),
    ((2048, 2048, 256, None), cfg("128x256c2"), r"^sm90_tf32_128x256c2_"),
    # (split-K tiles have no register-A form: NN and TT run an NT copy of the
    # rules' split over 8-CTA clusters; a split forced by name is NT only)
    ((256, 256, 8192, None), {}, r"^(staged_\w+\+)?sm90_tf32_128x128sk8_nt$"),
    ((1000, 1000, 1000, None), cfg("128x64streamk"), r"^sm90_tf32_128x64streamk_"),
    ((1536, 1536, 1536, None), cfg("128x256streamk"), r"^sm90_tf32_128x256streamk_"),
    ((136, 264, 520, 3), {}, r"^sm90_tf32_"),
    ((1000, 1000, 1000, None), {}, r"^sm90_tf32_"),
]


@needs_sm90
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_sm90_16bit(monkeypatch, dtype, layout):
    cases = [c for c in SM90_16BIT if not (layout[0] == "T" and c[0][0] % 8)]
    if layout[0] == "N":
        cases += SM90_16BIT_ROW_A
    run_cases(cases, dtype, layout, monkeypatch, seed=11)


@needs_sm90
@pytest.mark.parametrize("layout", ["NT", "NN", "TT"])
def test_sm90_tf32(monkeypatch, layout):
    # NT reads both operands from shared memory; NN and TT read the M-major
    # operand into registers (NN runs as C^T = B^T A^T); split-K NN/TT run
    # an NT copy.
    cases = SM90_TF32 + ([((128, 1000, 2048, None), cfg("128x128sk2"), r"^sm90_tf32_128x128sk2_nt$")]
                         if layout == "NT" else [])
    run_cases(cases, "tf32", layout, monkeypatch, seed=12)


@needs_sm90
@pytest.mark.parametrize("dtype", ["bf16", "f16", "tf32"])
def test_staged_tensor_core(monkeypatch, dtype):
    # Operands the tensor-core kernel cannot read in place are copied first:
    # odd leading dimensions, an odd offset, tf32 with both operands MN-major.
    gen = torch.Generator(device="cuda").manual_seed(13)
    dt = DT[dtype]
    tf32 = dtype == "tf32"
    a, b = ints((257, 129), dt, gen), ints((129, 255), dt, gen)
    exact(a, b, ints((255,), dt, gen), r"^staged_\w+\+sm90_", tf32)
    base = ints((257 * 128 + 1,), dt, gen)
    exact(base[1:].view(257, 128), ints((128, 136), dt, gen), None, r"^staged_a\+sm90_", tf32)
    if tf32:
        exact(operand((300, 200), dt, "T", gen), operand((200, 264), dt, "N", gen), None, r"^staged_\w+\+sm90_tf32",
              tf32)


# ------------------------------------------------------------------ skinny (small M or N, 16-bit)

SKINNY = [
    ((1, 300, 200, None), cfg("16x128sk1"), r"^skinny_{t}_16x128sk1_{l}$"),
    ((17, 1000, 520, None), cfg("32x128sk2c"), r"^skinny_{t}_32x128sk2c_{l}$"),
    ((64, 264, 1000, None), cfg("64x128sk4"), r"^skinny_{t}_64x128sk4_{l}$"),
    ((16, 4096, 4096, None), cfg("16x128sk4c"), r"^skinny_{t}_16x128sk4c_{l}$"),
    ((33, 2000, 4096, None), cfg("64x128sk4"), r"^skinny_{t}_64x128sk4_{l}$"),
    ((33, 2000, 4096, None), cfg("64x128sk4c"), r"^skinny_{t}_64x128sk4c_{l}$"),
    ((100, 300, 520, None), cfg("32x128sk2c"), r"^skinny_{t}_32x128sk2c_{l}$"),
    ((300, 16, 1000, None), cfg("16x128sk4c"), r"^skinny_{t}_16x128sk4c_{l}_swap$"),
    ((5, 200, 300, 4), cfg("16x128sk1"), r"^skinny_{t}_16x128sk1_{l}$"),
]


@needs_sm80
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_skinny(monkeypatch, dtype, layout):
    # Each configuration forced by name: the one-slab tensor-core tiles
    # would take some of these on Hopper.
    run_cases(SKINNY, dtype, layout, monkeypatch, seed=14, pad=True)


# ------------------------------------------------------------------ simt_fast (strict fp32)

def _streamk_shape(sms):
    rows = 12
    cols = -(-(sms + 5) // rows)
    if (rows * cols) % sms == 0:
        cols += 1
    return (rows * 128 - 36, cols * 256 - 77, 1000, None)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_simt_fast(monkeypatch, layout):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    plain = r"^(staged_\w+\+)?simt_fast$"  # small, mid and large configs (staged B on the large one)
    cases = [
        ((16, 300, 200, None), {}, plain),  # small config (M <= 32)
        ((100, 300, 256, None), {}, plain),  # mid config
        ((1000, 999, 37, 3), {}, plain),  # batched
        ((128, 4096, 4100, None), {}, r"^simt_fast_splitk$"),
        ((33, 2304, 8192, None), {}, r"^simt_fast_splitk$"),
        (_streamk_shape(sms), {}, r"^simt_fast_streamk$"),
        (_streamk_shape(sms), cfg("simt_fast"), plain),
        ((2048, 1100, 130, None), {}, plain),  # large config; column-major or unaligned B staged
    ]
    run_cases(cases, "fp32", layout, monkeypatch, seed=15, pad=True)


# ------------------------------------------------------------------ simt_general

@pytest.mark.parametrize("layout", LAYOUTS)
def test_simt_general_where_dispatch_picks_it(monkeypatch, layout):
    # float64 always; 16-bit problems too small to stage and refused by the
    # tensor cores (unaligned), with the small-M/N kernel switched off.
    run_cases([((129, 131, 65, None), {}, r"^simt_general$"), ((300, 257, 1000, 2), {}, r"^simt_general$")],
              "fp64", layout, monkeypatch, seed=16)
    if IS_SM90:
        for dtype in ("bf16", "f16"):
            run_cases([((7, 255, 129, None), cfg("simt_general"), r"^simt_general$")], dtype, "NN", monkeypatch,
                      seed=17)


CHILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import torch_tiled_gemm as ttg
from test_exact import exact, operand, ints
gen = torch.Generator(device="cuda").manual_seed(18)
for dtype, tf32 in ((torch.float32, False), (torch.float32, True), (torch.float64, False),
                    (torch.float16, False), (torch.bfloat16, False)):
    for lay in ("NN", "NT", "TN", "TT"):
        for M, N, K, batch in ((1, 1, 1, None), (129, 257, 300, None), (300, 64, 1000, 3), (2048, 2048, 64, None)):
            lead = () if batch is None else (batch,)
            a = operand(lead + (M, K), dtype, lay[0], gen)
            b = operand(lead + (K, N), dtype, lay[1], gen)
            exact(a, b, ints((N,), dtype, gen) if M % 2 else None, r"^simt_general$", tf32)
print("ok")
"""


def test_simt_general_every_dtype():
    # Every other family disabled (read once per process: a child process).
    env = dict(os.environ, TILED_DISABLE_KERNELS="hopper,sm80,skinny,simt_fast,staging")
    tests = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", CHILD, tests], env=env, capture_output=True, text=True, timeout=600,
                       cwd=tests)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# ------------------------------------------------------------------ the ladder

BASIC_STEPS = [1, 2, 20, 3, 4]  # every dtype
F32_STEPS = [5, 6, 7, 8, 9, 96, 97, 101, 109]  # 96-109: simt_fast's configs alone


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "bf16", "f16"])
def test_ladder_basic_steps(dtype):
    gen = torch.Generator(device="cuda").manual_seed(19)
    dt = DT[dtype]
    for step in BASIC_STEPS:
        for layout in LAYOUTS:
            for M, N, K in [(1, 1, 1), (127, 129, 65), (257, 129, 255)]:
                a, b = operand((M, K), dt, layout[0], gen), operand((K, N), dt, layout[1], gen)
                _ladder_exact(a, b, step)


@pytest.mark.parametrize("step", F32_STEPS)
def test_ladder_fp32_steps(step):
    gen = torch.Generator(device="cuda").manual_seed(20 + step)
    shapes = [(1, 1, 1), (127, 129, 65), (256, 128, 64), (1000, 999, 37), (2048, 1024, 1032)]
    for layout in LAYOUTS:
        for M, N, K in shapes:
            a, b = operand((M, K), torch.float32, layout[0], gen), operand((K, N), torch.float32, layout[1], gen)
            _ladder_exact(a, b, step)


def _ladder_exact(a, b, step):
    out = torch.ops.tiled.gemm_ladder(a, b, step)
    want = reference(a, b).to(a.dtype)
    count = int((out != want).sum())
    assert count == 0, f"ladder step {step} {tuple(a.shape)}x{tuple(b.shape)} strides {a.stride()} {b.stride()}: " \
                       f"{count} elements differ"
