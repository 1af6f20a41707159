#!/usr/bin/env bash
# One call on the GPU machine: build, full tests, benchmarks.  Stages are
# picked with STAGES (default "build test bench ladder"; also wheel + abi,
# sass, gdb, reliability, sm80, tune, dist, ab, cluster, sweep, explore, ncu), so a long session can be split over two
# calls on the same warm machine:
#   STAGES="build test" bash benchmarks/device_run.sh
#   STAGES="bench ladder" bash benchmarks/device_run.sh
# Everything lands in $OUT (default ./device_out): run.log, results/.
set -uo pipefail
OUT="${OUT:-$PWD/device_out}"
mkdir -p "$OUT/results"
LOG="$OUT/run.log"
STAGES="${STAGES:-build test bench ladder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MAX_JOBS="${MAX_JOBS:-16}" TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-8.0+PTX;9.0a}"
export TILED_COMMIT="${TILED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
PY=${PYTHON:-python3}

say() { echo "=== $(date +%T) $*" | tee -a "$LOG"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }

say "stages: $STAGES"
if has build; then
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
    $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    nvcc --version | tail -1; } >>"$LOG" 2>&1
  say "build"
  t0=$(date +%s)
  TILED_PTXAS_VERBOSE=1 $PY setup.py build_ext --inplace >"$OUT/build_full.log" 2>&1
  rc=$?
  grep -E "error|warning|ptxas info.*Compiling entry|registers|spill" "$OUT/build_full.log" \
    | grep -v "0 bytes spill stores, 0 bytes spill loads" | tail -150 >>"$LOG"
  [ $rc -eq 0 ] || grep -B2 -A6 -E "error|FAILED" "$OUT/build_full.log" | head -80 >>"$LOG"
  rm -f "$OUT/build_full.log"
  say "build rc=$rc in $(( $(date +%s) - t0 )) s"
  nm -C torch_tiled_gemm/_C*.so | grep -E "_M_insert<long>" >>"$LOG"
  [ $rc -eq 0 ] || exit $rc
fi
if has sass; then
  so=$(ls torch_tiled_gemm/_C*.so)
  cuobjdump --dump-sass "$so" > /tmp/sass.txt 2>&1
  say "sass: per-kernel counts of HGMMA / FFMA / LDS / LDG / LDL / STL"
  awk '/Function :/{name=$3} /HGMMA/{h[name]++} /FFMA/{f[name]++} /LDL|STL/{l[name]++}
       END{for (n in f) printf "%-90s FFMA %6d HGMMA %5d LDL/STL %d\n", substr(n,1,90), f[n], h[n], l[n];
           for (n in h) if (!(n in f)) printf "%-90s FFMA %6d HGMMA %5d LDL/STL %d\n", substr(n,1,90), 0, h[n], l[n]}' \
       /tmp/sass.txt >>"$LOG"
fi
if has wheel; then
  # A wheel built elsewhere (dist/, carried), installed without rebuilding;
  # the later stages run in a copy of the checkout without the package's
  # sources, so they import the installed wheel (docs/abi.md).  Idempotent,
  # so that several runs of this script in one call can share it.
  WHEEL=$(ls "$PWD"/dist/torch_tiled_gemm-*.whl | head -1)
  site=/tmp/site-$(sha256sum "$WHEEL" | cut -c1-12)
  if [ ! -d "$site/torch_tiled_gemm" ]; then
    say "wheel: install $(basename "$WHEEL") into $site"
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$site" "$WHEEL" $(ls .whl/*.whl 2>/dev/null) >>"$LOG" 2>&1
  fi
  # (copied again when a file here is newer than the last copy: a new call's tree)
  if [ ! -f /tmp/checkout/.copied ] || [ -n "$(find . -path ./dist -prune -o -path ./.whl -prune -o -type f \
       -newer /tmp/checkout/.copied -print -quit)" ]; then
    rm -rf /tmp/checkout && mkdir -p /tmp/checkout
    tar -cf - --exclude=./torch_tiled_gemm --exclude=./dist --exclude=./.whl --exclude=./build --exclude=./.git --exclude="./.venv*" . \
      | tar -xf - -C /tmp/checkout
    touch /tmp/checkout/.copied
  fi
  export PYTHONPATH=$site
  cd /tmp/checkout
