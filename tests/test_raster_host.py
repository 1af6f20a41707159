"""The sm90 kernel's tile order (csrc/cuda/raster.h) checked on the host:
tests/host/raster.cpp compares its multiply-high divisions with plain
division over a wide range of divisors and numerators, and every unit's
(batch, tile row, tile column) with the grouped raster written with plain
divisions, over many shapes.  Built with nvcc (host code only), so it runs in
CI without a GPU; skips where nvcc is missing."""
import subprocess

import pytest

from conftest import build_host_driver

pytestmark = pytest.mark.sources  # (CI runs them once, not again against the installed wheel)


def test_raster_matches_plain_division(tmp_path_factory):
    driver = build_host_driver(tmp_path_factory, "raster", ["tests/host/raster.cpp"])
    got = subprocess.run([driver], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.startswith("ok "), got.stdout
    assert int(got.stdout.split()[1]) > 10_000_000, got.stdout
