"""The corpus of model GEMMs (torch_tiled_gemm/corpus.py): its structure, its
held-out split, and the runner's per-case function on the CPU."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)

from torch_tiled_gemm import corpus as C  # noqa: E402
import corpus_run as R  # noqa: E402

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


def test_cli_cpu(tmp_path):
    _extension()
    rc = R.main(["--device", "cpu", "--dtype", "fp32", "--parts", "lora", "--limit", "2", "--rounds", "1",
                 "--out", str(tmp_path)])
    assert rc == 0
    (path,) = tmp_path.glob("corpus-*-fp32.json")
    run = json.load(open(path))
    assert len(run["cases"]) == 2 and run["dtype"] == "fp32" and run["rounds"] == 1
    assert all(c["part"] == "lora" and c["check"] == "ok" for c in run["cases"])
    assert run["summary"]["cases"] == 2
