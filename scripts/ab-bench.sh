#!/usr/bin/env bash
# A/B of two packfa-bench binaries in one lease, alternating (A B A B ...), so that clock and
# machine drift fall on both sides alike (bench/NOTES.md, method).
#
#   scripts/ab-bench.sh OUT_DIR RUNS BENCH_A BENCH_B [packfa-bench args...]
#
# Writes OUT_DIR/{a,b}-<i>.json and prints, per case, the median over runs of each binary's
# median µs and the ratio B/A (tools/ab_table.py).
set -euo pipefail
out="$1"; runs="$2"; a="$3"; b="$4"; shift 4
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
  "$a" --json "$out/a-$i.json" "$@" > "$out/a-$i.log"
  "$b" --json "$out/b-$i.json" "$@" > "$out/b-$i.log"
done
python3 "$(dirname "${BASH_SOURCE[0]}")/../tools/ab_table.py" "$out"