fi
if has abi; then
  # The full suite against the installed wheel, added to an ABI record
  # (ABI_RECORD: an existing record of the same wheel to append to).
  rec="$OUT/results/abi.json"
  [ -n "${ABI_RECORD:-}" ] && cp "$ABI_RECORD" "$rec"
  say "abi: suite against $(basename "$WHEEL")"
  # torch's CPU threads shared out among the workers (16 each would oversubscribe the cores)
  OMP_NUM_THREADS=$(( ($(nproc) + ${PYTEST_WORKERS:-8} - 1) / ${PYTEST_WORKERS:-8} )) timeout ${TEST_TIMEOUT:-540} $PY benchmarks/abi_record.py --wheel "$WHEEL" --built-with-torch "${BUILT_WITH:-unknown}" \
    --out "$rec" --log "$OUT/pytest.log" -- -q -rfEs -p timeout --timeout=300 -n ${PYTEST_WORKERS:-8} --dist loadfile tests >"$OUT/tests.log" 2>&1
  rc=$?
  grep -E "^(FAILED|ERROR)|passed|failed|crashed|node down" "$OUT/tests.log" | tail -60 >>"$LOG"
  say "abi rc=$rc (full output: tests.log)"
fi
if has test; then
  # New kernels first, each alone under a hard timeout: a barrier bug hangs
  # rather than fails.  A family whose smoke test fails is switched off
  # (TILED_DISABLE_KERNELS) for the rest of the run, and the log says so.
  say "smoke: hopper"
  timeout ${SMOKE_TIMEOUT:-180} $PY -m pytest -x -q tests/test_hopper.py -k "test_a_" >>"$LOG" 2>&1
  rc=$?; say "smoke hopper rc=$rc"
  [ $rc -eq 0 ] || export TILED_DISABLE_KERNELS="hopper${TILED_DISABLE_KERNELS:+,$TILED_DISABLE_KERNELS}"
  say "smoke: simt_fast"
  timeout ${SMOKE_TIMEOUT:-180} $PY -m pytest -x -q tests/test_ladder.py -k "simt_fast" >>"$LOG" 2>&1
  rc=$?; say "smoke simt_fast rc=$rc"
  [ $rc -eq 0 ] || export TILED_DISABLE_KERNELS="simt_fast${TILED_DISABLE_KERNELS:+,$TILED_DISABLE_KERNELS}"
  say "tests (TILED_DISABLE_KERNELS=${TILED_DISABLE_KERNELS:-})"
  timeout ${TEST_TIMEOUT:-480} $PY -m pytest -q -rfEs -p timeout --timeout=120 -n ${PYTEST_WORKERS:-4} --dist loadfile \
    tests ${PYTEST_ARGS:-} >"$OUT/tests.log" 2>&1
  rc=$?
  grep -E "^(FAILED|ERROR)|passed|failed|crashed|node down" "$OUT/tests.log" | tail -60 >>"$LOG"
  say "tests rc=$rc (full output: tests.log)"
fi
if has gdb; then
  # C++ backtrace of a crash, with the CUDA debugger (the image has no gdb).
  say "gdb: ${GDB_SNIPPET:-}"
  cuda-gdb -batch -ex run -ex bt --args $PY -c "${GDB_SNIPPET:-import torch}" 2>&1 | grep -vE "^\[New Thread|^\[Thread" | tail -40 >>"$LOG"
fi
if has reliability; then
  # OpInfo samples, the fuzz test at scale, compute-sanitizer (memcheck,
  # racecheck, initcheck, synccheck) over every kernel family, tf32's error
  # against cuBLAS: results/reliability-*.json (RELIABILITY_ARGS, e.g.
  # "--skip sanitizer" or "--tools memcheck --merge", splits it over calls).
  say "reliability ${RELIABILITY_ARGS:-}"
  timeout ${RELIABILITY_TIMEOUT:-580} $PY benchmarks/reliability.py --out "$OUT/results" ${RELIABILITY_ARGS:-} >>"$LOG" 2>&1
  say "reliability rc=$?"
