"""Randomized differential test (benchmarks/fuzz.py's generator and criterion).

A fixed seed, so a failure reproduces: `python benchmarks/fuzz.py --device
cpu --seed 2024 --cases 1500 --max-flops 2e7 --max-elems 5e5 --grad-every 4`
runs the same cases.  Each case: random shape, form (2-D, batched, broadcast), dtype,
layout, padded / offset / strided views in NaN-filled storage, bias; ours
against the float64 reference element by element, against torch's error
(4x + a floor), bit-identical on a second run, and every 4th case its
gradients too.  The device run (>= 50,000 cases) is benchmarks/fuzz.py.
"""
import os
import sys

import pytest
import torch

from conftest import DEVICES

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import fuzz  # noqa: E402

SEED = 2024
# CPU: 1500 cases, ~7-20 s on 2 cores (2.4 s single-threaded for 500);
# CUDA: larger shapes.
PLAN = {"cpu": dict(cases=1500, max_dim=3000, max_flops=2e7, max_elems=5e5, grad_every=4),
        "cuda": dict(cases=2000, max_dim=3000, max_flops=2e9, max_elems=None, grad_every=4)}


@pytest.mark.parametrize("device", DEVICES)
def test_fuzz(device):
    plan = PLAN[device]
    n, failures = fuzz.fuzz(plan["cases"], SEED, device, plan["max_dim"], plan["grad_every"],
                            max_flops=plan["max_flops"], max_elems=plan["max_elems"])
    report = "\n".join(f"{f['what']}\n    " + "\n    ".join(f["reasons"]) for f in failures[:10])
    assert not failures, f"{len(failures)} of {n} cases failed:\n{report}"


def test_generator_reaches_every_kind():
    # The generator covers what it claims: every dtype and form, zero sizes,
    # padded, offset, column-major, strided and broadcast operands, bias.
    import random

    rng = random.Random(SEED)
    cases = [fuzz.draw_case(rng, "cuda", 3000, None, i) for i in range(3000)]
    assert {c["dtype"] for c in cases} == set(fuzz.DTYPES)
    assert {c["form"] for c in cases} == {"2d", "3d3d", "3d2d", "2d3d"}
    for key in ("M", "N", "K"):
        assert any(c[key] == 0 for c in cases) and any(c[key] > 2000 for c in cases), key
    assert any(c["batch"] == 0 and c["form"] != "2d" for c in cases)
    ops = [c[x] for c in cases for x in ("a", "b")]
    for key in ("col_major", "no_unit_stride", "broadcast"):
        assert any(o[key] for o in ops), key
    assert {o["offset"] for o in ops} == set(range(8))
    assert {o["pad"] for o in ops} == set(range(10))
    assert any(c["bias"] for c in cases) and any(not c["bias"] for c in cases)


def test_fuzz_catches_a_wrong_kernel(monkeypatch):
    # The criterion fails cases of a kernel with a subtle error: one product
    # dropped per output element (k = 0 skipped), and one whose output is
    # right but for a lost bias on the last column.
    real = torch.ops.tiled.gemm

    class Ops:
        @staticmethod
        def gemm(a, b, bias=None):
            return real(a[..., 1:], b[..., 1:, :], bias)

    import random

    rng = random.Random(1)
    cases = []
    while len(cases) < 12:
        c = fuzz.draw_case(rng, "cpu", 300, 1e6, len(cases))
        if min(c["M"], c["N"]) > 0 and c["K"] > 1 and c["form"] == "2d":
            cases.append(c)
    monkeypatch.setattr(fuzz, "_ours", Ops.gemm)
    assert all(fuzz.run_case(c, "cpu") for c in cases)

    def lost_bias(a, b, bias=None):
        out = real(a, b, bias)
        if bias is not None:
            out[..., -1] -= bias[-1]
        return out

    monkeypatch.setattr(fuzz, "_ours", lost_bias)
    with_bias = [c for c in cases if c["bias"]]
    assert with_bias and all(fuzz.run_case(c, "cpu") for c in with_bias)
