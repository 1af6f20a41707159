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
the end.  Each slot keeps its last stamp, so the loop stamps (3, 4, 12-15)
time the first iteration only for CTAs of one tile and one k-block.  The
anchors are lines of the kernel; an edit there makes this script stop
with the anchor it missed."""
import sys
src = open(sys.argv[1]).read()
pre = r'''
__device__ unsigned long long g_probe[4096 * 16];
#define TP(i, cond) do { if (cond) { unsigned long long t_; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; } } while (0)
#define TG(i, cond) do { if (cond) { unsigned long long t_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); g_probe[blockIdx.x * 16 + (i)] = t_; } } while (0)
'''
edits = [
  ("  const int wg_thread = threadIdx.x % 128;\n", "TP(0, threadIdx.x == 0); TG(10, threadIdx.x == 0);\n", "after"),
  ("  // Work is dealt to clusters; both CTAs", "  TP(1, threadIdx.x == 0);\n", "before"),
  ("    if constexpr (!Cfg::kOneSlab) setmaxnreg_dec<Cfg::kProducerRegs>();\n", "TP(2, wg_thread == 0);\n", "after"),
  ("          mbar_arrive_expect_tx(full, Cfg::kStageBytes);\n", "TP(3, true);\n", "after"),
  ("    if constexpr (!Cfg::kOneSlab) setmaxnreg_inc<Cfg::kConsumerRegs>();\n", "TP(8, threadIdx.x == 128);\n", "after"),
  ("          mbar_wait(full_bar + 8 * stage, phase);\n          // 64 rows of A per wgmma", None, "wait"),
  ("      epilogue(tc, tile_m);\n    }\n", None, "epi"),
  ("      prefetch_tensormap(&tmap_b);\n", "TP(12, true);\n", "after"),
  ("        const int bb = args.b_batched ? tc.b : 0;\n", "TP(13, true);\n", "after"),
  ("          mbar_wait(empty_bar + 8 * stage, phase ^ 1);\n", "TP(14, true);\n", "after"),
  ("    if (Cfg::kTmaEpilogue && args.c_tma && wg_thread == 0) bulk_wait_group<0>();\n", "TP(7, threadIdx.x == 128); TG(11, threadIdx.x == 128);\n", "after"),
]
for anchor, ins, how in edits:
    assert src.count(anchor) == 1, anchor
    if how == "after":
        src = src.replace(anchor, anchor + ins)
    elif how == "before":
        src = src.replace(anchor, ins + anchor)
    elif how == "wait":
        src = src.replace(anchor, "          TP(15, threadIdx.x == 128);\n          mbar_wait(full_bar + 8 * stage, phase);\n          TP(4, threadIdx.x == 128);\n          // 64 rows of A per wgmma")
    elif how == "epi":
        src = src.replace(anchor, "      TP(5, threadIdx.x == 128);\n      epilogue(tc, tile_m);\n      TP(6, threadIdx.x == 128);\n    }\n")
i = src.index("namespace tiled {")
src = src[:i] + pre + src[i:]
open(sys.argv[2], "w").write(src)