fi
if has sm80; then
  # The sm80 family on this Hopper GPU with the Hopper family off: its tests
  # (forced, staged, split K), memcheck and racecheck over its sanitizer
  # cases beside them, then its record (results/sm80-*.json; SM80_ARGS, e.g.
  # "--time-budget 90 --dtype bf16").  About 4-5 minutes on an H100.
  say "sm80: tests and sanitizers"
  timeout 300 $PY benchmarks/reliability.py --out "$OUT/sm80-sanitizer" --skip opinfo,fuzz,tf32 \
    --tools memcheck,racecheck --sm80-only --jobs 2 >"$OUT/sm80-sanitizer.log" 2>&1 &
  timeout 300 $PY -m pytest -q -p no:cacheprovider -n 5 tests/test_sm80.py >>"$LOG" 2>&1
  say "sm80 tests rc=$?"
  wait
  grep -E "^\('[a-z]+_sm80'" "$OUT/sm80-sanitizer.log" >>"$LOG"  # ('memcheck_sm80', None): 0 (20 s)
  say "sm80: record ${SM80_ARGS:-}"
  timeout ${SM80_TIMEOUT:-300} $PY benchmarks/sm80_record.py --out "$OUT/results" ${SM80_ARGS:---time-budget 90} \
    >"$OUT/sm80_record.log" 2>&1
  rc=$?
  grep -vE "^(bf16|tf32|fp16) " "$OUT/sm80_record.log" >>"$LOG"
  say "sm80 record rc=$rc (per case: sm80_record.log)"
fi
if has tune; then
  # The offline tuner, resumed from the repository's raw file for this GPU
  # (benchmarks/results/tune-<gpu>.jsonl, copied into $OUT/results and
  # appended to there) within TUNE_BUDGET seconds (default 300) for
  # TUNE_DTYPES (default bf16,fp16,tf32); the rebuilt table lands in
  # $OUT/results too, and is installed next to the extension for the
  # stages after it.  Then the held-out part with and without the table,
  # twice, alternating (docs/dispatch.md).
  read -r gpu_file table < <($PY -c "import torch, torch_tiled_gemm.tune as t; g = torch.cuda.get_device_name(); \
print(t.table_name(g)[:-4], t.default_table(g))")
  raw="$OUT/results/tune-$gpu_file.jsonl"
  [ -f "$raw" ] || cp "benchmarks/results/tune-$gpu_file.jsonl" "$raw" 2>/dev/null || true
  say "tune: ${TUNE_DTYPES:-bf16,fp16,tf32} for ${TUNE_BUDGET:-300} s into $raw"
  timeout $(( ${TUNE_BUDGET:-300} + 120 )) $PY -m torch_tiled_gemm.tune --dtypes "${TUNE_DTYPES:-bf16,fp16,tf32}" \
    --time-budget "${TUNE_BUDGET:-300}" --raw "$raw" --table "$table" >"$OUT/tune.log" 2>&1
  say "tune rc=$? ($(grep -c "x torch, best" "$OUT/tune.log") GEMMs timed; tune.log)"
  cp "$table" "$OUT/results/"
  for i in 1 2; do
    for t in rules table; do
      TILED_DISABLE_KERNELS=$([ $t = rules ] && echo table) timeout 120 $PY -m torch_tiled_gemm.bench --corpus \
        --set heldout --dtype "${HELDOUT_DTYPE:-bf16}" --rounds 3 --out "$OUT/results/heldout-$t$i" >"$OUT/heldout-$t$i.log" 2>&1
      grep -m1 "geomean ratio" "$OUT/heldout-$t$i.log" | sed "s/^/heldout $t $i: /" >>"$LOG"
    done
  done
fi
if has bench; then
  say "bench"
  timeout ${BENCH_TIMEOUT:-420} $PY -m torch_tiled_gemm.bench ${BENCH_ARGS:-} --out "$OUT/results" >>"$LOG" 2>&1
  say "bench rc=$?"
fi
if has cluster; then
  say "bench: 2-CTA cluster variant (TILED_CONFIG=128x256c2), quick shapes"
  TILED_CONFIG=128x256c2 timeout 200 $PY -m torch_tiled_gemm.bench --quick --tag cluster2 --out "$OUT/results" 2>/dev/null \
    | grep -E "^\| gemm \| (bf16|fp16)|geometric" >>"$LOG"
fi
if has dist; then
  # Two or more GPUs: NCCL tests and the torchrun example (multicast stays off).
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  ngpu=$($PY -c "import torch; print(torch.cuda.device_count())")
  say "dist: $ngpu GPUs"
  timeout 240 $PY -m pytest -q -rs tests/test_distributed.py tests/test_cuda_runtime.py 2>&1 | tail -15 >>"$LOG"
  if [ "$ngpu" -ge 2 ]; then
    timeout 200 torchrun --nproc-per-node 2 examples/train_distributed.py 2>&1 | grep -vE "^(W|I)[0-9]{4}" | tail -30 >>"$LOG"
    say "dist example rc=${PIPESTATUS[0]}"
  fi
