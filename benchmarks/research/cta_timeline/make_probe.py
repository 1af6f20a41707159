"""Writes a copy of csrc/cuda/hopper/gemm_sm90.cuh with clock64 stamps at
each step of a CTA's life (docs/hopper.md, round 33), for probe_main.cu:

    python3 benchmarks/research/cta_timeline/make_probe.py csrc/cuda/hopper/gemm_sm90.cuh /tmp/p/gemm_sm90_probe.cuh
    cp benchmarks/research/cta_timeline/probe_main.cu /tmp/p/
    nvcc -std=c++17 -O3 -arch=sm_90a -I csrc/cuda/hopper -I csrc [-DCFG128] -o /tmp/p/probe /tmp/p/probe_main.cu
    /tmp/p/probe M N K

Stamps: 0 the CTA's first instructions, 1 barriers set up, 2 producer past
setmaxnreg, 12 its tensormap prefetch, 13 a unit's coordinates, 14 a
stage free, 3 a stage's loads posted, 8 consumer past setmaxnreg, 15 / 4
a consumer before / after a stage's wait, 5 / 6 before / after the
epilogue, 7 the TMA stores complete; 10 / 11 globaltimer at the start and
the end.  Each slot keeps its last stamp, so the loop stamps (3, 4, 13-15)
time the first iteration only for CTAs of one tile and one k-block.  The
anchors are pieces of the kernel's lines; an edit that removes one or makes
it ambiguous stops this script with that piece."""
import sys
src = open(sys.argv[1]).read()
pre = r'''
__device__ unsigned long long g_probe[4096 * 16];
#define TP(i, cond) do { if (cond) { unsigned long long t_; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; } } while (0)
#define TG(i, cond) do { if (cond) { unsigned long long t_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; } } while (0)
'''
# (a unique piece of one line of the kernel, where the stamp goes, the stamp)
edits = [
    ("const int wg_thread = threadIdx.x % 128;", "after", "TP(0, threadIdx.x == 0); TG(10, threadIdx.x == 0);"),
    ("if (warpgroup == 0) {", "before", "TP(1, threadIdx.x == 0);"),
    ("setmaxnreg_dec<Cfg::kProducerRegs>();", "after", "TP(2, wg_thread == 0);"),
    ("mbar_arrive_expect_tx(full, Cfg::kStageBytes);", "after", "TP(3, true);"),
    ("setmaxnreg_inc<Cfg::kConsumerRegs>();", "after", "TP(8, threadIdx.x == 128);"),
    ("prefetch_tensormap(&tmap_b);", "after", "TP(12, true);"),
    ("const int bb = args.b_batched ? tc.b : 0;", "after", "TP(13, true);"),
    ("mbar_wait(empty_bar + 8 *", "after", "TP(14, true);"),
    ("if (Cfg::kTmaEpilogue && args.c_tma && wg_thread == 0) bulk_wait_group<0>();", "after",
     "TP(7, threadIdx.x == 128); TG(11, threadIdx.x == 128);"),
]
lines = src.split("\n")
# The first consumer wait of the mainloop (not the register-A one) and the whole-tile epilogue call.
wait = [k for k, l in enumerate(lines) if "mbar_wait(full_bar + 8 * stage, phase);" in l and "64 rows of A per wgmma" in lines[k + 1]]
epi = [k for k, l in enumerate(lines) if l.strip() == "epilogue(tc, tile_m);"]
assert len(wait) == 1 and len(epi) == 1, (wait, epi)
inserts = {wait[0]: (["TP(15, threadIdx.x == 128);"], ["TP(4, threadIdx.x == 128);"]),
           epi[0]: (["TP(5, threadIdx.x == 128);"], ["TP(6, threadIdx.x == 128);"])}
for piece, where, stamp in edits:
    hits = [k for k, l in enumerate(lines) if piece in l]
    assert len(hits) == 1, (piece, hits)
    before, after = inserts.setdefault(hits[0], ([], []))
    (before if where == "before" else after).append(stamp)
out = []
for k, l in enumerate(lines):
    before, after = inserts.get(k, ([], []))
    out += before + [l] + after
src = "\n".join(out)
i = src.index("namespace tiled {")
src = src[:i] + pre + src[i:]
open(sys.argv[2], "w").write(src)
