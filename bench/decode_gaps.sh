#!/usr/bin/env bash
# A/B of the issue-18 decode-gap switches (bench/NOTES.md, sessions 10 and 11) in one binary.
# Each switch is an environment variable read once per process ("0" off, other values on), so
# old and new run alternately in one lease; defaults since session 12 (bisected by part 0):
#   PACKFA_SPLIT_ROUNDS=1  (off by default) batches: the split count that fills whole rounds of resident blocks
#   PACKFA_COMBINE_COLS=0  (on by default) > 64 splits: fa_combine_kernel instead of fa_combine_col_kernel
# fp16-Q on tensor cores and the length count after the first copies are not switches (build
# options PACKFA_NO_F16Q_MMA / PACKFA_LEN_COUNT_EARLY restore the old code). The third switch of
# session 12, PACKFA_PREFETCH (an L2 prefetch before the PDL wait), was removed in session 13
# (decision "decode-prefetch-removed", bench/NOTES.md).
#
#   bench/decode_gaps.sh [ROUNDS]        (B=path/to/packfa-bench, default build-gpu/bench/packfa-bench)
#
# Prints the sweep table rows of every run ("us" column = spin-differenced device time of one
# call; the last column names the kernel, splits, row groups, combine kernel and the switches
# in effect: "rounds").
set -uo pipefail
B="${B:-build-gpu/bench/packfa-bench}"
ROUNDS="${1:-2}"
run() {  # run LABEL [ENV=VALUE...] -- ARGS...   (no ENV: the defaults)
  local label="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  printf '%-40s ' "$label"
  env ${envs[@]+"${envs[@]}"} "$B" --no-baseline --reps 60 "$@" </dev/null 2>&1 | grep -E '^[0-9]+ ' | head -1
}
ALL="PACKFA_SPLIT_ROUNDS=1 PACKFA_COMBINE_COLS=0"
for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r"
  # 0. the default-sweep cases that ran 1.09-1.55x slower with the session-10 switches on:
  #    defaults, both switches flipped, each one alone
  while read -r what args; do
    run "$what default" -- $args
    run "$what both" $ALL -- $args
    run "$what rounds=1" PACKFA_SPLIT_ROUNDS=1 -- $args
    run "$what cols=0" PACKFA_COMBINE_COLS=0 -- $args
  done <<'EOF'
kv4k-1row-q8_0_planar --kv 4096 --heads 32 --kv-heads 8 --v q8_0_planar
kv4k-1row-q8_0 --kv 4096 --heads 32 --kv-heads 8 --v q8_0
kv32k-1row-q4_0 --kv 32768 --heads 32 --kv-heads 8 --v q4_0
b16x4k-q8_0 --kv 4096 --heads 32 --kv-heads 8 --batch 16 --v q8_0
nq4-b16x32k-q4_0 --kv 32768 --heads 32 --kv-heads 8 --batch 16 --nq 4 --v q4_0
EOF
  # 1. D 256, 16/2 heads, kv 32k: column combine vs the one-block-per-row combine, split counts
  for v in q8_0 q8_0_planar; do
    run "d256 16/2 32k $v cols=0" PACKFA_COMBINE_COLS=0 -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --v $v
    run "d256 16/2 32k $v default" -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --v $v
  done
  for s in 64 128 256; do
    run "d256 16/2 32k q8_0 splits=$s cols=0" PACKFA_COMBINE_COLS=0 -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --splits $s
    run "d256 16/2 32k q8_0 splits=$s default" -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --splits $s
  done
  run "d256 24/4 128k cols=0" PACKFA_COMBINE_COLS=0 -- --d 256 --heads 24 --kv-heads 4 --kv 131072
  run "d256 24/4 128k default" -- --d 256 --heads 24 --kv-heads 4 --kv 131072
  # 2. short sequences: batch split rounds
  for bt in 8 16; do
    run "batch $bt x 4k uniform rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 4096 --batch $bt --uniform
    run "batch $bt x 4k uniform default" -- --kv 4096 --batch $bt --uniform
    run "batch $bt x 4k varied rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 4096 --batch $bt
    run "batch $bt x 4k varied default" -- --kv 4096 --batch $bt
  done
  run "batch 16 x 32k varied rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 32768 --batch 16
  run "batch 16 x 32k varied default" -- --kv 32768 --batch 16
  for kv in 4096 32768; do run "kv $kv one row default" -- --kv $kv --heads 32 --kv-heads 8; done
  # 3. nq 2..16 (no change expected; defaults)
  for nq in 1 2 4 8 16; do run "nq $nq kv 32k default" -- --kv 32768 --nq $nq --heads 32 --kv-heads 8; done
  # 4. fp16-Q dot (tensor cores, the default since session 10) against the int8 dot; the lane
  #    path needs a PACKFA_NO_F16Q_MMA build (B=that build's packfa-bench)
  for dot in f16 int8; do run "kv 128k dot $dot default" -- --kv 131072 --dot $dot; done
  run "kv 32k nq 4 dot f16 default" -- --kv 32768 --nq 4 --dot f16
done
# the pack -> attention -> combine chain with PDL
echo "# chain"; "$B" --chain-only 2>&1 | tail -2
