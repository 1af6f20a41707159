"""The opt-in autotuning cache (TILED_AUTOTUNE_CACHE, csrc/cuda/autotune.h):
off by default; when on, each problem class is timed once, its choice is
persisted to the file and reused (also by a new process); results stay
correct and deterministic; nothing is timed during CUDA-graph capture.
"""
import os
import subprocess
import sys

import pytest
import torch

import torch_tiled_gemm  # noqa: F401
from conftest import assert_close_rel, rand, reference

HAS_CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

gemm = torch.ops.tiled.gemm
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def entries(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]


def operands(M, N, K, dtype=torch.bfloat16, nt=True, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    a = rand((M, K), dtype, "cuda", g)
    b = rand((N, K), dtype, "cuda", g).t() if nt else rand((K, N), dtype, "cuda", g)
    return a, b


def test_empty_setting_is_off(monkeypatch, tmp_path):
    """TILED_AUTOTUNE_CACHE unset or empty: no tuning, no file (the default)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILED_AUTOTUNE_CACHE", "")
    a, b = operands(16, 4096, 1024)
    assert_close_rel(gemm(a, b), reference(a, b), torch.bfloat16)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("shape", [(16, 4096, 1024), (100, 4096, 512), (1024, 1024, 1024)])
def test_tunes_once_persists_and_stays_correct(monkeypatch, tmp_path, shape):
    path = str(tmp_path / "tiled_autotune.tsv")
    monkeypatch.setenv("TILED_AUTOTUNE_CACHE", path)
    M, N, K = shape
    a, b = operands(M, N, K, seed=M)
    bias = rand((N,), torch.bfloat16, "cuda")
    first = gemm(a, b, bias)  # times the candidates, stores the fastest
    torch.cuda.synchronize()
    rows = entries(path)
    assert len(rows) == 1, rows
    key, settings, us = rows[0]
    assert "dtype=bfloat16" in key and "layout=nt" in key and float(us) > 0
    assert_close_rel(first, reference(a, b, bias), torch.bfloat16)
    # the same class again: no new timing, the same bits as the tuned call
    for _ in range(3):
        assert torch.equal(gemm(a, b, bias), first)
    assert len(entries(path)) == 1
    # another shape of the same class (same power-of-two buckets) reuses it
    a2, b2 = operands(M - 1 if M > 1 else M, N - 8, K - 8, seed=1)
    assert_close_rel(gemm(a2, b2), reference(a2, b2), torch.bfloat16)
    assert len(entries(path)) == 1
    # a new process reads the file back and runs the same kernel
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    code = (
        "import torch, torch_tiled_gemm\n"
        f"a = torch.randn({M}, {K}, device='cuda', dtype=torch.bfloat16)\n"
        f"b = torch.randn({N}, {K}, device='cuda', dtype=torch.bfloat16).t()\n"
        "print(torch.ops.tiled.gemm_kernel_name(a, b))\n"
    )
    env = dict(os.environ, TILED_AUTOTUNE_CACHE=path, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == name
    assert len(entries(path)) == 1


def test_strict_fp32_is_not_timed(monkeypatch, tmp_path):
    """One kernel per shape for strict fp32: nothing to tune, nothing stored."""
    path = str(tmp_path / "cache.tsv")
    monkeypatch.setenv("TILED_AUTOTUNE_CACHE", path)
    a, b = operands(256, 256, 256, dtype=torch.float32)
    assert_close_rel(gemm(a, b), reference(a, b), torch.float32)
    assert entries(path) == []


def test_no_timing_during_graph_capture(monkeypatch, tmp_path):
    path = str(tmp_path / "cache.tsv")
    monkeypatch.setenv("TILED_AUTOTUNE_CACHE", path)
    a, b = operands(16, 4096, 2048, seed=3)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = gemm(a, b)  # untuned class inside capture: the automatic choice
    g.replay()
    torch.cuda.synchronize()
    assert entries(path) == []
    assert_close_rel(out, reference(a, b), torch.bfloat16)
    gemm(a, b)  # eager: now it is tuned
    torch.cuda.synchronize()
    assert len(entries(path)) == 1


def test_unreadable_lines_are_ignored(monkeypatch, tmp_path):
    path = tmp_path / "cache.tsv"
    path.write_text("# comment\nnot a valid line\n\t\t\nkey-without-fields\n")
    monkeypatch.setenv("TILED_AUTOTUNE_CACHE", str(path))
    a, b = operands(32, 2048, 512, seed=5)
    assert_close_rel(gemm(a, b), reference(a, b), torch.bfloat16)
    assert len(entries(str(path))) == 1 + 2  # two unparseable rows kept as they were, one new entry
