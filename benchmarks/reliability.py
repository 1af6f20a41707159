"""The reliability record of one GPU run: PyTorch's OpInfo samples, the fuzz
test at scale, compute-sanitizer over every kernel family, and tf32's error
against cuBLAS's.

    python benchmarks/reliability.py --out DIR [--fuzz-cases 50000]
        [--tools memcheck,racecheck,initcheck,synccheck] [--skip opinfo,fuzz,sanitizer,tf32] [--part I/N --merge]

Writes DIR/reliability-<gpu>-<date>-<commit>.json:
    {"gpu", "commit", "date", "opinfo": {"passed", "failed"},
     "fuzz": {"cases", "failed"}, "sanitizer": {tool: errors, ...},
     "tf32_err_ratio": worst ours / cuBLAS error against float64, "tf32": [per case]}
A sanitizer value is the tool's error count (-1: the run did not finish or
printed no summary); its log goes beside the JSON.  Parts can be merged
into an existing record with --merge (the same path is rewritten).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from torch_tiled_gemm.bench import _slug, env_info  # noqa: E402

TF32_SHAPES = [(4096, 4096, 4096), (1024, 1024, 8192), (128, 4096, 4096), (777, 1000, 3000), (2048, 2048, 2048),
               (4095, 4095, 4095), (48, 4096, 1024), (1536, 4096, 2048)]


def run(cmd, log, env=None, timeout=None):
    with open(log, "w") as f:
        try:
            p = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                               timeout=timeout)
            return p.returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[timed out after {timeout} s]\n")
            return None


def opinfo(out_dir):
    xml = os.path.join(out_dir, "opinfo.xml")
    run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_opinfo.py", f"--junitxml={xml}"],
        os.path.join(out_dir, "opinfo.log"), timeout=900)
    suite = ET.parse(xml).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    total, failed = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
    skipped = int(suite.get("skipped"))
    return {"passed": total - failed - skipped, "failed": failed, "skipped": skipped}


def fuzz(out_dir, cases):
    path = os.path.join(out_dir, "fuzz.json")
    run([sys.executable, "benchmarks/fuzz.py", "--cases", str(cases), "--out", path],
        os.path.join(out_dir, "fuzz.log"), timeout=3600)
    with open(path) as f:
        r = json.load(f)
    return {"cases": r["cases"], "failed": r["failed"],
            "failures": r.get("failures", [])[:10]}


def sanitizer(out_dir, tools, part=None):
    """Error counts per tool (-1: the cases did not finish); `part` "I/N"
    runs that share of the cases only (benchmarks/sanitize_cases.py --part)."""
    counts = {}
    for tool in tools:
        log = os.path.join(out_dir, f"sanitizer-{tool}.log")
        # Every allocation its own cudaMalloc: a stray access lands outside any.
        run(["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", sys.executable,
             "benchmarks/sanitize_cases.py", *(["--part", part] if part else [])], log,
            env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, timeout=1800)
        text = open(log).read()
        m = re.findall(r"ERROR SUMMARY: (\d+) error", text) or re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text)
        done = "sanitize cases done, 0 numerical failures" in text
        counts[tool] = int(m[-1]) if m and done else -1
        print(f"sanitizer {tool}: {counts[tool]}", flush=True)
    return counts


def tf32_ratio():
    from torch_tiled_gemm.bench import operands
    from torch_tiled_gemm.testing import relative_error

    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for M, N, K in TF32_SHAPES:
        for layout in ("NN", "NT", "TN", "TT"):
            a, b = operands(M, N, K, torch.float32, layout, "cuda", None)
            ref = torch.matmul(a.double(), b.double())
            ours, cublas = relative_error(torch.ops.tiled.gemm(a, b), ref), relative_error(torch.matmul(a, b), ref)
            rows.append({"M": M, "N": N, "K": K, "layout": layout, "kernel": torch.ops.tiled.gemm_kernel_name(a, b),
                         "ours": ours, "cublas": cublas, "ratio": ours / cublas})
            print(f"tf32 {M}x{N}x{K} {layout}: ours {ours:.3e} cuBLAS {cublas:.3e} ratio {ours / cublas:.3f} "
                  f"{rows[-1]['kernel']}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return max(r["ratio"] for r in rows), rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--fuzz-cases", type=int, default=50000)
    p.add_argument("--tools", default="memcheck,racecheck,initcheck,synccheck")
    p.add_argument("--skip", default="")
    p.add_argument("--merge", action="store_true", help="keep the parts of an existing record not run now")
    p.add_argument("--part", default=None, metavar="I/N",
                   help="the sanitizers over share I of N of the cases (with --merge over several calls: a tool's "
                        "count is the sum once all N shares are in, -1 until then)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info = env_info("cuda")
    path = os.path.join(a.out, f"reliability-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}.json")
    rec = {"gpu": info["gpu"], "commit": info["commit"], "date": info["date"], "torch": info.get("torch")}
    if a.merge and os.path.exists(path):
        with open(path) as f:
            rec = {**json.load(f), **rec}
    skip = set(a.skip.split(",")) - {""}

    def save():
        with open(path, "w") as f:
            json.dump(rec, f, indent=1)

    if "tf32" not in skip:
        rec["tf32_err_ratio"], rec["tf32"] = tf32_ratio()
        save()
    if "opinfo" not in skip:
        rec["opinfo"] = opinfo(a.out)
        print("opinfo", rec["opinfo"], flush=True)
        save()
    if "fuzz" not in skip:
        rec["fuzz"] = fuzz(a.out, a.fuzz_cases)
        print("fuzz", {k: rec["fuzz"][k] for k in ("cases", "failed")}, flush=True)
        save()
    if "sanitizer" not in skip:
        tools = [t for t in a.tools.split(",") if t]
        counts = sanitizer(a.out, tools, a.part)
        if a.part:
            n = int(a.part.split("/")[1])
            for tool, c in counts.items():
                shares = rec.setdefault("sanitizer_parts", {}).setdefault(tool, {})
                shares[a.part] = c
                done = [v for k, v in shares.items() if k.endswith(f"/{n}")]
                counts[tool] = sum(done) if len(done) == n and min(done) >= 0 else -1
        rec.setdefault("sanitizer", {}).update(counts)
        save()
    print(json.dumps({k: v for k, v in rec.items() if k != "tf32"}, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
