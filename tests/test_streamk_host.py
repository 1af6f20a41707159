"""Stream-K's division of work (csrc/cuda/stream_k.h: the sm_90a kernels' and
the strict-fp32 SIMT kernel's) checked on the host: tests/host/sm90_streamk.cpp
walks every CTA's run the way the kernels do and checks coverage, which
pieces park a partial and which CTAs each owner waits for, over a range of
tile counts, grids and K depths.  Built with nvcc (host code only), so it runs
in CI without a GPU; skips where nvcc is missing."""
import subprocess

import pytest

from conftest import build_host_driver

pytestmark = pytest.mark.sources  # (CI runs them once, not again against the installed wheel)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_host_driver(tmp_path_factory, "sm90_streamk", ["tests/host/sm90_streamk.cpp"])


def test_streamk_pieces(driver):
    # Grids of the H100 (132 SMs), the H200 / PCIe parts and small ones;
    # tile counts below, at and between multiples of the grid; K from one
    # k-block (each CTA then holds pieces of many tiles) to deep.
    cases = [(t, g, kb) for g in (1, 2, 3, 7, 114, 132) for t in list(range(1, 40)) + [131, 132, 133, 200, 263, 264,
                                                                                          265, 464, 512]
             for kb in (1, 2, 3, 5, 9, 24, 64, 257)]
    got = subprocess.run([driver], input="\n".join(f"{t} {g} {kb}" for t, g, kb in cases), capture_output=True,
                         text=True, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    n = int(got.stdout.split()[1])
    assert n > 1000, got.stdout  # most cases deal stream-K pieces
