"""Configurations as data (docs/dispatch.md), host-only: every family's
named configurations forced through TILED_CONFIG, the shipped dispatch
table, and the three run-time switches.

Builds the dispatch code of every CUDA family with stub launchers
(tests/host/dispatch_choice.cpp) with nvcc, so it runs in CI without a GPU;
skips where nvcc is missing."""
import os
import re
import subprocess

import pytest

from conftest import ROOT, build_host_driver

pytestmark = pytest.mark.sources  # (CI runs them once, not again against the installed wheel)

SOURCES = ["tests/host/dispatch_choice.cpp", "csrc/cuda/dispatch.cu", "csrc/cuda/hopper/hopper.cu",
           "csrc/cuda/skinny/skinny.cu", "csrc/cuda/sm80/sm80.cu", "csrc/cuda/autotune.cpp",
           "csrc/cuda/ladder/simt_fast.cu"]
DTYPES = ("bf16", "f16", "tf32", "f32")
LAYOUTS = ("nn", "nt", "tn", "tt")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return build_host_driver(tmp_path_factory, "dispatch_choice", SOURCES)


def run(driver, lines, *flags):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILED_")}
    text = "\n".join(" ".join(map(str, ln)) for ln in lines) + "\n"
    out = subprocess.run([driver, *flags], input=text, capture_output=True, text=True, check=True, timeout=600,
                         env=env).stdout
    return out.splitlines()


def names_for(driver, dtype, layout, *flags):
    return run(driver, [(64, 64, 64, 1, dtype, layout, "-")], "--list", *flags)[0].split()


# Shapes for the round trip: small and large sides, ragged, deep and shallow
# K, batched, so that every configuration finds problems it takes.  (No side
# of 1: the layout letters of such an operand are ambiguous.)
VALS = (8, 16, 48, 100, 129, 777, 1536, 4096, 14336)
SHAPES = [(M, N, K, b) for M in VALS for N in VALS for K in (64, 1000, 8192) for b in (1, 3)
          if M * N * K * b <= 2 ** 36]


def must_run_somewhere(name, flags):
    """The names the grid must see run: on an sm_90 device every 16-bit NN
    and NT configuration and every tf32 NT one (other layouts lack some
    kernels: no swapped-only widths for a column-major A, no one-slab tiles
    for TT, tf32 only K-major B); on an sm_80 device the sm80 family's and
    the skinny kernel's without clusters (nor the 64-row deep pipeline,
    172 KB of shared memory)."""
    if flags:
        variant = name.split("_")[2]
        return name.startswith("sm80_") or (name.startswith("skinny_") and "c" not in variant[6:] and
                                           not (variant.startswith("64x") and "deep" in variant))
    return name.split("_")[-1] in ("nn", "nt") and not name.startswith("sm90_tf32") or name.endswith("tf32_nt")


@pytest.mark.parametrize("flags", [(), ("--sm80",)], ids=["sm90", "sm80"])
def test_every_configuration_round_trips(driver, flags):
    """Forced by its name, each configuration of each family runs as that
    configuration or is declined (the rules' choice runs), never replaced by
    something else; and every name the rules pick is one of the families'
    names."""
    never = []
    for dtype in DTYPES:
        for layout in LAYOUTS:
            names = names_for(driver, dtype, layout, *flags)
            assert len(names) == len(set(names)), (dtype, layout)
            cases = [(M, N, K, b, dtype, layout) for M, N, K, b in SHAPES]
            rules = run(driver, [c + ("-",) for c in cases], *flags)
            assert set(rules) <= set(names), (dtype, layout, sorted(set(rules) - set(names))[:5])
            for name in names:
                got = run(driver, [c + (name,) for c in cases], *flags)
                bad = [(c, r, g) for c, r, g in zip(cases, rules, got) if g not in (name, r)]
                assert not bad, (name, bad[:3])
                if name not in got and dtype != "f32" and must_run_somewhere(name, flags):
                    never.append(name)
    assert not never, never


def test_bare_variants_and_lists(driver):
    """A variant alone (any dtype and layout) and a comma list of names, one
    per family, force what they name; a name of another dtype is declined."""
    rules, = run(driver, [(48, 4096, 4096, 1, "bf16", "nt", "-")])
    cases = [((48, 4096, 4096, 1, "bf16", "nt", "128x128pp"), "sm90_bf16_128x128pp_nt"),
             ((48, 4096, 4096, 1, "bf16", "nt", "64x128sk4"), "skinny_bf16_64x128sk4_nt"),
             ((48, 4096, 4096, 1, "bf16", "nt", "sm90_f16_128x128pp_nt"), rules),
             ((48, 4096, 4096, 1, "bf16", "nt", "simt_fast_splitk,64x128sk2c"), "skinny_bf16_64x128sk2c_nt"),
             ((1024, 1024, 4096, 1, "f32", "nn", "64x128sk2c,simt_fast_splitk"), "simt_fast_splitk"),
             ((1024, 1024, 4096, 1, "f32", "nn", "simt_general"), "simt_general"),
             ((1024, 1024, 4096, 1, "bf16", "nt", "128x256x64s3"), "sm80_bf16_128x256x64s3_nt")]
    got = run(driver, [c for c, _ in cases])
    for (c, want), g in zip(cases, got):
        assert g == want, (c, g, want)


