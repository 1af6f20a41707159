"""The corpus run, now `python -m torch_tiled_gemm.bench --corpus` (kept for
scripts and notes that call it): the same options, `--models` as another
name for `--model`.

    python benchmarks/corpus_run.py --dtype bf16 [--set all|tuned|heldout] [--rounds 6] [--limit N]
        [--min-gflop X] [--parts fwd,dX,dW,attn,lora,generic] [--models NAME,...] [--time-budget S] [--out DIR]
    python benchmarks/corpus_run.py --estimate [--dtype ...] [--rounds ...]   (the run time on an H100)

The code is torch_tiled_gemm/corpus_bench.py; docs/corpus.md describes the run.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv=None):
    from torch_tiled_gemm import bench

    argv = list(sys.argv[1:] if argv is None else argv)
    argv = ["--model" if a == "--models" else "--model=" + a[len("--models="):] if a.startswith("--models=") else a
            for a in argv]
    return bench.main(["--corpus"] + argv)


if __name__ == "__main__":
    sys.exit(main())
