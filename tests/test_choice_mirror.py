"""The sm_90a family's tile/schedule choice (csrc/cuda/hopper/hopper.cu,
choose(), and the swap by waves) against test_hopper.py's Python mirror of it, on 7500 shapes in
6 kinds (bf16 NT, TN and NN, tf32 NT, NN and TT).

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

pytestmark = pytest.mark.sources  # (CI runs them once, not again against the installed wheel)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_host_driver(tmp_path_factory, "sm90_choice",
                             ["tests/host/sm90_choice.cpp", "csrc/cuda/hopper/hopper.cu"])


def test_choice_matches_python_mirror(driver, monkeypatch):
    streamk = False
    monkeypatch.setattr(test_hopper, "num_sms", lambda: 132)
    vals = [1, 16, 48, 65, 100, 128, 129, 256, 300, 512, 640, 768, 777, 1000, 1024, 1536, 2048, 2056, 3000, 4096, 4104, 5000, 8192, 11008,
            14336]
    cases = [(M, N, K, batch, dt) for M in vals for N in vals for K in (64, 1000, 2048, 4096, 8192, 16384)
             for batch in (1, 3) for dt in (0, 1, 2, 3, 4, 5)]
    text = "\n".join(" ".join(map(str, c)) for c in cases)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILED_")}
    got = subprocess.run([driver], input=text, capture_output=True, text=True, check=True, timeout=120,
                         env=env).stdout.split()
    assert len(got) == len(cases)
    bad = []
    for (M, N, K, batch, dt), name in zip(cases, got):
        dtype = torch.bfloat16 if dt in (0, 4, 5) else torch.float32
        layout = ["NT", "NT", "NN", "TT", "TN", "NN"][dt]
        want = test_hopper.expected_name(dtype, M, N, layout, batch, K)
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


# ------------------------------------------------------------ TILED_CONFIG

KINDS = {0: ("bf16", "nt"), 1: ("tf32", "nt"), 2: ("tf32", "nn"), 3: ("tf32", "tt"), 4: ("bf16", "tn"),
         5: ("bf16", "nn")}


def run_forced(driver, cases, names):
    text = "\n".join(" ".join(map(str, c)) + " " + n for c, n in zip(cases, names))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILED_")}
    return subprocess.run([driver, "--forced"], input=text, capture_output=True, text=True, check=True,
                          timeout=120, env=env).stdout.split()


def test_forced_config_round_trip(driver):
    """Every configuration the rules pick, forced by its own name, is picked
    again: names and configurations map one to one."""
    vals = [1, 48, 100, 129, 640, 777, 1024, 1536, 2056, 4096, 8192, 14336]
    cases = [(M, N, K, batch, dt) for M in vals for N in vals for K in (64, 2048, 16384)
             for batch in (1, 3) for dt in KINDS]
    rules = run_forced(driver, cases, ["-"] * len(cases))
    assert len(rules) == len(cases)
    kept = [(c, n) for c, n in zip(cases, rules) if n != "none"]
    assert len({n.split("_")[2] for _, n in kept}) >= 15  # many variants among them
    again = run_forced(driver, [c for c, _ in kept], [n for _, n in kept])
    bad = [(c, n, g) for (c, n), g in zip(kept, again) if g != n]
    assert not bad, f"{len(bad)} names not picked again, e.g. {bad[:5]}"


FORCED = ["128x256", "128x128", "128x256c2", "128x128pp", "128x128ppc2", "128x128sk2", "128x128sk4", "128x64",
          "128x256streamk", "128x128streamk", "128x192", "128x64sk2", "128x200sw", "128x144sw", "64x32sw", "64x64",
          "128x256sw"]


def test_forced_config_is_obeyed_or_declined(driver):
    """A forced variant is run wherever its kernel can take the problem (the
    name reported is then that variant's) and declined elsewhere (the
    rules' choice), never something else; each variant applies somewhere;
    a full name of another dtype or layout is declined."""
    vals = [48, 129, 777, 2048, 4096]
    cases = [(M, N, K, 1, dt) for M in vals for N in vals for K in (64, 4096) for dt in KINDS]
    rules = run_forced(driver, cases, ["-"] * len(cases))
    for variant in FORCED:
        got = run_forced(driver, cases, [variant] * len(cases))
        obeyed = 0
        for c, r, g in zip(cases, rules, got):
            dtype, lay = KINDS[c[4]]
            want = f"sm90_{dtype}_{variant}_{lay}"
            assert g in (want, r), (variant, c, r, g)
            obeyed += g == want and g != r
        assert obeyed > 0 or variant in rules_only(rules, variant), variant
    # a full name applies to its own dtype and layout only
    got = run_forced(driver, cases, ["sm90_bf16_128x128pp_nt"] * len(cases))
    for c, r, g in zip(cases, rules, got):
        assert g == ("sm90_bf16_128x128pp_nt" if KINDS[c[4]] == ("bf16", "nt") and r != "none" else r), (c, r, g)


def rules_only(rules, variant):
    """The variants the rules already pick wherever they apply in these cases."""
    return {variant} if any(f"_{variant}_" in r for r in rules) else set()
