"""The benchmark's output (torch_tiled_gemm/bench.py) on the CPU: what it
says it wrote exists, no plot is claimed without matplotlib, per-call rows
are in µs, runs never replace each other, the plot's labels and legend."""
import builtins
import json
import os
import re

import pytest
import torch

from conftest import no_matplotlib

from torch_tiled_gemm import bench

SMALL_PLAN = [("gemm", (64, 48, 80), "fp32", "NN"), ("gemm", (32, 40, 24), "bf16", "NT"),
              ("gemm_call", (64, 64, 64), "fp32", "NN")]


@pytest.fixture
def fast(monkeypatch):
    """A small plan with stand-in timings (the checks still run)."""
    monkeypatch.setattr(bench, "plan", lambda device, quick: list(SMALL_PLAN))
    ratios = iter([0.5, 2.0, 1.25, 0.8, 1.1, 3.0] * 10)
    monkeypatch.setattr(bench, "paired", lambda ours, theirs, device, rounds=6: (1.0, 1.0, next(ratios)))
    monkeypatch.setattr(bench, "host_us_per_call", lambda fn, device, calls=2000: (fn(), 12.5)[1])


def _claimed(out):
    line = [ln for ln in out.splitlines() if ln.startswith("wrote ")]
    assert len(line) == 1, out
    return line[0][len("wrote "):].split(", ")


def test_claimed_files_exist_and_no_png_claim_without_matplotlib(fast, monkeypatch, tmp_path, capsys):
    no_matplotlib(monkeypatch)
    assert bench.main(["--device", "cpu", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    files = _claimed(out)
    assert files and all(os.path.isfile(f) for f in files)
    assert not any(f.endswith(".png") for f in files) and ".png" not in out
    assert not list(tmp_path.glob("*.png"))
    assert "matplotlib not installed" in err
    assert {os.path.splitext(f)[1] for f in files} == {".json", ".md"}


def test_overhead_rows_in_microseconds(fast, monkeypatch, tmp_path, capsys):
    no_matplotlib(monkeypatch)
    bench.main(["--device", "cpu", "--out", str(tmp_path)])
    md = next(f for f in _claimed(capsys.readouterr()[0]) if f.endswith(".md"))
    rows = [ln for ln in open(md).read().splitlines() if ln.startswith("| gemm_call")]
    assert len(rows) == 1
    assert "µs/call" in rows[0] and "TFLOP/s" not in rows[0]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert re.fullmatch(r"[0-9.]+e[-+][0-9]+", cells[7]) and float(cells[7]) > 0  # its error, measured
    gemm_rows = [ln for ln in open(md).read().splitlines() if ln.startswith("| gemm |")]
    assert gemm_rows and all("TFLOP/s" in r for r in gemm_rows)
    data = json.load(open(md[:-3] + ".json"))
    call = next(c for c in data["cases"] if c["op"] == "gemm_call")
    assert call["ours_us_per_call"] == 12.5 and "ours_tflops" not in call
    assert "last-level cache" in data["protocol"] and "do_bench" not in data["protocol"]


def test_protocol_header_per_device():
    assert "do_bench(warmup=5, rep=25)" in bench.protocol("cuda") and "6 rounds" in bench.protocol("cuda")
    assert "last-level cache" in bench.protocol("cpu") and "do_bench" not in bench.protocol("cpu")


def test_two_runs_do_not_overwrite(fast, monkeypatch, tmp_path, capsys):
    no_matplotlib(monkeypatch)
    bench.main(["--device", "cpu", "--out", str(tmp_path)])
    first = _claimed(capsys.readouterr()[0])
    before = {f: open(f).read() for f in first}
    bench.main(["--device", "cpu", "--out", str(tmp_path)])
    second = _claimed(capsys.readouterr()[0])
    assert not set(first) & set(second)
    assert all(open(f).read() == text for f, text in before.items())
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_default_out_is_outside_the_checkout(monkeypatch, tmp_path):
    root = bench._checkout_root()
    monkeypatch.chdir(root)
    inside = bench.default_out()
    assert not os.path.realpath(inside).startswith(os.path.realpath(root) + os.sep)
    monkeypatch.chdir(tmp_path)
    assert bench.default_out() == os.path.join(os.path.realpath(tmp_path), "tiled_gemm_results")


def test_progress_without_tqdm(monkeypatch, capsys):
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "tqdm" else real(name, *a, **k))
    p = bench.Progress(2)
    p.step("gemm fp32 1x2x3 NN")
    p.step("gemm bf16 4x5x6 NT")
    err = capsys.readouterr()[1]
    assert "[1/2]" in err and "[2/2]" in err and "gemm bf16 4x5x6 NT" in err


def test_plot_contents(fast, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert bench.main(["--device", "cpu", "--out", str(tmp_path)]) == 0
    files = _claimed(capsys.readouterr()[0])
    png = [f for f in files if f.endswith(".png")]
    assert len(png) == 1 and os.path.getsize(png[0]) > 0
    cases = json.load(open(png[0][:-4] + ".json"))["cases"]
    cases.append(dict(cases[0]))  # a repeated case still gets its own label
    fig = bench.figure(cases, "t")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(set(labels)) == len(cases)
    assert all("…" not in lab for lab in labels)
    assert "gemm fp32 64×48×80 NN" in labels and "gemm_call fp32 64×64×64 NN" in labels
    assert ax.get_xlabel() == "torch time / ours (higher = ours faster)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp32", "bf16"]
    assert any(abs(ln.get_xdata()[0] - 1.0) < 1e-12 for ln in ax.get_lines())  # the line at 1.0
    assert [t.get_text() for t in ax.get_xticklabels()]
    # grouped by dtype: every fp32 label before every bf16 label (top to bottom)
    dtypes = [lab.split()[1] for lab in labels]
    assert dtypes == sorted(dtypes, key=["fp32", "bf16"].index)
    worst = min(c["ratio"] for c in cases)
    assert any(t.get_text() == f"worst #1: {worst:.2f}×" for t in ax.texts)
    import matplotlib.pyplot as plt

    plt.close(fig)
