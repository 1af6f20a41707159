"""The sm_90a family's tile/schedule choice (csrc/cuda/hopper/hopper.cu,
choose(), and the swap by waves) against test_hopper.py's Python mirror of it, on 7500 shapes in
6 kinds (bf16 NT, TN and NN, tf32 NT, NN and TT), with stream-K as by default
and switched on.

Host-only: builds hopper.cu with a stub-launcher driver (tests/host/
sm90_choice.cpp) with nvcc, so it runs in CI without a GPU; skips where nvcc
is missing.  test_hopper.py asserts kernel names through the mirror, so a
mirror that drifts from choose() would make those GPU tests wrong."""
import os
import subprocess

import pytest
import torch

import test_hopper
from conftest import build_host_driver


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_host_driver(tmp_path_factory, "sm90_choice",
                             ["tests/host/sm90_choice.cpp", "csrc/cuda/hopper/hopper.cu"])


@pytest.mark.parametrize("streamk", [False, True], ids=["default", "streamk"])
def test_choice_matches_python_mirror(driver, monkeypatch, streamk):
    for k in list(os.environ):
        if k.startswith("TILED_SM90_"):
            monkeypatch.delenv(k)
    monkeypatch.setattr(test_hopper, "num_sms", lambda: 132)
    vals = [1, 16, 48, 65, 100, 128, 129, 256, 300, 512, 640, 768, 777, 1000, 1024, 1536, 2048, 2056, 3000, 4096, 4104, 5000, 8192, 11008,
            14336]
    cases = [(M, N, K, batch, dt) for M in vals for N in vals for K in (64, 1000, 2048, 4096, 8192, 16384)
             for batch in (1, 3) for dt in (0, 1, 2, 3, 4, 5)]
    text = "\n".join(" ".join(map(str, c)) for c in cases)
    env = dict(os.environ, TILED_SM90_STREAMK="1") if streamk else None
    got = subprocess.run([driver], input=text, capture_output=True, text=True, check=True, timeout=120,
                         env=env).stdout.split()
    assert len(got) == len(cases)
    bad = []
    for (M, N, K, batch, dt), name in zip(cases, got):
        dtype = torch.bfloat16 if dt in (0, 4, 5) else torch.float32
        layout = ["NT", "NT", "NN", "TT", "TN", "NN"][dt]
        want = test_hopper.expected_name(dtype, M, N, layout, batch, K, True if streamk else None)
        if not want.endswith("_" + layout.lower()):
            want = "none"  # tf32 NN / TT that run on an NT copy (split-K has no register A): dispatch stages it
        if layout == "NN" and N % (8 if dtype == torch.bfloat16 else 4):
            want = "none"  # a row-major B's leading dimension (N) is not 16-byte aligned
        if layout == "TT" and M % 4:
            want = "none"  # a column-major A's leading dimension (M) is not 16-byte aligned
        if layout == "TN" and (M % 8 or N % 8):
            want = "none"  # bf16: both MN-major leading dimensions must be 16-byte aligned
        if name != want:
            bad.append(((M, N, K, batch, dt), name, want))
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:5]}"
    # stream-K reached some shapes (by default: few tiles, deep K), and by
    # default some 16-bit problems run swapped (e.g. 4096x4104), some of
    # them on one-slab tiles (e.g. 48x4096)
    assert sum(n.endswith("streamk_nt") for n in got) > (1000 if streamk else 20)
    if not streamk:
        assert sum("sw_" in n for n in got) > 50
        assert sum("_64x" in n for n in got) > 20
