"""Small and remainder shapes through every kernel family, for compute-sanitizer.

    python benchmarks/sanitize_cases.py [--part I/N] [--sm80]

Kept tiny: under the sanitizer each launch runs orders of magnitude slower.
--part I/N runs only every N-th case of bad_result's, starting at the I-th
(0-based), so a slow tool (initcheck) can cover all of them in N runs; the
cases outside bad_result (the ladder steps and simt_fast's configs) run in
part 0 only.  --sm80 runs the sm80 family's cases instead (forced on:
the Hopper family is preferred wherever it runs).
"""
import os
import sys

import torch

import torch_tiled_gemm  # noqa: F401
from torch_tiled_gemm.bench import _layout as layouts

SHAPES = [(1, 1, 1), (7, 13, 5), (65, 129, 63), (129, 257, 72), (200, 300, 136)]


CALLS = [0]  # cases seen so far (a progress line every 25: a sanitizer run cut short shows how far it got)
PART = [0, 1]  # --part I/N: run the cases whose index % N == I


def rel_err(out, ref):
    """Checked on the host: initcheck does not count a TMA store as a write
    (research/micro/initcheck_tma_store.cu), so a GPU kernel reading an
    output stored that way is reported once per element; the copy to the
    host is one report per case, which reliability.py counts apart."""
    out, ref = out.cpu().double(), ref.cpu()
    return ((out - ref).norm() / ref.norm()).item()


def in_part(index):
    return index % PART[1] == PART[0]


def bad_result(a, b, bias=None, name_prefix=""):
    """Runs the op; True (after printing why) when the result is off or a
    kernel not starting with name_prefix ran."""
    CALLS[0] += 1
    if CALLS[0] % 25 == 0:
        print(f"sanitize cases: {CALLS[0]} seen", flush=True)
    if not in_part(CALLS[0] - 1):
        return False
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    out = torch.ops.tiled.gemm(a, b, bias)
    ref = a.double() @ b.double() + (bias.double() if bias is not None else 0)
    err = rel_err(out, ref)
    if err < 2e-2 and name.split("+")[-1].startswith(name_prefix):  # (after any staging copy)
        return False
    print(f"BAD {a.dtype} {tuple(a.shape)} x {tuple(b.shape)} {name}: rel err {err:.2e}")
    return True


def sm90_cases(cases, dtype, label, bias=False, name_prefix="", lays=("NN", "TT")):
    """Each (M, N, K, batch, config) in the layouts `lays` (A batched when
    batch > 1) on the configurations `config` names (TILED_CONFIG, ahead of
    the skinny kernel and the dispatch table; a comma list where the
    layouts take different ones: the first that takes the problem runs);
    returns the failures and prints the kernel that ran."""
    failures = 0
    for M, N, K, batch, config in cases:
        os.environ["TILED_CONFIG"] = config
        for lay in lays:
            a = torch.randn(batch, M, K, device="cuda", dtype=dtype)
            a = layouts(a[0], lay[0]) if batch == 1 else a
            b = layouts(torch.randn(K, N, device="cuda", dtype=dtype), lay[1])
            bias_t = torch.randn(N, device="cuda", dtype=dtype) if bias else None
            failures += bad_result(a, b, bias_t, name_prefix=name_prefix)
            print(f"{label} {M}x{N}x{K} batch {batch} {lay}: {torch.ops.tiled.gemm_kernel_name(a, b)}")
    del os.environ["TILED_CONFIG"]
    return failures


