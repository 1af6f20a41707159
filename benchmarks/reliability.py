"""The reliability record of one GPU run: PyTorch's OpInfo samples, the fuzz
test at scale, compute-sanitizer over every kernel family, and tf32's error
against cuBLAS's.

    python benchmarks/reliability.py --out DIR [--fuzz-cases 50000]
        [--tools memcheck,racecheck,initcheck,synccheck] [--skip opinfo,fuzz,sanitizer,tf32]
        [--jobs N] [--shares initcheck=4] [--sm80-only] [--part I/N --merge]

Writes DIR/reliability-<gpu>-<date>-<commit>.json:
    {"gpu", "commit", "date", "opinfo": {"passed", "failed"},
     "fuzz": {"cases", "failed"}, "sanitizer": {tool: errors, ...},
     "tf32_err_ratio": worst ours / cuBLAS error against float64, "tf32": [per case]}
A sanitizer value is the tool's error count (-1: the run did not finish or
printed no summary); its log goes beside the JSON.  --jobs runs the pieces
(OpInfo, fuzz, each sanitizer or each share of one) side by side, so the
whole record fits one call; parts can also be merged into an existing record
over several calls with --part and --merge (the same path is rewritten).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from torch_tiled_gemm.bench import _slug, env_info  # noqa: E402

TF32_SHAPES = [(4096, 4096, 4096), (1024, 1024, 8192), (128, 4096, 4096), (777, 1000, 3000), (2048, 2048, 2048),
               (4095, 4095, 4095), (48, 4096, 1024), (1536, 4096, 2048)]


class Job:
    """One piece of the record run as its own process (output to `log`),
    killed after `timeout` seconds; `finish(returncode)` turns it into the
    record's value.  Jobs run side by side (--jobs): the pieces are tiny
    kernels under slow host-side tools, so one GPU takes several at once."""

    def __init__(self, key, cmd, log, finish, env=None, timeout=None):
        self.key, self.cmd, self.log, self.finish, self.env, self.timeout = key, cmd, log, finish, env, timeout
        self.proc = self.started = None

    def start(self):
        self.file = open(self.log, "w")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=self.file, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(self.env or {})})
        self.started = time.time()

    def poll(self):
        """The return code once finished (None: timed out), else False."""
        rc = self.proc.poll()
        if rc is None and self.timeout and time.time() - self.started > self.timeout:
            self.proc.kill()
            self.proc.wait()
            self.file.write(f"\n[timed out after {self.timeout} s]\n")
            rc = None
        elif rc is None:
            return False
        self.file.close()
        return rc


def run_jobs(jobs, parallel, on_done):
    waiting, running = list(jobs), []
    while waiting or running:
        while waiting and len(running) < parallel:
            job = waiting.pop(0)
            job.start()
            running.append(job)
        time.sleep(0.5)
        for job in list(running):
            rc = job.poll()
            if rc is not False:
                running.remove(job)
                on_done(job, job.finish(rc))


def opinfo_job(out_dir):
    xml = os.path.join(out_dir, "opinfo.xml")

    def finish(_rc):
        if not os.path.exists(xml):
            return {"passed": 0, "failed": -1, "skipped": 0}
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        total, failed = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
        skipped = int(suite.get("skipped"))
        return {"passed": total - failed - skipped, "failed": failed, "skipped": skipped}

    return Job("opinfo", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_opinfo.py",
                          f"--junitxml={xml}"], os.path.join(out_dir, "opinfo.log"), finish, timeout=900)


def fuzz_job(out_dir, cases):
    path = os.path.join(out_dir, "fuzz.json")

    def finish(_rc):
        if not os.path.exists(path):
            return {"cases": 0, "failed": -1}
        with open(path) as f:
            r = json.load(f)
        return {"cases": r["cases"], "failed": r["failed"], "failures": r.get("failures", [])[:10]}

    return Job("fuzz", [sys.executable, "benchmarks/fuzz.py", "--cases", str(cases), "--out", path],
               os.path.join(out_dir, "fuzz.log"), finish, timeout=3600)


def sanitizer_job(out_dir, tool, part=None, sm80=False):
    """compute-sanitizer `tool` over benchmarks/sanitize_cases.py (share
    `part` "I/N" of its cases, or all; with `sm80`, its sm80-family cases,
    recorded as "<tool>_sm80"); the value is the tool's error count, -1 when
    the cases did not finish or it printed no summary.

    initcheck counts only what our kernels read: it does not see a TMA
    store as a write (benchmarks/research/micro/initcheck_tma_store.cu), so
    the cases' result checks, reading an output our sm90 kernels stored
    through TMA (one copy to the host per case), are reported uninitialized;
    those reports, and any by torch's own kernels, are counted apart
    (`initcheck_torch_reads`), not as errors."""
    label = tool + ("_sm80" if sm80 else "")
    log = os.path.join(out_dir, f"sanitizer-{label}{'-part' + part.replace('/', 'of') if part else ''}.log")
    extra = ["--print-limit", "100000000", "--show-backtrace", "no"] if tool == "initcheck" else []

    def finish(_rc):
        text = open(log).read()
        done = "sanitize cases done, 0 numerical failures" in text
        if tool == "initcheck":
            kernels = re.findall(r"Uninitialized .*\n=+ +at (.*)", text)
            host = len(re.findall(r"Host API memory access error", text))  # the result checks' copies to the host
            torch_reads = host + sum(k.startswith("void at::native::") for k in kernels)
            ours = len(kernels) + host - torch_reads
            total = re.findall(r"ERROR SUMMARY: (\d+) error", text)
            ok = done and total and int(total[-1]) == len(kernels) + host  # every error printed and classified
            return {"errors": ours if ok else -1, "torch_reads": torch_reads}
        m = re.findall(r"ERROR SUMMARY: (\d+) error", text) or \
            re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text)
        return int(m[-1]) if m and done else -1

    # Every allocation its own cudaMalloc: a stray access lands outside any.
    return Job((label, part), ["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", *extra, sys.executable,
                               "benchmarks/sanitize_cases.py", *(["--part", part] if part else []),
                               *(["--sm80"] if sm80 else [])],
               log, finish, env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, timeout=1800)


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
    p.add_argument("--jobs", type=int, default=1, help="pieces run side by side (default 1: one after another)")
    p.add_argument("--shares", default="", metavar="TOOL=N,...",
                   help="run sanitizer TOOL's cases as N shares (separate processes, counted together), "
                        "e.g. initcheck=4")
    p.add_argument("--sm80-only", action="store_true",
                   help="the sanitizers over the sm80 family's cases only (device_run.sh's sm80 stage)")
    p.add_argument("--merge", action="store_true", help="keep the parts of an existing record not run now")
    p.add_argument("--part", default=None, metavar="I/N",
                   help="the sanitizers over share I of N of the cases only (with --merge over several calls: a "
                        "tool's count is the sum once all N shares are in, -1 until then)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info = env_info("cuda")
    path = os.path.join(a.out, f"reliability-{_slug(info['gpu'])}-{info['date'][:10]}-{info['commit']}.json")
    rec = {"gpu": info["gpu"], "commit": info["commit"], "date": info["date"], "torch": info.get("torch")}
    if a.merge and os.path.exists(path):
        with open(path) as f:
            rec = {**json.load(f), **rec}
    skip = set(a.skip.split(",")) - {""}
    shares = {t: int(n) for t, n in (kv.split("=") for kv in a.shares.split(",") if kv)}

    def save():
        with open(path, "w") as f:
            json.dump(rec, f, indent=1)

    jobs = []
    if "opinfo" not in skip:
        jobs.append(opinfo_job(a.out))
    if "fuzz" not in skip:
        jobs.append(fuzz_job(a.out, a.fuzz_cases))
    if "sanitizer" not in skip:
        for tool in filter(None, a.tools.split(",")):
            if a.part:
                jobs.append(sanitizer_job(a.out, tool, a.part))
                continue
            if not a.sm80_only:
                n = shares.get(tool, 1)
                jobs += [sanitizer_job(a.out, tool, f"{i}/{n}" if n > 1 else None) for i in range(n)]
            jobs.append(sanitizer_job(a.out, tool, sm80=True))

    def done(job, value):
        if job.key in ("opinfo", "fuzz"):
            rec[job.key] = value
        else:
            tool, part = job.key
            v = value if isinstance(value, dict) else {"errors": value}  # initcheck: also torch's reads
            if part:  # a share: the counts are the sums over the N shares (errors -1 until all are in)
                n = part.split("/")[1]
                parts = rec.setdefault("sanitizer_parts", {}).setdefault(tool, {})
                parts[part] = value
                shares = [s if isinstance(s, dict) else {"errors": s} for k, s in parts.items() if k.endswith(f"/{n}")]
                complete = len(shares) == int(n) and min(s["errors"] for s in shares) >= 0
                v = {k: sum(s.get(k, 0) for s in shares) for k in v}
                if not complete:
                    v["errors"] = -1
            rec.setdefault("sanitizer", {})[tool] = value = v["errors"]
            if "torch_reads" in v:
                rec[f"{tool}_torch_reads"] = v["torch_reads"]
        print(f"{job.key}: {value if job.key != 'fuzz' else {k: value[k] for k in ('cases', 'failed')}} "
              f"({time.time() - job.started:.0f} s)", flush=True)
        save()

    # The tf32 cases run here (timed against cuBLAS) before the other pieces
    # start, so that they do not share the GPU.
    if "tf32" not in skip:
        rec["tf32_err_ratio"], rec["tf32"] = tf32_ratio()
        save()
    run_jobs(jobs, a.jobs, done)
    print(json.dumps({k: v for k, v in rec.items() if k != "tf32"}, indent=1))
    print("wrote", path)


if __name__ == "__main__":
    main()
