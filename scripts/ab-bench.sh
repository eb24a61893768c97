#!/usr/bin/env bash
# A/B of packfa-bench binaries in one lease, alternating (A B A B ... or A B C A B C ...), so
# that clock and machine drift fall on every side alike (bench/NOTES.md, method).
#
#   scripts/ab-bench.sh OUT_DIR RUNS BENCH_A BENCH_B [packfa-bench args...]
#   scripts/ab-bench.sh OUT_DIR RUNS BENCH_A BENCH_B [BENCH_C ...] -- [packfa-bench args...]
#
# A binary may be named and given environment settings: `label=path` or
# `label=env:VAR=value[:env:VAR2=value2]:path` (e.g. a switch read from the environment:
# `mma=env:PACKFA_PREFILL_KERNEL=mma:build/bench/packfa-bench`); unnamed ones are a, b, c, ...
# Writes OUT_DIR/<label>-<i>.json (and .log) and prints, per case, the median over runs of each
# binary's median µs and each ratio to the first (tools/ab_table.py). Each run is under
# `timeout ${AB_TIMEOUT:-300}` seconds.
set -euo pipefail
out="$1"; runs="$2"; shift 2
bins=()
if [[ " $* " == *" -- "* ]]; then
  while [ "$1" != "--" ]; do bins+=("$1"); shift; done
  shift
else
  bins=("$1" "$2"); shift 2
fi
mkdir -p "$out"
labels=()
n=0
for b in "${bins[@]}"; do
  if [[ "$b" == *=* && "${b%%=*}" != */* ]]; then labels+=("${b%%=*}"); else labels+=("$(printf "\\x$(printf %x $((97 + n)))")"); fi
  n=$((n + 1))
done
for i in $(seq 1 "$runs"); do
  for k in "${!bins[@]}"; do
    b="${bins[$k]}"
    [[ "$b" == *=* && "${b%%=*}" != */* ]] && b="${b#*=}"
    envs=()
    while [[ "$b" == env:* ]]; do
      b="${b#env:}"
      envs+=("${b%%:*}")
      b="${b#*:}"
    done
    env ${envs[@]+"${envs[@]}"} timeout "${AB_TIMEOUT:-300}" "$b" --json "$out/${labels[$k]}-$i.json" "$@" > "$out/${labels[$k]}-$i.log"
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/../tools/ab_table.py" "$out" "${labels[@]}"
