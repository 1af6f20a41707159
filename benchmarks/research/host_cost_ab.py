"""Per-call host cost of two builds of the extension, side by side.

    python benchmarks/research/host_cost_ab.py --build old=/path/a --build new=/path/b \
        [--device cuda] [--n 64] [--processes 3] [--out FILE.json]

Each --build names a folder that holds an importable torch_tiled_gemm (an
installed wheel's site folder, or a source tree built in place).  Every case
is a loop of tiny calls (n x n x n, one sync at the end, bench.host_us_per_call):
its wall time per call is the host's cost (checks, dispatch, autograd, the
output's allocation, the launch).  The builds run in separate processes,
alternating (a b b a ...), `--processes` each; a case's number is the median
over the processes of each process's median of 7 rounds.  torch.mm's row is
the same in every build and shows how much the machine itself moved.

`--device cpu` (e.g. `--n 8`) times the same calls with the CPU kernels, on
one torch thread and that thread's CPU time (bench's CPU clock): the Python
and dispatcher cost of a call, with little of the machine's other load.
The rows gemm and linear call the op (torch.ops.tiled.*); ttg.gemm and
TiledLinear go through the package's Python entry points (functional.py).
The JSON keeps each process's numbers beside the medians (`per_process`).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

def child(device, n, dtype_name):
    import torch
    import torch_tiled_gemm as ttg
    from torch_tiled_gemm.bench import host_us_per_call
    from torch_tiled_gemm.nn import TiledLinear

    torch.backends.cuda.matmul.allow_tf32 = False
    if device == "cpu":
        torch.set_num_threads(1)  # bench's CPU clock: the calling thread's CPU time
    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    ag = a.clone().requires_grad_()
    lin = torch.nn.Linear(n, n, device=device, dtype=dtype)
    tl = TiledLinear.from_linear(lin)
    w, bias = lin.weight.detach(), lin.bias.detach()

    def inference():
        with torch.inference_mode():
            torch.ops.tiled.gemm(a, b)

    def no_grad_linear():
        with torch.no_grad():
            tl(a)

    fns = {
        "torch.mm": lambda: torch.mm(a, b),
        "gemm": lambda: torch.ops.tiled.gemm(a, b),
        "gemm, a requires grad": lambda: torch.ops.tiled.gemm(ag, b),
        "gemm fwd+bwd": lambda: torch.ops.tiled.gemm(ag, b).sum().backward(),
        "gemm under inference_mode": inference,
        "linear": lambda: torch.ops.tiled.linear(a, w, bias),
        "TiledLinear fwd (params require grad)": lambda: tl(a),
        "TiledLinear fwd+bwd": lambda: tl(ag).sum().backward(),
        "TiledLinear fwd under no_grad": no_grad_linear,
        "ttg.gemm": lambda: ttg.gemm(a, b),
        "ttg.gemm, a requires grad": lambda: ttg.gemm(ag, b),
        "ttg.gemm fwd+bwd": lambda: ttg.gemm(ag, b).sum().backward(),
    }
    times = {k: [] for k in fns}
    for r in range(7):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            times[k].append(host_us_per_call(fns[k], device, 1000 if "bwd" in k else 2000))
    print(json.dumps({k: statistics.median(v) for k, v in times.items()}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="append", required=True, help="NAME=FOLDER (twice or more)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--out")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child(a.child[0], int(a.child[1]), a.child[2])
    builds = dict(s.split("=", 1) for s in a.build)
    result = {"device": a.device, "n": a.n, "processes": a.processes, "builds": builds, "us_per_call": {},
              "per_process": {}}
    for dtype in a.dtypes.split(","):
        per = {name: [] for name in builds}
        for i in range(a.processes):
            # a b, b a, a b ...: each build goes first as often as last
            for name in (list(builds) if i % 2 == 0 else list(builds)[::-1]):
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [builds[name], os.environ.get("PYTHONPATH")])))
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--build", "x=y",
                                      "--child", a.device, str(a.n), dtype], env=env, cwd="/",
                                     capture_output=True, text=True)
                if out.returncode:
                    sys.exit(f"{name}: {out.stderr[-2000:]}")
                per[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        cases = list(next(iter(per.values()))[0])  # the child's rows, in its order
        table = {name: {c: statistics.median(r[c] for r in runs) for c in cases} for name, runs in per.items()}
        result["us_per_call"][dtype] = table
        result["per_process"][dtype] = per
        print(f"\n{a.n}^3 {dtype} on {a.device}, us per call (median of {a.processes} processes per build)")
        print(f"{'case':40s}" + "".join(f"{n:>10s}" for n in builds))
        for c in cases:
            print(f"{c:40s}" + "".join(f"{table[n][c]:10.2f}" for n in builds))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