fi
if has ab; then
  # A/B of opt-in kernel variants: AB_VARIANTS="tag:VAR=val,VAR2=val tag2:..."
  # (quick shapes; compact rows into the log, files outside $OUT).
  for v in ${AB_VARIANTS:-}; do
    tag=${v%%:*}; envs=${v#*:}
    say "ab: $tag ($envs)"
    env $(echo "$envs" | tr ',' ' ') timeout 200 $PY -m torch_tiled_gemm.bench ${AB_ARGS:---quick} --tag "$tag" --out /tmp/ab 2>/dev/null \
      | grep -E "^\| gemm \| (bf16|fp16|tf32)|^\| linear|geometric" | cut -d'|' -f3-8,11 >>"$LOG"
  done
fi
if has ladder; then
  say "ladder"
  timeout ${LADDER_TIMEOUT:-300} $PY benchmarks/ladder.py --out "$OUT/results" >>"$LOG" 2>&1
  say "ladder rc=$?"
fi
if has sweep; then
  say "sweep (${SWEEP_DTYPE:-bf16})"
  timeout ${SWEEP_TIMEOUT:-300} $PY benchmarks/sweep.py --dtype "${SWEEP_DTYPE:-bf16}" --out "$OUT/results" >>"$LOG" 2>&1
  say "sweep rc=$?"
fi
if has explore; then
  # Configuration A/B on chosen shapes, one process: EXPLORE="cases... -- variants..."
  # e.g. EXPLORE="4096x4096x4096 128x4096x4096:NT -- base:- coop:128x256"
  say "explore: ${EXPLORE:-}"
  cases=${EXPLORE%% -- *}; variants=${EXPLORE#* -- }
  timeout ${EXPLORE_TIMEOUT:-300} $PY benchmarks/explore.py --dtype "${EXPLORE_DTYPE:-bf16}" --cases $cases \
    --variants $variants --out "$OUT/results" >>"$LOG" 2>&1
  say "explore rc=$?"
fi
if has ncu; then
  # Nsight Compute on chosen cases: NCU_CASES="M,N,K,layout,ENV=v;ENV2=v ..." (env part optional;
  # PROFILE_DTYPE=fp32 / PROFILE_OP=torch pick profile_case.py's dtype / cuBLAS's side),
  # the first matching kernel after 3 warm-up calls; one text report per case in $OUT/ncu.
  mkdir -p "$OUT/ncu"
  for c in ${NCU_CASES:-}; do
    IFS=, read -r m n k lay envs <<<"$c"
    name="${m}x${n}x${k}-${lay}${envs:+-$(echo "$envs" | tr ';=' '_-')}"
    say "ncu: $name"
    env $(echo "${envs:-}" | tr ';' ' ') timeout 120 ncu --clock-control none -k "regex:${NCU_KERNELS:-sm90_gemm|skinny_kernel|simt|ladder}" \
      --launch-skip 3 --launch-count 1 --set full --import-source no \
      ${NCU_SOURCE:+-o "/tmp/$name"} $PY benchmarks/research/profile_case.py "$m" "$n" "$k" --layout "$lay" --iters 5 \
      >"$OUT/ncu/$name.txt" 2>&1
    say "ncu rc=$? ($(grep -m1 -E 'Duration' "$OUT/ncu/$name.txt" | tr -s ' '))"
    if [ -n "${NCU_SOURCE:-}" ] && [ -f "/tmp/$name.ncu-rep" ]; then
      # Per-SASS-instruction stall samples (where the warps wait) and every collected metric.
      ncu -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu/$name.sass.csv" 2>&1
      ncu -i "/tmp/$name.ncu-rep" --page raw --csv >"$OUT/ncu/$name.raw.csv" 2>&1
      ncu -i "/tmp/$name.ncu-rep" --page details >"$OUT/ncu/$name.txt" 2>&1
    fi
  done
fi
# The device tool returns at most 8 files: pack the result folders (merged
# with what an earlier call for the same commit packed into $OUT).
for d in results ncu; do
  if [ -d "$OUT/$d" ] && [ -n "$(ls -A "$OUT/$d")" ]; then
    [ -f "$OUT/$d.tgz" ] && tar -xzf "$OUT/$d.tgz" -C "$OUT" --skip-old-files --wildcards "*${TILED_COMMIT}*" 2>/dev/null
    tar -czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "${OUT:?}/$d"
  fi
done
say "done"
