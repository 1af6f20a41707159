"""The corpus of model GEMMs (torch_tiled_gemm/corpus.py): its structure, its
held-out split; the benchmark's --corpus / --model / --shapes runs
(torch_tiled_gemm/corpus_bench.py) on the CPU: per-case records, the files
they write and what those files claim."""
import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import no_matplotlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)

from torch_tiled_gemm import corpus as C  # noqa: E402
from torch_tiled_gemm import corpus_bench as R  # noqa: E402

ALL = C.corpus()


def _key(e):
    return (e["M"], e["N"], e["K"], e["batch"], e["layout"])


def test_size_and_models():
    assert 250 <= len(ALL) <= 450
    models = {m for e in ALL for m in e["models"]} - {"generic"}
    assert len(models) >= 15
    assert models <= {m.name for m in C.MODELS}
    assert len({m.family for m in C.MODELS}) >= 10
    # every model of the table produces at least one GEMM
    assert models == {m.name for m in C.MODELS}


def test_every_part_present():
    for part in C.PARTS:
        sel = [e for e in ALL if e["part"] == part]
        assert len(sel) >= 20, (part, len(sel))
        assert any(e["set"] == "tuned" for e in sel), part


def test_ids_unique_and_deduplicated():
    ids = [e["id"] for e in ALL]
    assert len(set(ids)) == len(ids)
    keys = [_key(e) for e in ALL]
    assert len(set(keys)) == len(keys)
    for e in ALL:
        assert e["id"] == C.gemm_id(*_key(e))
        assert e["model"] == e["models"][0]
        assert len(e["layers"]) >= len(e["models"])


def test_shapes_and_layouts():
    for e in ALL:
        for k in ("M", "N", "K"):
            assert isinstance(e[k], int) and e[k] > 0, e
        assert e["batch"] is None or (isinstance(e["batch"], int) and e["batch"] > 0), e
        assert e["layout"] in C.LAYOUTS and e["part"] in C.PARTS and e["set"] in ("tuned", "heldout"), e
        assert math.isclose(e["gflop"], 2 * e["M"] * e["N"] * e["K"] * (e["batch"] or 1) / 1e9)
        assert C.fp32_bytes(e) <= C.MAX_FP32_BYTES, e
        assert (e["batch"] is not None) == (e["part"] == "attn"), e
    expected = {"fwd": "NT", "dX": "NN", "dW": "TN"}
    for e in ALL:
        if e["part"] in expected:
            assert e["layout"] == expected[e["part"]], e
    assert {e["layout"] for e in ALL} == set(C.LAYOUTS)


def test_token_counts_in_range():
    tokens = [e["M"] for e in ALL if e["part"] in ("fwd", "dX")] + [e["K"] for e in ALL if e["part"] == "dW"]
    assert min(tokens) >= 256 and max(tokens) <= 16384
    assert min(tokens) == 256 and max(tokens) == 16384
    seqs = {e["M"] for e in ALL if e["part"] == "attn"}
    assert {77, 128, 197, 577, 1500, 4096} <= seqs and min(seqs) >= 64 and max(seqs) <= 4096
    assert {64, 128} <= {e["K"] for e in ALL if e["part"] == "attn" and e["layout"] == "NT"}
    lora_ranks = {min(e["M"], e["N"], e["K"]) for e in ALL if e["part"] == "lora"}
    assert {8, 16, 64, 128} <= lora_ranks


def test_generic_shapes():
    gen = [e for e in ALL if e["part"] == "generic"]
    mid = [e for e in gen if e["layer"] == "mid-size"]
    low = [e for e in gen if e["layer"] == "low-K"]
    assert len(mid) >= 10 and len(low) >= 8
    for e in mid:
        assert all(1000 <= e[k] <= 3000 and e[k] % 256 for k in ("M", "N", "K")), e
    for e in low:
        assert e["K"] <= 1024 and min(e["M"], e["N"]) >= 4096, e


