"""Runs the test suite against the INSTALLED torch_tiled_gemm (a wheel built
elsewhere, under another torch) and adds the run to an ABI record:

    benchmarks/results/abi-<date>-<commit>.json
    {"wheel": ..., "built_with_torch": ..., "runs": [{"torch", "device", "passed", "failed", ...}]}

Run it once per environment (each with the same wheel installed, e.g.
`pip install --no-deps dist/torch_tiled_gemm-*.whl`), from the repository's
root; the first run creates the record, later ones append.  The suite runs
with the working directory kept off sys.path, so the installed package is
imported, never the source tree's (docs/abi.md).

    python benchmarks/abi_record.py --wheel torch_tiled_gemm-0.1.0-cp310-abi3-linux_x86_64.whl \
        --built-with-torch 2.14.1 --out benchmarks/results/abi-2026-11-27-abc1234.json [-- pytest args]
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time


# `python -c` puts the working directory first on sys.path, where the source
# tree's torch_tiled_gemm (without its compiled library) would shadow the
# installed one; `-P` would do this, but only from Python 3.11 on.
NO_CWD = "import os, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]; "


def suite_counts(output):
    """passed / failed / skipped / errors from pytest's closing line."""
    counts = {}
    for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", output.splitlines()[-1] if output else ""):
        counts["errors" if what.startswith("error") else what] = int(n)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", required=True, help="the wheel file that was installed (its name and sha256 are "
                    "recorded), or just its name")
    ap.add_argument("--built-with-torch", required=True, help="the torch version whose headers built it")
    ap.add_argument("--out", required=True, help="the record (created, or appended to)")
    ap.add_argument("--log", help="where to write pytest's whole output (default: only its end is printed)")
    ap.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments (default: -q tests)")
    args = ap.parse_args()

    probe = (NO_CWD + "import json, torch, torch_tiled_gemm as t; print(json.dumps({'torch': torch.__version__, "
             "'so': t._C.__file__, 'device': torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}))")
    info = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                                     text=True).stdout)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_tiled_gemm")
    if os.path.commonpath([os.path.abspath(info["so"]), src]) == src:
        sys.exit(f"the source tree's extension is imported ({info['so']}), not an installed wheel")

    t0 = time.time()
    pytest_args = args.pytest_args or ["-q", "tests"]
    proc = subprocess.run([sys.executable, "-c", NO_CWD + f"import pytest; sys.exit(pytest.main({pytest_args!r}))"],
                          capture_output=True, text=True)
    tail = proc.stdout.strip()
    if args.log:
        with open(args.log, "w") as f:
            f.write(proc.stdout + proc.stderr)
    # the failures' summary lines wherever they are, then the end
    print("\n".join(line for line in tail.splitlines() if line.startswith(("FAILED", "ERROR"))))
    print(tail[-3000:])
    run = {"torch": info["torch"], "device": info["device"], "python": sys.version.split()[0],
           "extension": os.path.basename(info["so"]), **suite_counts(tail), "exit_code": proc.returncode,
           "seconds": round(time.time() - t0)}
    run.setdefault("passed", 0)
    run.setdefault("failed", 0)

    wheel = {"wheel": os.path.basename(args.wheel)}
    if os.path.isfile(args.wheel):
        wheel["wheel_sha256"] = hashlib.sha256(open(args.wheel, "rb").read()).hexdigest()
    record = {**wheel, "built_with_torch": args.built_with_torch, "runs": []}
    if os.path.exists(args.out):
        record = json.load(open(args.out))
        for k, v in wheel.items():
            if record.get(k, v) != v:
                sys.exit(f"{args.out} records {k} {record[k]}, not {v}: another wheel")
    record["runs"].append(run)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(json.dumps(run))
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
