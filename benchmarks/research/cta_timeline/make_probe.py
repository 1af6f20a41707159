"""Writes a copy of csrc/cuda/hopper/gemm_sm90.cuh with clock64 stamps at
steps of a CTA's life (docs/hopper.md, round 33), for probe_main.cu:

    python3 benchmarks/research/cta_timeline/make_probe.py csrc/cuda/hopper/gemm_sm90.cuh /tmp/p/gemm_sm90_probe.cuh [--epilogue]
    cp benchmarks/research/cta_timeline/probe_main.cu /tmp/p/
    nvcc -std=c++17 -O3 -arch=sm_90a -I csrc/cuda/hopper -I csrc [-DCFG128 | -DCFG256] -o /tmp/p/probe /tmp/p/probe_main.cu
    /tmp/p/probe M N K

The stamps (thread 0 of the producer, or of the first consumer warpgroup)
follow the kernel from its first instructions to its last TMA store;
--epilogue replaces the producer's inner stamps by stamps inside the
row-major TMA-store loop of the epilogue.  Each slot keeps its last stamp,
so a stamp inside a loop times the loop's last pass: read them on CTAs of
one tile and one k-block.  Stamps go after (or before) the line holding a
unique piece of text; an edit that removes a piece or makes it ambiguous
stops this script with that piece."""
import sys

src = open(sys.argv[1]).read()
epilogue = "--epilogue" in sys.argv
P, C = "wg_thread == 0 && warpgroup == 0", "threadIdx.x == 128"
# (slot, name, piece of a line, before / after, which thread stamps)
common = [
    (1, "start barrier passed", "if (warpgroup == 0) {", "before", "threadIdx.x == 0"),
    (2, "producer past setmaxnreg", "setmaxnreg_dec<Cfg::kProducerRegs>();", "after", P),
    (8, "consumer past setmaxnreg", "setmaxnreg_inc<Cfg::kConsumerRegs>();", "after", C),
    (7, "TMA stores complete", "if (Cfg::kTmaEpilogue && args.c_tma && wg_thread == 0) bulk_wait_group<0>();", "after", C),
]
producer = [
    (12, "tensormaps prefetched", "prefetch_tensormap(&tmap_b);", "after", "true"),
    (13, "unit's coordinates", "const int bb = args.b_batched ? tc.b : 0;", "after", "true"),
    (14, "stage free", "mbar_wait(empty_bar + 8 *", "after", "true"),
    (3, "stage's loads posted", "mbar_arrive_expect_tx(full, Cfg::kStageBytes);", "after", "true"),
]
stamps = common + ([] if epilogue else producer)
lines = src.split("\n")
ins = {}


def put(k, where, text):
    before, after = ins.setdefault(k, ([], []))
    (before if where == "before" else after).append(text)


names = {0: "CTA start", 10: "(globaltimer at start)", 11: "(globaltimer at the end)"}
for slot, name, piece, where, who in stamps:
    hits = [k for k, l in enumerate(lines) if piece in l]
    assert len(hits) == 1, (piece, hits)
    put(hits[0], where, f"TP({slot}, {who});")
    names[slot] = name
put(next(k for k, l in enumerate(lines) if "const int wg_thread = threadIdx.x % 128;" in l), "after",
    "TP(0, threadIdx.x == 0); TG(10, threadIdx.x == 0);")
put(next(k for k, l in enumerate(lines) if "bulk_wait_group<0>();" in l and "c_tma" in l), "after", f"TG(11, {C});")
# The first consumer wait of the whole-tile mainloop (not the register-A one) and the epilogue call.
wait = [k for k, l in enumerate(lines) if "mbar_wait(full_bar + 8 * stage, phase);" in l and "64 rows of A per wgmma" in lines[k + 1]]
epi = [k for k, l in enumerate(lines) if l.strip() == "epilogue(tc, tile_m);"]
assert len(wait) == 1 and len(epi) == 1, (wait, epi)
put(wait[0], "before", f"TP(15, {C});")
put(wait[0], "after", f"TP(4, {C});")
put(epi[0], "before", f"TP(5, {C});")
put(epi[0], "after", f"TP(6, {C});")
names.update({15: "consumer at a stage's wait", 4: "stage's data arrived", 5: "accumulators done", 6: "epilogue returned"})
if epilogue:
    start = next(k for k, l in enumerate(lines) if "const uint32_t bar = 5 + cw;  // named barriers 5, 6" in l)
    find = lambda text, after: next(k for k in range(after, len(lines)) if text in lines[k])  # noqa: E731
    k_wait = find("bulk_wait_group_read<1>();", start)
    k_bar1 = find("named_barrier_sync(bar, 128);", k_wait)
    k_fence = find("fence_proxy_async_smem();", k_bar1)
    k_bar2 = find("named_barrier_sync(bar, 128);", k_fence)
    k_commit = find("bulk_commit_group();", k_bar2)
    for k, where, slot, name in [(k_wait, "before", 12, "box: buffer wait"), (k_bar1, "after", 13, "box: first barrier"),
                                 (k_fence, "before", 14, "box: filled"), (k_bar2, "after", 3, "box: fenced, second barrier"),
                                 (k_commit, "after", 9, "box: store issued")]:
        put(k, where, f"TP({slot}, {C});")
        names[slot] = name
out = []
for k, l in enumerate(lines):
    before, after = ins.get(k, ([], []))
    out += before + [l] + after
src = "\n".join(out)
table = ", ".join(f'"{names.get(i, "")}"' for i in range(16))
pre = rf'''
__device__ unsigned long long g_probe[4096 * 16];
static const char* const kStampNames[16] = {{{table}}};
#define TP(i, cond) do {{ if (cond) {{ unsigned long long t_; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; }} }} while (0)
#define TG(i, cond) do {{ if (cond) {{ unsigned long long t_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; }} }} while (0)
'''
i = src.index("namespace tiled {")
open(sys.argv[2], "w").write(src[:i] + pre + src[i:])
