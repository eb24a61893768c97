#!/usr/bin/env bash
# A/B of the issue-18 decode-gap changes (bench/NOTES.md, session 10) in one binary: each switch
# is an environment variable read once per process, so old and new run alternately in one lease.
#
#   bench/decode_gaps.sh [ROUNDS]        (B=path/to/packfa-bench, default build-gpu/bench/packfa-bench)
#
# Prints the sweep table rows of every run ("us" column = spin-differenced device time of one
# call; the last column names the kernel, splits, row groups and combine kernel).
set -uo pipefail
B="${B:-build-gpu/bench/packfa-bench}"
ROUNDS="${1:-2}"
run() {  # run LABEL ENV... -- ARGS...
  local label="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  printf '%-34s ' "$label"
  env "${envs[@]}" "$B" --no-baseline --reps 60 "$@" 2>&1 | grep -E '^[0-9]+ ' | head -1
}
for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r"
  # 1. D 256, 16/2 heads, kv 32k: column combine vs the one-block-per-row combine, split counts
  for v in q8_0 q8_0_planar; do
    run "d256 16/2 32k $v cols=1" PACKFA_COMBINE_COLS=1 -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --v $v
    run "d256 16/2 32k $v cols=0" PACKFA_COMBINE_COLS=0 -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --v $v
  done
  for s in 64 128 256; do
    run "d256 16/2 32k q8_0 splits=$s" PACKFA_COMBINE_COLS=1 -- --d 256 --heads 16 --kv-heads 2 --kv 32768 --splits $s
  done
  run "d256 24/4 128k cols=1" PACKFA_COMBINE_COLS=1 -- --d 256 --heads 24 --kv-heads 4 --kv 131072
  run "d256 24/4 128k cols=0" PACKFA_COMBINE_COLS=0 -- --d 256 --heads 24 --kv-heads 4 --kv 131072
  # 2. short sequences: batch split rounds; the pre-wait prefetch (no effect expected here: the
  #    spin kernel in front of each call does not trigger its dependents early)
  for bt in 8 16; do
    run "batch $bt x 4k uniform rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 4096 --batch $bt --uniform
    run "batch $bt x 4k uniform rounds=0" PACKFA_SPLIT_ROUNDS=0 -- --kv 4096 --batch $bt --uniform
    run "batch $bt x 4k varied rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 4096 --batch $bt
    run "batch $bt x 4k varied rounds=0" PACKFA_SPLIT_ROUNDS=0 -- --kv 4096 --batch $bt
  done
  run "batch 16 x 32k varied rounds=1" PACKFA_SPLIT_ROUNDS=1 -- --kv 32768 --batch 16
  run "batch 16 x 32k varied rounds=0" PACKFA_SPLIT_ROUNDS=0 -- --kv 32768 --batch 16
  for kv in 4096 32768; do
    run "kv $kv one row prefetch=1" PACKFA_PREFETCH=1 -- --kv $kv --heads 32 --kv-heads 8
    run "kv $kv one row prefetch=0" PACKFA_PREFETCH=0 -- --kv $kv --heads 32 --kv-heads 8
  done
  # 3. nq 2..16 (no change expected)
  for nq in 1 2 4 8 16; do run "nq $nq kv 32k" PACKFA_PREFETCH=1 -- --kv 32768 --nq $nq --heads 32 --kv-heads 8; done
  # 4. fp16-Q dot (tensor cores now) against the int8 dot
  for dot in f16 int8; do run "kv 128k dot $dot" PACKFA_PREFETCH=1 -- --kv 131072 --dot $dot; done
  run "kv 32k nq 4 dot f16" PACKFA_PREFETCH=1 -- --kv 32768 --nq 4 --dot f16
done
# the pack -> attention -> combine chain with PDL: where the pre-wait prefetch can act
for p in 1 0; do echo "# chain, PACKFA_PREFETCH=$p"; PACKFA_PREFETCH=$p "$B" --chain-only 2>&1 | tail -2; done
