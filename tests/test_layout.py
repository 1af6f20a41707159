"""The repository's layout: what the README and docs promise about it.

Host-only (no build, no GPU): benchmarks/results/ stays small and indexed,
every relative link in the README and docs/ resolves, csrc/cuda/ladder/
holds only the teaching steps and the production kernel, and
benchmarks/research/'s README names every tool there.
"""
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
MAX_RESULT_FILES = 40

# csrc/cuda/ladder/: steps 1-8 (one header each, 01_*.cuh .. 08_*.cuh), their
# shared code and launchers, and step 9, simt_fast, the production
# strict-fp32 kernel (docs/ladder.md).
LADDER_STEP = re.compile(r"0[1-8]_[a-z0-9_]+\.cuh")
LADDER_OTHER = {
    "common.cuh", "ladder.cu", "ladder_basic.cu", "ladder_fast.cu", "ladder_steps.h",
    "simt_fast.cu", "simt_fast_large.cu", "simt_fast_sliced.cu", "simt_fast_lean.cuh", "simt_fast_sliced.cuh",
}


def _files_under(folder):
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        out += [os.path.relpath(os.path.join(dirpath, f), folder) for f in filenames]
    return sorted(out)


def _markdown_files():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
        + glob.glob(os.path.join(ROOT, "benchmarks", "**", "README.md"), recursive=True))


def _relative_links(text):
    """Targets of [text](target) links outside code blocks and code spans,
    without web addresses, mail addresses and in-page anchors."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        yield target.split("#", 1)[0]


def test_results_small_and_indexed():
    files = [f for f in _files_under(RESULTS) if f != "README.md"]
    assert len(files) + 1 <= MAX_RESULT_FILES, (
        f"benchmarks/results/ holds {len(files) + 1} files (at most {MAX_RESULT_FILES}): keep the latest runs "
        "there and leave older ones to git history")
    index = open(os.path.join(RESULTS, "README.md")).read()
    listed = set(_relative_links(index))
    missing = [f for f in files if f.replace(os.sep, "/") not in listed]
    assert not missing, f"not linked from benchmarks/results/README.md: {missing}"


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(doc):
    base = os.path.dirname(doc)
    broken = [t for t in _relative_links(open(doc).read())
              if t and not os.path.exists(os.path.normpath(os.path.join(base, t)))]
    assert not broken, f"{os.path.relpath(doc, ROOT)} links to missing files: {broken}"


def test_ladder_holds_teaching_steps_and_final_kernel():
    folder = os.path.join(ROOT, "csrc", "cuda", "ladder")
    names = _files_under(folder)
    extra = [n for n in names if not LADDER_STEP.fullmatch(n) and n not in LADDER_OTHER]
    assert not extra, (f"csrc/cuda/ladder/ should hold the teaching steps 01-08 and simt_fast only; "
                       f"also found {extra} (experiments: write the conclusion in docs/ladder.md, "
                       "then delete the code)")
    steps = sorted(n[:2] for n in names if LADDER_STEP.fullmatch(n))
    assert steps == [f"0{i}" for i in range(1, 9)], steps


def test_ptxas_o1_sources_exist():
    setup = open(os.path.join(ROOT, "setup.py")).read()
    block = re.search(r"PTXAS_O1_SOURCES = \[([^\]]*)\]", setup).group(1)
    for src in re.findall(r'"([^"]+)"', block):
        assert os.path.isfile(os.path.join(ROOT, src)), src


def test_research_tools_listed():
    folder = os.path.join(ROOT, "benchmarks", "research")
    readme = open(os.path.join(folder, "README.md")).read()
    tools = [f.replace(os.sep, "/") for f in _files_under(folder) if f != "README.md"]
    missing = [t for t in tools if f"`{t}`" not in readme]
    assert not missing, f"benchmarks/research/README.md does not say what these answer: {missing}"
