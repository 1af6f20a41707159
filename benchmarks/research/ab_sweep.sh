#!/usr/bin/env bash
# A/B of dispatch settings on the M sweep (benchmarks/sweep.py --parts m):
#   AB="tag:VAR=val,VAR2=val tag2:VAR=val" M_VALUES=1,16,64 bash benchmarks/research/ab_sweep.sh
# One JSON per variant in $OUT/results (sweep-...-<commit>-<tag>.json) and
# a compact table (M, N, layout, ratio, kernel per variant) on stdout.
set -uo pipefail
OUT="${OUT:-$PWD/device_out}"
PY=${PYTHON:-python3}
for v in ${AB:-}; do
  tag=${v%%:*}; envs=${v#*:}
  [ "$envs" = "-" ] && envs=""
  echo "=== ab $tag ($envs)"
  env $(echo "$envs" | tr ',' ' ') timeout ${AB_TIMEOUT:-240} $PY benchmarks/sweep.py --parts m \
    ${M_VALUES:+--m-values $M_VALUES} --dtype "${SWEEP_DTYPE:-bf16}" --tag="-$tag" --out "$OUT/results" \
    | grep -E "^N[NT] M="
done
