#!/usr/bin/env bash
# A/B of decision "wgmma-split" (docs/prefill.md) in one binary: every case under the three
# paths the environment selects — decode kernel row groups (PACKFA_ROWS_SPLIT=0
# PACKFA_WGMMA_SPLIT=0), the warp-MMA rows split (PACKFA_ROWS_SPLIT=1 PACKFA_WGMMA_SPLIT=0;
# rows > 16 a KV head only) and the wgmma kernel in key splits (PACKFA_WGMMA_SPLIT=1) —
# alternated ROUNDS times (default 2); prints packfa-bench's line of each run.
#   B=build-gpu/bench/packfa-bench bench/wgmma_split.sh [ROUNDS] [CASE ...]
# CASE: packfa-bench flags of one case ("--nq 16 --kv 8192"); none: the list below.
set -uo pipefail
B=${B:-build-gpu/bench/packfa-bench}
ROUNDS=${1:-2}
shift || true
cases=(
  "--nq 16 --kv 32768"                       # MTP: 64 rows a KV head (dual)
  "--nq 16 --kv 131072"
  "--nq 16 --kv 131072 --v q4_0"
  "--nq 16 --kv 32768 --v f16"
  "--nq 8 --kv 32768"                        # 32 rows (decision "wgmma-split-mid-rows")
  "--nq 5 --kv 32768"                        # 20 rows
  "--nq 8 --kv 32768 --v q4_0"               # mid rows, V formats the rule leaves out
  "--nq 8 --kv 32768 --v q8_0_planar"
  "--nq 8 --kv 32768 --d 64"                 # mid rows, not measured yet (full build)
  "--nq 8 --kv 32768 --dot f16"
  "--nq 6 --kv 32768 --batch 2 --uniform"    # decision "wgmma-split-two-rounds"
  "--nq 6 --kv 32768 --batch 4 --uniform --v q4_0"
  "--nq 32 --kv 32768"                       # 128 rows (two warpgroups, own rows)
  "--nq 4 --kv 32768"                        # 16 rows: decode's widest class
  "--nq 16 --kv 4096"                        # below the rule's 8192-key floor (session 15: equal
  "--nq 16 --kv 2048"                        #   at 4k on the H200, before the kernel's later
  "--nq 8 --kv 4096"                         #   speed-ups); nq 16 x 4k is 0.93x of SDPA on decode
  "--nq 8 --kv 4096 --v f16"                 #   row groups (H100, 63433d1)
  "--nq 8 --kv 1024"
  "--nq 16 --kv 32768 --d 64"
  "--nq 16 --kv 32768 --dot f16"
  "--nq 1 --kv 32768"                        # one row: 4 rows a KV head
  "--nq 1 --kv 131072"
  "--nq 1 --kv 4096 --batch 8 --uniform"
  "--d 256 --heads 16 --kv-heads 2 --kv 32768"   # issue 18's D 256 few-heads case: 8 rows
  "--d 256 --heads 16 --kv-heads 2 --kv 131072"
  "--d 256 --heads 24 --kv-heads 4 --kv 131072"
  "--d 256 --heads 16 --kv-heads 2 --nq 4 --kv 32768"
)
[ $# -gt 0 ] && cases=("$@")
variants=("PACKFA_ROWS_SPLIT=0 PACKFA_WGMMA_SPLIT=0" "PACKFA_ROWS_SPLIT=1 PACKFA_WGMMA_SPLIT=0" "PACKFA_WGMMA_SPLIT=1")
for ((r = 0; r < ROUNDS; ++r)); do
  for c in "${cases[@]}"; do
    for v in "${variants[@]}"; do
      line=$(env $v "$B" --no-baseline --reps 100 --heads "$(sed -n 's/.*--heads \([0-9]*\).*/\1/p' <<<"$c" | grep . || echo 32)" \
               $(sed 's/--heads [0-9]*//' <<<"$c") 2>&1 | grep -E '^(64|128|256) ' | head -1)
      echo "round $r | $c | $v | $line"
    done
  done
done