def test_model_table_consistent():
    for m in C.MODELS:
        assert m.heads % m.kv == 0, m.name
        assert m.tokens and all(256 <= t <= 16384 for t in m.tokens), m.name
        if m.name != "Gemma-7B":  # 16 heads of 256 on a 3072-wide model
            assert m.heads * m.head_dim == m.hidden, m.name
        for ways, _ in m.tp:
            assert m.heads % ways == 0 and m.ffn % ways == 0, m.name
    assert set(C.HELDOUT_MODELS) <= {m.name for m in C.MODELS}


def test_heldout_fraction():
    frac = sum(e["set"] == "heldout" for e in ALL) / len(ALL)
    assert 0.15 <= frac <= 0.25, frac


def test_heldout_whole_models():
    assert len(C.HELDOUT_MODELS) >= 3
    for e in ALL:
        only_heldout = all(m in C.HELDOUT_MODELS for m in e["models"])
        if only_heldout:
            assert e["set"] == "heldout", e
        # anything held out is either a held-out model's alone or one of the hashed shapes
        if e["set"] == "heldout" and not only_heldout:
            assert C._bucket(e["id"]) < C.HELDOUT_PERCENT, e
    for name in C.HELDOUT_MODELS:
        own = [e for e in ALL if e["models"] == [name]]
        assert len(own) >= 3, name
        assert all(e["set"] == "heldout" for e in own)
    # no tuned GEMM comes from held-out models only; some held-out GEMMs come from tuned models too
    assert all(not all(m in C.HELDOUT_MODELS for m in e["models"]) for e in ALL if e["set"] == "tuned")
    assert any(e["set"] == "heldout" and not all(m in C.HELDOUT_MODELS for m in e["models"]) for e in ALL)


def test_sets_partition_and_filters():
    tuned, held = C.corpus("tuned"), C.corpus("heldout")
    assert sorted(e["id"] for e in tuned + held) == sorted(e["id"] for e in ALL)
    assert not {e["id"] for e in tuned} & {e["id"] for e in held}
    big = C.corpus(min_gflop=100.0)
    assert big and all(e["gflop"] >= 100.0 for e in big)
    assert C.filter_gflop(ALL, 100.0) == big
    assert {e["part"] for e in C.corpus(parts=("attn", "lora"))} == {"attn", "lora"}
    assert all("GPT-2" in e["models"] for e in C.corpus(models=("GPT-2",)))
    with pytest.raises(ValueError):
        C.corpus("train")
    # callers get copies
    C.corpus()[0]["models"].append("x")
    assert "x" not in C.corpus()[0]["models"]