def main():
    failures = 0
    for dtype, tf32 in ((torch.float32, False), (torch.float32, True), (torch.bfloat16, False),
                        (torch.float16, False), (torch.float64, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for M, N, K in SHAPES:
            for lay in ("NN", "NT", "TN", "TT"):
                a = layouts(torch.randn(M, K, device="cuda", dtype=dtype), lay[0])
                b = layouts(torch.randn(K, N, device="cuda", dtype=dtype), lay[1])
                bias = torch.randn(N, device="cuda", dtype=dtype)
                failures += bad_result(a, b, bias)
    torch.backends.cuda.matmul.allow_tf32 = False
    # The skinny kernel (min(M, N) <= 64, 16-byte aligned): ragged M/N/K in
    # padded storage, the swapped orientation, both split reductions (forced
    # by name: 64 rows would go to the Hopper kernel's one-slab tiles).
    for M, N, K, config in ((3, 136, 72, "16x128sk2c"), (17, 200, 520, "32x128sk4"), (40, 130, 264, "64x128sk4"),
                            (300, 9, 200, "16x128sk2c"), (64, 128, 1000, "64x128sk8")):
        os.environ["TILED_CONFIG"] = config
        for lay in ("NN", "NT", "TN", "TT"):
            store_a = torch.randn(M, K + 8, device="cuda", dtype=torch.bfloat16)
            a = store_a[:, :K] if lay[0] == "N" else torch.randn(K, M + 8 - M % 8, device="cuda",
                                                                 dtype=torch.bfloat16)[:, :M].t()
            b = torch.randn(K, N + 8 - N % 8, device="cuda", dtype=torch.bfloat16)[:, :N] if lay[1] == "N" else \
                torch.randn(N, K + 8, device="cuda", dtype=torch.bfloat16)[:, :K].t()
            failures += bad_result(a, b, name_prefix="skinny")
    del os.environ["TILED_CONFIG"]
    # The Hopper kernel's stream-K pieces (partials through the workspace,
    # flags), ragged and batched; the deep-K split-K default; 128x64 tiles
    # with K split in two; TMA-stored C (ragged, batched; then several tiles
    # per CTA, whose box buffers are reused from tile to tile);
    # 128x192 tiles
    # (forced onto small ragged shapes, which would otherwise take 128x64).
    # (Unaligned rows, N = 300 or 402 row-major, run elsewhere.)
    failures += sm90_cases(((200, 300, 1000, 1, "128x64streamk"),
                            (129, 136, 520, 3, "128x64"), (256, 256, 8192, 1, "128x128sk8"),
                            (200, 300, 136, 1, "128x192"), (129, 402, 72, 2, "128x192"), (100, 264, 2056, 1, "128x64sk2"),
                            (256, 520, 136, 1, "128x64"), (130, 264, 72, 3, "128x64"),
                            # several tiles per CTA: 128x128 (288 tiles), 128x256c2 (512)
                            (2048, 2304, 72, 1, "128x160sw,128x128"), (4096, 4096, 64, 1, "128x256c2")),
                           torch.bfloat16, "sm90")
    # tf32 NT with M <= 64 < N runs swapped (C^T stored transposed by the
    # shared-memory kernels): TMA boxes, checked stores (N % 4 != 0), a batch.
    torch.backends.cuda.matmul.allow_tf32 = True
    for M, N, K, batch in ((16, 300, 136, 1), (40, 1001, 136, 1), (3, 264, 72, 2)):
        a = torch.randn(batch, M, K, device="cuda")
        a = a[0] if batch == 1 else a
        b = torch.randn(N, K, device="cuda").t()
        failures += bad_result(a, b, torch.randn(N, device="cuda"), name_prefix="sm90_tf32")
    # tf32 operands rounded in shared memory by the converter warps (A and B:
    # ping-pong, split-K; B only: the register-A cooperative tiles, K- and
    # M-major A), stream-K pieces, 2-CTA clusters, several tiles per CTA.
    failures += sm90_cases(((200, 300, 1000, 1, "128x64streamk"), (130, 264, 72, 3, "128x64"),
                            (256, 256, 8192, 1, "128x128sk8"), (2048, 2304, 72, 1, "128x128"),
                            (1024, 1024, 64, 1, "128x64")),
                           torch.float32, "sm90 tf32", bias=True, name_prefix="sm90_tf32", lays=("NT", "TT", "NN"))
    failures += sm90_cases(((200, 264, 520, 1, "128x128pp"), (128, 520, 4096, 1, "128x128sk2")),
                           torch.float32, "sm90 tf32", bias=True, name_prefix="sm90_tf32", lays=("NT",))
    torch.backends.cuda.matmul.allow_tf32 = False
    # 16-bit problems run swapped (C^T's 128x256 tiles stored transposed by
    # TMA, 64-column boxes alternating between two buffers): N just past 256
    # columns (a ragged last tile row of C^T), a batch with a ragged N, and
    # 2-CTA clusters (forced).
    failures += sm90_cases(((1024, 4104, 64, 1, "128x256sw"), (2000, 640, 64, 3, "128x256sw"),
                            (1024, 4104, 64, 1, "128x256c2sw")),
                           torch.float16, "sm90 swapped", bias=True, name_prefix="sm90_f16")
    # 16-bit NN swapped onto 128x144 ... 128x232 tiles (by
    # default, or forced): C^T's last 64-column chunk partly past the tile
    # (TMA boxes of 8, 16 or 32 rows of C), ragged M and N, a batch.
    failures += sm90_cases(((1536, 1536, 72, 1, "128x144sw,128x192"), (777, 4096, 64, 1, "128x200sw"),
                            (300, 1000, 136, 1, "128x144sw"), (145, 136, 200, 3, "128x160sw"),
                            (300, 264, 72, 1, "128x208sw"), (400, 264, 136, 1, "128x232sw,128x64"),
                            (300, 264, 72, 1, "128x176sw"), (400, 264, 72, 1, "128x224sw,128x64")),
                           torch.bfloat16, "sm90 swapped widths", bias=True, name_prefix="sm90_bf16")
    # One-slab tiles (64 x 8 ... 64 x 64, one consumer warpgroup; by the rule
    # or forced): ragged N (the last tile's rows of C^T), ragged M (C^T's
    # last columns past M), a batch, more tiles than SMs.
    failures += sm90_cases(((64, 4096, 4096, 1, "64x32sw,128x64sk2"), (100, 1000, 136, 1, "128x64"),
                            (17, 4096, 520, 2, "64x16sw"), (13, 1000, 200, 3, "64x8sw"), (21, 9000, 72, 2, "64x16sw"),
                            (33, 264, 200, 3, "64x24sw"), (70, 136, 72, 1, "64x40sw"), (100, 9000, 72, 1, "64x48sw"),
                            (130, 200, 520, 1, "64x56sw"), (64, 72, 64, 2, "64x64")),
                           torch.bfloat16, "sm90 one-slab", bias=True, name_prefix="sm90_bf16", lays=("NN", "TT", "TN"))
    # One-slab tiles as called (a small N; NN, NT, TN): ragged M (the last
    # tile's rows), ragged N (the last tile's columns), a batch, more tiles
    # than SMs, one k-block; the register epilogue (narrow widths) and TMA
    # boxes (64 columns).  Kept small: racecheck of 4096x64x4096 here did
    # not finish with the rest in 210 s.
    failures += sm90_cases(((4096, 64, 256, 1, "sm90_bf16_64x32_nt,64x64"), (1000, 64, 136, 1, "64x32"),
                            (264, 40, 200, 3, "64x24"), (136, 72, 72, 1, "64x40"), (9000, 104, 72, 1, "64x48"),
                            (200, 136, 520, 1, "64x56"), (72, 64, 64, 2, "64x64"), (1024, 8, 64, 1, "64x8"),
                            (2000, 48, 200, 1, "64x16")),
                           torch.bfloat16, "sm90 one-slab as called", bias=True, name_prefix="sm90_bf16_64x",
                           lays=("NT", "NN", "TN"))
    if PART[0] != 0:  # the cases below (ladder steps, simt_fast's configs) run in part 0
        torch.cuda.synchronize()
        print(f"sanitize cases done, {failures} numerical failures")
        raise SystemExit(1 if failures else 0)
    for step in range(1, 9):
        a = torch.randn(65, 63, device="cuda", dtype=torch.float32)
        b = torch.randn(63, 129, device="cuda", dtype=torch.float32)
        torch.ops.tiled.gemm_ladder(a, b, step)
    # simt_fast's configs alone: the large one (109) and its fallback (101):
    # interior blocks on the copy fast path (300 x 600: full 128 x 256
    # blocks), ragged edges, a partial last k-tile; the sliced-K ones for few
    # tiles (96, 97).
    for step in (96, 97, 101, 109):
        for M, N, K in ((300, 600, 200), (65, 129, 63)):
            a = torch.randn(M, K, device="cuda")
            b = torch.randn(K, N, device="cuda")
            out = torch.ops.tiled.gemm_ladder(a, b, step)
            if rel_err(out, a.double() @ b.double()) > 1e-5:
                print(f"BAD ladder step {step} {M}x{N}x{K}")
                failures += 1
    # simt_fast's split-K (few 128x256 tiles, a deep K): equal slices plus a
    # shorter last one, aligned and unaligned operands, with bias.
    for M, N, K in ((33, 2304, 4100), (65, 2305, 4097)):
        a = torch.randn(M, K, device="cuda")
        b = torch.randn(K, N, device="cuda")
        bias = torch.randn(N, device="cuda")
        out = torch.ops.tiled.gemm(a, b, bias)
        if rel_err(out, a.double() @ b.double() + bias.double()) > 1e-5:
            print(f"BAD simt split-K {M}x{N}x{K}")
            failures += 1
    # simt_fast's stream-K (more 128x256 tiles than SMs, not whole waves):
    # ragged edges, a partial last k-tile, with bias.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    M, N, K = 1500, 256 * (-(-(sms + 5) // 12)) - 5, 520
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    bias = torch.randn(N, device="cuda")
    out = torch.ops.tiled.gemm(a, b, bias)
    name = torch.ops.tiled.gemm_kernel_name(a, b)
    if rel_err(out, a.double() @ b.double() + bias.double()) > 1e-5 or name != "simt_fast_streamk":
        print(f"BAD simt stream-K {M}x{N}x{K} ({name})")
        failures += 1
    torch.cuda.synchronize()
    print(f"sanitize cases done, {failures} numerical failures")
    raise SystemExit(1 if failures else 0)


def sm80_main():
    """The sm80 family (mma.sync, cp.async), which dispatch picks only where
    the Hopper family cannot run: forced on by switching the Hopper, skinny
    and staging paths off for this process.  Operands 16-byte aligned (the
    family declines others); ragged against its 128 x 256 / 128 x 128
    tiles, a partial k-block, a batch, with bias, K split over a small
    grid (the last two: partial sums in a workspace, then their sum)."""
    failures = 0
    for dtype, tf32 in ((torch.bfloat16, False), (torch.float16, False), (torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for M, N, K, batch in ((8, 16, 8, None), (64, 136, 72, None), (136, 264, 520, None), (200, 304, 136, None),
                               (72, 136, 64, 2), (136, 200, 1032, None), (72, 136, 1000, 2)):
            for lay in ("NN", "NT", "TN", "TT"):
                lead = () if batch is None else (batch,)
                a = layouts(torch.randn(*lead, M, K, device="cuda", dtype=dtype), lay[0])
                b = layouts(torch.randn(K, N, device="cuda", dtype=dtype), lay[1])
                bias = torch.randn(N, device="cuda", dtype=dtype)
                failures += bad_result(a, b, bias, name_prefix="sm80_")
    torch.cuda.synchronize()
    print(f"sanitize cases done, {failures} numerical failures")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--part" in args:
        i, n = (int(v) for v in args[args.index("--part") + 1].split("/"))
        if not 0 <= i < n:
            raise SystemExit("--part I/N needs 0 <= I < N")
        PART[:] = [i, n]
    if "--sm80" in args:
        os.environ["TILED_DISABLE_KERNELS"] = "hopper,skinny,staging"  # read once, at the first call
        sm80_main()
    main()
