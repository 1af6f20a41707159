"""The offline tuner and the dispatch table (torch_tiled_gemm/tune.py,
csrc/cuda/autotune.h): the table's file name, how a class's entry is chosen
from measurements, and (on a GPU with a shipped table) that dispatch runs
each entry's setting and steps aside for a switch set by hand."""
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_tiled_gemm  # noqa: F401
from torch_tiled_gemm import corpus, tune
import test_hopper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_table_name():
    assert tune.table_name("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3.tsv"
    assert tune.table_name("NVIDIA H200") == "NVIDIA-H200.tsv"
    assert tune.table_name("  A100-SXM4 (80GB) ") == "A100-SXM4-80GB.tsv"


def rec(key, rules_ms, alt_ms, torch_ms=1.0, ok=True, alt="k_alt", kernel="k_alt"):
    """A raw record: candidate configuration -> kernel, kernel -> time."""
    settings = {"-": "k_rules", alt: kernel}
    return {"key": key, "settings": settings, "ms": {"k_rules": rules_ms, kernel: alt_ms, "torch": torch_ms},
            "ok": {"k_rules": True, kernel: ok}}


def test_build_table_picks_a_consistent_winner():
    # 10% faster on both GEMMs of the class: kept, with its numbers
    t = tune.build_table([rec("c1", 1.0, 0.9), rec("c1", 2.0, 1.8)])
    s, gain, worst, n, before, after, over = t["c1"]
    assert s == "k_alt" and n == 2 and over == "k_rules" and gain == pytest.approx(1 / 0.9) and worst == pytest.approx(1 / 0.9)
    assert before == pytest.approx((1.0 * 0.5) ** 0.5) and after > before
    # a GEMM of the class whose rules already ran the winner: the entry does not name it as a choice it applies over
    same = {"key": "c1", "settings": {"-": "k_alt"}, "ms": {"k_alt": 1.0, "torch": 1.0}, "ok": {"k_alt": True}}
    s, gain, worst, n, before, after, over = tune.build_table([rec("c1", 1.0, 0.8), rec("c1", 2.0, 1.6), same])["c1"]
    assert s == "k_alt" and n == 3 and over == "k_rules" and worst == pytest.approx(1.0)


def test_build_table_leaves_out_what_does_not_pay():
    assert tune.build_table([rec("c", 1.0, 0.99)]) == {}  # below MIN_GAIN
    assert tune.build_table([rec("c", 1.0, 0.5), rec("c", 1.0, 1.1)]) == {}  # one GEMM slower than MAX_LOSS
    assert tune.build_table([rec("c", 1.0, 0.5, ok=False)]) == {}  # a wrong output is never chosen
    # a configuration not timed for every GEMM of the class is not a candidate
    assert tune.build_table([rec("c", 1.0, 0.5), rec("c", 1.0, 0.5, kernel="k_other")]) == {}
    # measured but nothing to choose (one kernel): no entry
    assert tune.build_table([{"key": "c", "settings": {"-": "k"}, "ms": {}, "ok": {}}]) == {}


def test_build_table_takes_the_confirming_ratio():
    """Where a lead was re-timed against the rules' kernel (rec["confirm"]),
    that pair's ratio counts, not the first pass's."""
    r = rec("c", 1.0, 0.94)  # +6% in the first pass ...
    r["confirm"] = {"k_rules": 1.0, "k_alt": 0.995}  # ... 0.5% when re-timed paired
    assert tune.build_table([r]) == {}
    r["confirm"] = {"k_rules": 1.0, "k_alt": 0.9}  # a confirmed lead
    s, gain, worst, n, before, after, over = tune.build_table([r])["c"]
    assert s == "k_alt" and gain == pytest.approx(1 / 0.9) and after == pytest.approx(before / 0.9)
    # another configuration than the confirmed pair keeps its first-pass ratio
    r2 = rec("c", 1.0, 0.8, alt="k_two", kernel="k_two")
    r2["confirm"] = {"k_rules": 1.0, "k_alt": 0.99}
    assert tune.build_table([r2])["c"][0] == "k_two"


def test_latest_and_stale_records():
    """A GEMM measured again supersedes its earlier record; a record whose
    rules' kernel the rules no longer pick is stale (measured again), one of
    the older format (switch-named candidates) never is."""
    def r(i, rules, dtype="bf16", **extra):
        return dict(id=i, dtype=dtype, settings={"-": rules, **extra}, ms={}, ok={})
    old, new, other = r("g1", "k_a"), r("g1", "k_b"), r("g1", "k_a", dtype="fp16")
    assert tune.latest([old, other, new]) == [new, other]
    switches = r("g2", "k_x", **{"TILED_SM90_SCHEDULE=pingpong": "k_y"})
    now = {"g1": "k_b", "g2": "k_z"}
    assert tune.stale([old, switches], lambda rec: now[rec["id"]]) == {("bf16", "g1")}
    assert tune.stale([new, switches], lambda rec: now[rec["id"]]) == set()


def test_confirm_retimes_a_lead(monkeypatch):
    """confirm() re-times the fastest correct kernel against the rules' (in
    alternating order) only where it leads by about MIN_GAIN or more."""
    from torch_tiled_gemm import bench

    times = {"k_rules": 1.0, "k_alt": 0.97}
    seen = []

    def fake_time(fn, device):
        k = os.environ.get("TILED_CONFIG", "-")
        seen.append(k)
        return times["k_rules" if k == "-" else k]

    monkeypatch.setattr(bench, "time_ms", fake_time)
    first = {"k_rules": "-", "k_alt": "k_alt"}
    r = rec("c", 1.0, 0.9)
    tune.confirm(r, None, None, first, 4)
    assert r["confirm"] == {"k_rules": 1.0, "k_alt": 0.97} and seen == ["-", "k_alt", "k_alt", "-"] * 2
    quiet = rec("c", 1.0, 0.99)  # no lead: nothing re-timed
    tune.confirm(quiet, None, None, first, 4)
    assert "confirm" not in quiet
    wrong = rec("c", 1.0, 0.5, ok=False)  # the fastest is wrong: not a lead
    tune.confirm(wrong, None, None, first, 4)
    assert "confirm" not in wrong


def test_write_table_round_trip(tmp_path):
    path = tmp_path / "t.tsv"
    tune.write_table(str(path), tune.build_table([rec("gpu=X;m=1", 1.0, 0.8)]), "X", [])
    lines = [ln.split("\t") for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert lines == [["gpu=X;m=1", "k_alt", lines[0][2], "over k_rules"]] and lines[0][2].startswith("gain 1.250")


def test_build_table_reads_either_raw_format():
    """Records of the older format (candidates named by switches) give the
    configuration their kernel ran; a staging prefix is not part of it."""
    old = rec("c", 1.0, 0.8, alt="TILED_SM90_SCHEDULE=pingpong", kernel="sm90_bf16_128x128pp_nn")
    new = rec("c", 2.0, 1.6, alt="sm90_bf16_128x128pp_nn", kernel="staged_a+sm90_bf16_128x128pp_nn")
    new["settings"]["-"] = "staged_a+k_other"  # another rules' choice in the class, staged
    new["ms"]["staged_a+k_other"] = new["ms"].pop("k_rules")
    new["ok"]["staged_a+k_other"] = new["ok"].pop("k_rules")
    assert tune.build_table([old, new])["c"][0] == "sm90_bf16_128x128pp_nn"
    # the rules' choices it applies over: named only where every record names kernels as today
    assert tune.build_table([old, new])["c"][-1] is None
    assert tune.build_table([new, rec("c", 1.0, 0.8, alt="sm90_bf16_128x128pp_nn",
                                      kernel="sm90_bf16_128x128pp_nn")])["c"][-1] == "k_other,k_rules"


def test_config_env():
    before = os.environ.get("TILED_CONFIG")
    with tune.config_env("sm90_bf16_128x128pp_nt"):
        assert os.environ["TILED_CONFIG"] == "sm90_bf16_128x128pp_nt"
        with tune.config_env("-"):
            assert "TILED_CONFIG" not in os.environ
        assert os.environ["TILED_CONFIG"] == "sm90_bf16_128x128pp_nt"
    assert os.environ.get("TILED_CONFIG") == before


def test_cpu_has_nothing_to_tune():
    assert torch.ops.tiled.gemm_tuning(torch.randn(3, 4), torch.randn(4, 5)) == ["cpu", "-"]


# A class key and a configuration of its layout, for the tests that run main().
MAIN_KEY = "gpu=X;sms=1;dtype=bfloat16;tf32=0;layout=nn;m=1;n=1;k=1;batched=0"
MAIN_PP = "sm90_bf16_128x128pp_nn"


@pytest.fixture
def main_env(monkeypatch):
    """main() sets or clears these: restored after the test."""
    for k in ("TILED_DISABLE_KERNELS", "TILED_CONFIG", "TILED_AUTOTUNE_CACHE"):
        monkeypatch.setenv(k, "")


def test_table_only_without_a_gpu(tmp_path, monkeypatch, main_env):
    """--table-only builds the table of the one GPU a raw file measured, on a
    machine without it (no GPU here, or one hidden)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    key, pp = MAIN_KEY, MAIN_PP
    raw, table = tmp_path / "raw.jsonl", tmp_path / "t.tsv"
    raw.write_text("".join(json.dumps(dict(rec(key, 1.0, 0.8, alt=pp, kernel=pp), gpu="GPU X", dtype="bf16", id=i)) + "\n"
                           for i in ("a", "b")) + '{"cut short\n')
    args = ["--table-only", "--raw", str(raw), "--table", str(table)]
    tune.main(args)
    assert "from 2 corpus GEMMs" in table.read_text() and "GPU X" in table.read_text()
    assert [ln.split("\t")[:2] for ln in table.read_text().splitlines() if not ln.startswith("#")] == [[key, pp]]
    # records of two GPUs: which table is meant cannot be told
    with raw.open("a") as f:
        f.write(json.dumps(dict(rec(key, 1.0, 0.8), gpu="GPU Y", dtype="bf16", id="c")) + "\n")
    with pytest.raises(SystemExit, match="one GPU"):
        tune.main(args)


def test_sigterm_stops_after_the_gemm_and_writes_the_table(tmp_path, monkeypatch, main_env):
    """A run stopped by SIGTERM (`timeout`) keeps what it measured and
    writes the table from it (GPU, corpus and timing stubbed)."""
    import signal
    from torch_tiled_gemm import corpus as corpus_mod

    key, pp = MAIN_KEY, MAIN_PP
    timed = []

    def measure(entry, dname, rounds, confirm_rounds=0):
        timed.append(entry["id"])
        if len(timed) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the second GEMM is timed
        return dict(rec(key, 1.0, 0.8, alt=pp, kernel=pp), dtype=dname, id=entry["id"])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU X")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(corpus_mod, "corpus", lambda *a, **k: [{"id": i} for i in "abcd"])
    monkeypatch.setattr(tune, "measure", measure)
    before = signal.getsignal(signal.SIGTERM)
    raw, table = tmp_path / "raw.jsonl", tmp_path / "t.tsv"
    tune.main(["--dtypes", "bf16,fp16", "--raw", str(raw), "--table", str(table)])
    assert timed == ["a", "b"] and len(raw.read_text().splitlines()) == 2
    assert "from 2 corpus GEMMs" in table.read_text()
    assert signal.getsignal(signal.SIGTERM) is before


def test_tuner_refuses_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    r = subprocess.run([sys.executable, "-m", "torch_tiled_gemm.tune", "--limit", "1"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "needs a CUDA GPU" in r.stderr


def shipped_table():
    """{class key: (configuration, the rules' choices it applies over)}."""
    if not torch.cuda.is_available():
        return None
    path = tune.default_table(torch.cuda.get_device_name())
    if not os.path.exists(path):
        return None
    table = {}
    with open(path) as f:
        for ln in f:
            if ln.strip() and not ln.startswith("#"):
                key, config, _, *over = ln.rstrip("\n").split("\t")
                table[key] = (config, over[0][len("over "):].split(",") if over else None)
    return table


@pytest.mark.skipif(shipped_table() is None, reason="needs a GPU with a shipped dispatch table")
def test_dispatch_runs_the_table(monkeypatch):
    """Every corpus GEMM whose class has an entry runs that entry's
    configuration where it can (the same as forcing it by hand) if the
    rules would run one of the kernels the entry was measured against, the
    rules' choice otherwise; a configuration forced by hand wins."""
    from torch_tiled_gemm import bench

    table = shipped_table()
    seen = differ = skipped = 0
    for dname in ("bf16", "fp16", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
        try:
            for e in corpus.corpus("all"):
                if e["M"] * e["N"] * e["K"] * (e["batch"] or 1) > 2**33:
                    continue
                a, b = bench.operands(e["M"], e["N"], e["K"], bench.DTYPES[dname], e["layout"], "cuda", e["batch"])
                key = torch.ops.tiled.gemm_tuning(a, b)[0]
                if key not in table:
                    continue
                config, over = table[key]
                got = torch.ops.tiled.gemm_kernel_name(a, b)
                # a name forced by hand that runs nowhere (here the CPU's) leaves the choice to the
                # rules, which differ from the table's entry on some GEMMs of its class (those timed)
                with tune.config_env("cpu_blocked_baseline"):
                    rules = torch.ops.tiled.gemm_kernel_name(a, b)
                # operand rows 16 bytes off a 32-byte boundary: the rules' clusters, not the table
                off32 = test_hopper.off32_cluster(bench.DTYPES[dname], e["M"], e["N"], e["layout"], e["batch"] or 1,
                                                  e["K"])
                if off32 or (over is not None and tune.config_of(rules) not in over):
                    assert got == rules, (e["id"], dname, config, over)
                    skipped += 1
                    continue
                with tune.config_env(config):
                    assert torch.ops.tiled.gemm_kernel_name(a, b) == got, (e["id"], dname, config)
                differ += rules != got
                seen += 1
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
    assert seen > 0 and differ > 0, (seen, differ, skipped)


@pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)),
                    reason="the sm90 configurations need an H100/H200")
@pytest.mark.parametrize("config", ["128x128pp", "sm90_bf16_128x64_nt", "128x256streamk", "64x32sw"])
def test_config_forced_by_name(config, monkeypatch):
    """TILED_CONFIG runs the named configuration (the skinny kernel and the
    table step aside), with a correct result; a name for another dtype is
    declined (the usual choice)."""
    from conftest import assert_close_rel, reference

    M, N, K = (48, 4096, 1024) if config == "64x32sw" else (640, 1024, 2048)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
    usual = torch.ops.tiled.gemm_kernel_name(a, b)
    monkeypatch.setenv("TILED_CONFIG", config)
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    want = config if config.startswith("sm90_") else f"sm90_bf16_{config}_nt"
    assert name == want, (name, want, usual)
    assert_close_rel(torch.ops.tiled.gemm(a, b), reference(a, b), torch.bfloat16)
    monkeypatch.setenv("TILED_CONFIG", "sm90_f16_128x128pp_nt")
    assert torch.ops.tiled.gemm_kernel_name(a, b) == usual