def test_split_deterministic():
    """The same split in a fresh interpreter with another hash seed."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from torch_tiled_gemm import corpus; "
            "print(json.dumps([(e['id'], e['set'], e['part']) for e in corpus.corpus()]))")
    out = subprocess.run([sys.executable, "-c", code, ROOT], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert [tuple(x) for x in json.loads(out)] == [(e["id"], e["set"], e["part"]) for e in ALL]


def test_quick_pass_estimate():
    """A quick pass (3 rounds) of the whole corpus in bf16 fits 5 minutes of an H100 by the estimate."""
    assert R.estimate_s(ALL, "bf16", 3) < 300
    assert R.estimate_s(ALL, "bf16", 6) > R.estimate_s(ALL, "bf16", 3)


def _extension():
    try:
        import torch_tiled_gemm  # noqa: F401

        torch.ops.tiled.gemm_kernel_name  # noqa: B018
    except (ImportError, AttributeError, RuntimeError) as exc:
        pytest.skip(f"extension not importable: {exc}")


TINY = [
    dict(id="NT-64x48x40", model="tiny", models=["tiny"], layer="fwd", part="fwd", M=64, N=48, K=40, batch=None,
         layout="NT", gflop=2 * 64 * 48 * 40 / 1e9, set="tuned"),
    dict(id="NN-33x16x33-b3", model="tiny", models=["tiny"], layer="PV", part="attn", M=33, N=16, K=33, batch=3,
         layout="NN", gflop=2 * 3 * 33 * 16 * 33 / 1e9, set="heldout"),
]


@pytest.mark.parametrize("dname", ["fp32", "bf16"])
def test_run_case_cpu(dname):
    _extension()
    cases = [R.run_case(e, dname, "cpu", rounds=1) for e in TINY]
    for c, e in zip(cases, TINY):
        for k in ("op", "dtype", "M", "N", "K", "batch", "layout", "ratio", "ours_us", "torch_us", "set", "model",
                  "part", "kernel", "check"):
            assert k in c, k
        assert c["op"] == "gemm" and c["dtype"] == dname and c["check"] == "ok", c
        assert (c["M"], c["N"], c["K"], c["batch"], c["layout"]) == _key(e)
        assert c["ratio"] > 0 and c["ours_us"] > 0 and c["torch_us"] > 0
        assert isinstance(c["kernel"], str) and c["kernel"]
        assert c["rel_err"] <= R.TOL[dname]
    s = R.summarize(cases)
    assert s["cases"] == 2 and set(s["per_set"]) == {"tuned", "heldout"} and set(s["per_part"]) == {"fwd", "attn"}
    assert len(s["worst"]) == 2


def test_check_error_catches_a_wrong_tile():
    _extension()
    from torch_tiled_gemm.bench import operands

    a, b = operands(300, 200, 64, torch.float32, "NT", "cpu")
    out = torch.ops.tiled.gemm(a, b)
    err, check = R.check_error(out, a, b)
    assert err < 1e-5 and check.ok
    out[128:192, 64:128] += 1.0  # one 64 x 64 tile off
    err, check = R.check_error(out, a, b)
    assert err > 1e-3 and not check.ok
    # sampled rows and columns: a large output, a tile off in its middle
    a, b = operands(4096, 4096, 16, torch.float32, "NN", "cpu")
    out = torch.ops.tiled.gemm(a, b)
    err, check = R.check_error(out, a, b)
    assert err < 1e-5 and check.ok
    out[2048:2112, 1024:1088] = 0
    err, check = R.check_error(out, a, b)
    assert err > 1e-4 and not check.ok


def test_corpus_run_wrapper_cpu(tmp_path, capsys):
    """benchmarks/corpus_run.py still runs (as bench --corpus), --models included."""
    _extension()
    import corpus_run

    rc = corpus_run.main(["--device", "cpu", "--dtype", "fp32", "--parts", "lora", "--models", "GPT-2-medium",
                          "--limit", "2", "--rounds", "1", "--out", str(tmp_path)])
    assert rc == 0
    (path,) = tmp_path.glob("*-corpus-fp32.json")
    run = json.load(open(path))
    assert len(run["cases"]) == 2 and run["dtypes"] == ["fp32"] and run["rounds"] == 1 and run["kind"] == "corpus"
    assert all(c["part"] == "lora" and c["check"] == "ok" and "GPT-2-medium" in c["models"] for c in run["cases"])
    assert run["summary"]["fp32"]["cases"] == 2
    assert "Corpus" not in capsys.readouterr().err  # no traceback


# ---------------------------------------------------------------------------
# python -m torch_tiled_gemm.bench --corpus / --model / --shapes on the CPU

FIELDS = ("set", "model", "part", "op", "dtype", "M", "N", "K", "batch", "layout", "ratio", "kernel", "check")


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _run(argv, tmp_path, capsys):
    from torch_tiled_gemm import bench

    rc = bench.main(argv + ["--device", "cpu", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    (line,) = [ln for ln in out.splitlines() if ln.startswith("wrote ")]
    files = line[len("wrote "):].split(", ")
    assert all(os.path.isfile(f) for f in files), files
    return rc, files, out, err


def _md_rows(md, first_cell):
    return [ln for ln in md.splitlines() if ln.startswith(f"| {first_cell} |")]


def _check_claims(files, err, n_cases):
    """The files that exist are those claimed; the JSON's cases carry every
    field; the .md's header numbers are the JSON's; a plot only with matplotlib."""
    exts = {os.path.splitext(f)[1] for f in files}
    base = os.path.splitext(files[0])[0]
    folder = os.path.dirname(base)
    assert sorted(os.listdir(folder)) == sorted(os.path.basename(f) for f in files)
    if _has_matplotlib():
        assert exts == {".json", ".md", ".png"} and os.path.getsize(base + ".png") > 0
    else:
        assert exts == {".json", ".md"} and "matplotlib not installed: no plot" in err
    run = json.load(open(base + ".json"))
    assert len(run["cases"]) == n_cases and run["stopped"] is None
    for c in run["cases"]:
        for k in FIELDS:
            assert k in c, k
        assert c["op"] == "gemm" and c["check"] == "ok" and c["ratio"] > 0 and c["kernel"].startswith("cpu_")
    md = open(base + ".md").read()
    for d, s in run["summary"].items():
        sel = [c for c in run["cases"] if c["dtype"] == d]
        geo = math.exp(sum(math.log(c["ratio"]) for c in sel) / len(sel))
        below = sum(c["ratio"] < R.SLOW for c in sel)
        assert f"## {d}: {len(sel)} GEMMs, geomean {geo:.3f}, {below} below {R.SLOW}, 0 failed the check" in md
        assert s["cases"] == len(sel) and s["below"] == below
    return run, md


def test_shapes_cpu(tmp_path, capsys):
    _extension()
    rc, files, out, err = _run(["--shapes", "64x48x32,2x16x24x8:NT", "--dtype", "fp32", "--rounds", "1"],
                               tmp_path, capsys)
    assert rc == 0
    assert all("-shapes-fp32" in f for f in files)
    run, md = _check_claims(files, err, 2)
    a, b = run["cases"]
    assert (a["M"], a["N"], a["K"], a["batch"], a["layout"]) == (64, 48, 32, None, "NN")
    assert (b["M"], b["N"], b["K"], b["batch"], b["layout"]) == (16, 24, 8, 2, "NT")
    assert all(c["set"] == c["model"] == c["part"] == "user" and c["dtype"] == "fp32" for c in run["cases"])
    # every GEMM has its row, with its ratio as in the JSON
    for c, shape in ((a, "64×48×32 NN"), (b, "2×16×24×8 NT")):
        (row,) = [ln for ln in md.splitlines() if f"| {shape} |" in ln]
        assert row.startswith(f"| {c['ratio']:.3f} |") and "| ok |" in row
    set_row, model_row = _md_rows(md, "user")  # the per-set table's row, the per-model table's
    assert set_row.startswith("| user | 2 |") and "(2)" in model_row
    assert "torch time / ours" in md or "higher = ours faster" in md


def test_model_cpu(tmp_path, capsys):
    _extension()
    name = "CLIP-ViT-L/14-text"
    rc, files, out, err = _run(["--model", name, "--limit", "2", "--dtype", "fp32", "--rounds", "1"],
                               tmp_path, capsys)
    assert rc == 0
    run, md = _check_claims(files, err, 2)
    assert run["kind"] == "model" and run["selection"]["model"] == name
    assert all(c["model"] == name and name in c["models"] and c["set"] in ("tuned", "heldout") and
               c["part"] in C.PARTS for c in run["cases"])
    (row,) = _md_rows(md, name)  # the per-model row: the two GEMMs
    assert "(2)" in row
    for c in run["cases"]:
        assert re.search(rf"^\| {c['ratio']:.3f} \| .*\| {re.escape(c['part'])} \|", md, re.M), c["id"]


def test_no_plot_claimed_without_matplotlib(tmp_path, capsys, monkeypatch):
    _extension()
    no_matplotlib(monkeypatch)
    rc, files, out, err = _run(["--shapes", "32x32x32", "--dtype", "fp32", "--rounds", "1"], tmp_path, capsys)
    assert rc == 0 and not any(f.endswith(".png") for f in files) and ".png" not in out
    assert not list(tmp_path.glob("*.png")) and "matplotlib not installed: no plot" in err


def test_runs_never_overwrite_and_fail_exits_1(tmp_path, capsys, monkeypatch):
    _extension()
    no_matplotlib(monkeypatch)
    argv = ["--shapes", "16x16x16", "--dtype", "fp32", "--rounds", "1"]
    first = _run(argv, tmp_path, capsys)[1]
    before = {f: open(f).read() for f in first}
    real = R.check_error
    monkeypatch.setattr(R, "check_error", lambda out, a, b, tf32=False: (1.0, real(out + 1, a, b, tf32)[1]))
    rc, second, out, err = _run(argv, tmp_path, capsys)
    assert rc == 1 and not set(first) & set(second)
    assert all(open(f).read() == text for f, text in before.items())
    run = json.load(open(second[0]))
    assert run["cases"][0]["check"] == "FAIL" and run["cases"][0]["check_failures"]
    assert "FAILED the accuracy check" in open(second[1]).read() and "FAIL" in err


def test_selection_errors(capsys):
    _extension()
    from torch_tiled_gemm import bench

    with pytest.raises(SystemExit) as e:
        bench.main(["--model", "Llama-9", "--device", "cpu"])
    assert "Llama-3-8B" in str(e.value) and "generic" in str(e.value)  # the names to pick from
    with pytest.raises(SystemExit) as e:
        bench.main(["--shapes", "64x64", "--device", "cpu"])
    assert "MxNxK" in str(e.value)
    with pytest.raises(SystemExit):
        bench.main(["--dtype", "fp32", "--device", "cpu"])  # a corpus option without a corpus mode
    assert "only with --corpus" in capsys.readouterr().err


def test_parse_shapes():
    (a, b, c) = R.parse_shapes("4096x4096x4096, 384x197x197x64:NT,4096x14336x4096:NT")
    assert (a["M"], a["batch"], a["layout"], a["set"], a["part"]) == (4096, None, "NN", "user", "user")
    assert a["gflop"] == pytest.approx(2 * 4096 ** 3 / 1e9)
    # a shape of the corpus keeps its set, model and part
    assert (b["batch"], b["M"], b["N"], b["K"], b["part"]) == (384, 197, 197, 64, "attn") and "ViT-S/16" in b["models"]
    assert c["part"] == "fwd" and c["set"] in ("tuned", "heldout")
    for bad in ("4096x4096", "0x4x4", "4x4x4:NX", "axbxc", ""):
        with pytest.raises(SystemExit):
            R.parse_shapes(bad)
    assert R.resolve_models("llama-3-8b,GPT-2") == ["Llama-3-8B", "GPT-2"]


def test_plot_contents():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from torch_tiled_gemm import bench

    cases = []
    for i, e in enumerate(C.corpus(models=("GPT-2", "BERT-base"))):
        cases.append(dict(e, op="gemm", dtype="bf16", ratio=0.5 + 0.02 * i, kernel="k", check="ok"))
    fig = R.figure(cases, "t", models=["GPT-2", "BERT-base"])
    by_part, by_model = fig.axes[0], fig.axes[1]
    assert by_part.get_xlabel() == by_model.get_xlabel() == bench.RATIO_LABEL
    parts = [t.get_text().split(" (")[0] for t in by_part.get_yticklabels()]
    assert parts == [p for p in C.PARTS if any(c["part"] == p for c in cases)]
    assert [t.get_text().split(" (")[0] for t in by_model.get_yticklabels()] == ["BERT-base", "GPT-2"]
    for ax in (by_part, by_model):
        assert any(abs(ln.get_xdata()[0] - 1.0) < 1e-12 for ln in ax.get_lines())  # the line at 1.0
    worst = min(cases, key=lambda c: c["ratio"])
    notes = "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert f"1. {worst['ratio']:.2f}×" in notes
    plt.close(fig)