def test_candidates_run_as_named(driver):
    """The autotuner's candidates on a device: the rules' choice first, then
    names that each run as named, each kernel once."""
    for case in [(16, 4096, 4096, 1, "bf16", "nt", "-"), (1536, 1536, 1536, 1, "bf16", "nn", "-"),
                 (96, 4096, 4096, 1, "f16", "tn", "-"), (4096, 4096, 4096, 1, "tf32", "nt", "-"),
                 (16384, 8, 4096, 1, "tf32", "nt", "-"), (16, 768, 12608, 1, "tf32", "tn", "-")]:
        cands = run(driver, [case], "--candidates")[0].split()
        assert cands[0] == "-" and len(cands) > 3, (case, cands)
        rules, = run(driver, [case])
        got = run(driver, [case[:-1] + (c,) for c in cands[1:]])
        assert got == cands[1:] and rules not in got and len(set(got)) == len(got), case
        assert not any(c.startswith("sm80_") for c in cands), (case, cands)  # sm90 runs these here
    # tf32 with a side <= 64 (no one-slab tiles): the skinny kernel's tf32
    # configurations, and the 128-row tiles where they read the operands in
    # place (NT, NN; TN takes a copy, which a forced name does not make).
    for case in [(16384, 8, 4096, 1, "tf32", "nt", "-"), (16, 768, 12608, 1, "tf32", "tn", "-"),
                 (4096, 32, 3584, 1, "tf32", "nn", "-")]:
        cands = run(driver, [case], "--candidates")[0].split()
        assert any(c.startswith("skinny_tf32_") for c in cands), (case, cands)
        assert any(c.startswith("sm90_tf32_128x") for c in cands) == (case[5] != "tn"), (case, cands)
    # The shortlist: never the skinny kernel's 7-stage pipeline; of the
    # swapped-only widths (128x144sw ... 128x232sw), the two of the fewest
    # weighted waves (hopper.cu's swap_width cost), the narrower of equals.
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    for M, N, K, lay in [(1536, 1536, 1536, "nn"), (1280, 4096, 4096, "nt"), (777, 4096, 4096, "nn"),
                         (3000, 5000, 1024, "nt"), (40, 4096, 4096, "nt")]:
        cands = run(driver, [(M, N, K, 1, "bf16", lay, "-")], "--candidates")[0].split()
        assert not any("deep" in c for c in cands), cands
        variants = [c.split("_")[2] for c in cands[1:]]
        widths = sorted(int(v[4:-2]) for v in variants if re.fullmatch(r"128x(144|160|176|200|208|224|232)sw", v))
        rules, = run(driver, [(M, N, K, 1, "bf16", lay, "-")])
        # (the rules' own choice is the "-" candidate, not listed again)
        costs = sorted((cdiv(cdiv(N, 128) * cdiv(M, w), 132) * ((w * 10000 + 256 * 97 // 2) // (256 * 97)), w)
                       for w in (144, 160, 176, 200, 208, 224, 232) if f"_128x{w}sw_" not in rules)
        # (a side <= 64: the 128-row tiles are no candidates)
        assert widths == (sorted(w for _, w in costs[:2]) if min(M, N) > 64 else []), (M, N, K, widths, costs, rules)
    # On an sm_80 GPU the sm80 family's configurations are the candidates
    # (the rules' choice among them first).
    for case in [(1536, 1536, 1536, 1, "bf16", "nn", "-"), (4096, 4096, 4096, 1, "tf32", "nt", "-"),
                 (8192, 1024, 768, 3, "f16", "tn", "-")]:
        cands = run(driver, [case], "--candidates", "--sm80")[0].split()
        rules, = run(driver, [case], "--sm80")
        assert rules.startswith("sm80_") and cands[0] == "-", (case, rules, cands)
        assert len(cands) == 2 and cands[1].startswith("sm80_") and cands[1] != rules, (case, cands)
        assert run(driver, [case[:-1] + (cands[1],)], "--sm80") == [cands[1]], case


def table_entries():
    import torch_tiled_gemm  # the tables the installed package ships (editable or wheel)

    tables = os.path.join(os.path.dirname(torch_tiled_gemm.__file__), "tables")
    for fname in sorted(os.listdir(tables)):
        if not fname.endswith(".tsv"):
            continue
        with open(os.path.join(tables, fname)) as f:
            for n, line in enumerate(f, 1):
                if line.strip() and not line.startswith("#"):
                    yield fname, n, line.rstrip("\n").split("\t")


def test_table_names_existing_configurations(driver):
    """The shipped tables parse (class key, configuration, what it measured,
    the rules' choices it was measured against) and every entry names
    configurations of its class's dtype and layout (the H100's table,
    measured when configurations were switch settings, has no fourth
    field)."""
    seen = guarded = 0
    for fname, n, fields in table_entries():
        assert len(fields) in (3, 4), (fname, n, fields)
        key = dict(kv.split("=", 1) for kv in fields[0].split(";"))
        assert set(key) == {"gpu", "sms", "dtype", "tf32", "layout", "m", "n", "k", "batched"}, (fname, n)
        dtype = {"bfloat16": "bf16", "float16": "f16"}.get(key["dtype"], "tf32" if key["tf32"] == "1" else "f32")
        names = names_for(driver, dtype, key["layout"])
        assert fields[1] in names, (fname, n, fields[1])
        assert fields[2].startswith("gain "), (fname, n)
        if len(fields) == 4:
            assert fields[3].startswith("over ") and fields[1] not in fields[3][5:].split(","), (fname, n)
            assert set(fields[3][5:].split(",")) <= set(names), (fname, n, fields[3])
            guarded += 1
        seen += 1
    assert seen > 250 and guarded > 100, (seen, guarded)


def test_table_entry_applies_over_its_rules_choice(driver):
    """A table entry runs where the problem's class matches and the rules
    would run one of the kernels named in its fourth field (what it was
    measured against); elsewhere in the class the rules run.  A line
    without that field applies to the whole class.  (The driver's device,
    "host H100", reads tables/host-H100.tsv next to the driver.)"""
    key = "gpu=host_H100;sms=132;dtype=bfloat16;tf32=0;layout=nt;m=4096;n=4096;k=4096;batched=0"
    big, odd = (4096, 4096, 4096, 1, "bf16", "nt", "-"), (3000, 3000, 4000, 1, "bf16", "nt", "-")
    rules_big, rules_odd = run(driver, [big, odd])
    assert rules_big != rules_odd and "128x128pp_" not in rules_big + rules_odd, (rules_big, rules_odd)
    folder = os.path.join(os.path.dirname(driver), "tables")
    os.makedirs(folder, exist_ok=True)
    table = os.path.join(folder, "host-H100.tsv")
    try:
        for over, want in ((f"\tover {rules_big}", ["sm90_bf16_128x128pp_nt", rules_odd]),
                           (f"\tover x,{rules_odd}", [rules_big, "sm90_bf16_128x128pp_nt"]),
                           ("", ["sm90_bf16_128x128pp_nt"] * 2)):
            with open(table, "w") as f:
                f.write(f"# a test table\n{key}\tsm90_bf16_128x128pp_nt\tgain 1.1{over}\n")
            assert run(driver, [big, odd]) == want, over
            # the table steps aside for a name forced by hand, and for TILED_DISABLE_KERNELS=table
            assert run(driver, [big[:-1] + ("128x256",)]) == ["sm90_bf16_128x256_nt"]
            env = dict(os.environ, TILED_DISABLE_KERNELS="table")
            out = subprocess.run([driver], input=" ".join(map(str, big)) + "\n", capture_output=True, text=True,
                                 check=True, env=env).stdout.split()
            assert out == [rules_big]
    finally:
        os.remove(table)


# The run-time switches: these three, and nothing else read from the
# environment by the extension (build-time names such as TILED_WITH_SM90A
# are preprocessor macros, not strings).
SWITCHES = {"TILED_CONFIG", "TILED_DISABLE_KERNELS", "TILED_AUTOTUNE_CACHE"}


def test_only_three_runtime_switches():
    found = {}
    for dirpath, _, files in os.walk(os.path.join(ROOT, "csrc")):
        for fname in files:
            path = os.path.join(dirpath, fname)
            with open(path, errors="replace") as f:
                text = f.read()
            for name in re.findall(r'"(TILED_[A-Z0-9_]+)"', text):
                found.setdefault(name, []).append(os.path.relpath(path, ROOT))
            for m in re.finditer(r"\b(getenv|setting)\s*\(\s*([^)]*)\)", text):
                arg = m.group(2).strip()
                if arg.startswith('"'):
                    assert arg.strip('"') in SWITCHES, (path, m.group(0))
    assert set(found) <= SWITCHES, {k: v for k, v in found.items() if k not in SWITCHES}


def test_sm80_split_k(driver):
    """The sm80 family splits K where its grid fills at most half the SMs'
    CTA slots and K holds 8 k-blocks a split (sm80.cu's build): the
    workspace holds splits x batch x M x N fp32 partial sums; a full grid
    or a short K asks for none."""
    cases = [((256, 512, 4096, 1, "bf16", "nn", "-"), 8),  # 8 tiles, 64 k-blocks: 8 splits
             ((300, 200, 1000, 1, "bf16", "nt", "-"), 2),  # 6 tiles, 16 k-blocks: 2
             ((132, 256, 2000, 3, "tf32", "tn", "-"), 7),  # 6 tiles (128 x 256), 63 k-blocks: 7 of 9
             ((4096, 4096, 4096, 1, "bf16", "nn", "-"), 0),  # 1024 tiles
             ((256, 512, 448, 1, "bf16", "nn", "-"), 0)]  # 7 k-blocks
    got = run(driver, [c for c, _ in cases], "--sm80", "--workspace")
    for (c, splits), line in zip(cases, got):
        name, nbytes = line.split()
        M, N, _, b, *_ = c
        assert name.startswith("sm80_"), (c, name)
        assert int(nbytes) == splits * b * M * N * 4, (c, line)
