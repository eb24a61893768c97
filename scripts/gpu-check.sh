#!/usr/bin/env bash
# GPU-machine check (H200: nvcc 13, cmake, ninja, python3; no network, no fmt/Catch2).
#
#   scripts/gpu-check.sh [build] [test] [bench] [sanitize [memcheck|racecheck|initcheck|synccheck ...]]
#                                   (no argument = build test bench, in that order)
#
# build : configure build-gpu/ for sm_90 only (HIP off), Ninja, Release; build with -j16.
#         fmt/Catch2 come from a carried .deps/usr (prepare it on the CPU machine with
#         `../shared/tools/gpu-deps.sh .deps`); fmt is used header-only there.
# test  : ctest -L gpu (the GPU tests), then every test; logs to $OUT/ctest-gpu.log and
#         $OUT/ctest.log when $OUT is set.
# bench : build/bench/packfa-bench --json $OUT/bench.json, build/bench/pdl-chain --json
#         $OUT/pdl.json (each only if built).
# sanitize [tool...]: the GPU test binaries (ctest label gpu) under compute-sanitizer, one
#         run per tool and binary, each binary over its sanitizer subset (sanitize_specs
#         below; README, Testing): memcheck, racecheck, initcheck and synccheck, or the tools
#         named after "sanitize" (e.g. `sanitize memcheck`, to split the tools over calls).
#         Prints per run and per tool the errors reported; fails on any error, a non-zero
#         exit, a missing sanitizer summary, a test spec that matches nothing, a skip (77: no
#         device), or a run the time budget left out. Logs: $OUT/sanitize-<tool>-<test>.log.
#         SANITIZE_TOOLS: the tools when none is named; SANITIZE_TESTS: a regex on the ctest
#         names to run; SANITIZE_ARGS: Catch2 arguments for every binary instead of the
#         subsets (e.g. "[robust]"); SANITIZE_FULL=1: every case (hours, not one call);
#         SANITIZE_TIMEOUT: limit of one run (s, default 300); SANITIZE_BUDGET: wall time of
#         the whole phase (s, default 540: one 10-minute device call; later runs fail as
#         "NOT RUN").
# Environment: BUILD_DIR (default build-gpu), JOBS (default 16), OUT (optional results folder).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-gpu}"
JOBS="${JOBS:-16}"
OUT="${OUT:-}"
DEPS="$ROOT/.deps/usr"
if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
fi

phases=()
sanitize_tools=""  # tool names given after "sanitize" on the command line
for p in "$@"; do
  case "$p" in
    build | test | bench | sanitize) phases+=("$p") ;;
    memcheck | racecheck | initcheck | synccheck)
      if [[ " ${phases[*]} " != *" sanitize "* ]]; then
        echo "$0: '$p' names a sanitizer tool: put it after 'sanitize'" >&2
        exit 2
      fi
      sanitize_tools="${sanitize_tools:+$sanitize_tools }$p" ;;
    *) echo "usage: $0 [build] [test] [bench] [sanitize [memcheck] [racecheck] [initcheck] [synccheck]]" >&2; exit 2 ;;
  esac
done
[ ${#phases[@]} -eq 0 ] && phases=(build test bench)

declare -a summary=()
status=0
note() { summary+=("$1"); }
log_to() {  # log_to <file name> <command...>: tee into $OUT/<file> when OUT is set
  local f="$1"
  shift
  if [ -n "$OUT" ]; then
    "$@" 2>&1 | tee "$OUT/$f"
    return "${PIPESTATUS[0]}"
  fi
  "$@"
}

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

phase_build() {
  local args=(-S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
              -DCMAKE_CUDA_ARCHITECTURES=90 -DPACKFA_ENABLE_HIP=OFF)
  if [ -d "$DEPS" ]; then
    args+=("-DCMAKE_PREFIX_PATH=$DEPS" "-DCMAKE_CXX_FLAGS=-DFMT_HEADER_ONLY=1 -I$DEPS/include"
           "-DCMAKE_CUDA_FLAGS=-DFMT_HEADER_ONLY=1 -I$DEPS/include")
  else
    echo "gpu-check: no $DEPS (run ../shared/tools/gpu-deps.sh .deps on the CPU machine and carry it)" >&2
  fi
  local t0=$SECONDS
  if ! log_to configure.log cmake "${args[@]}"; then
    note "build: configure FAILED"
    return 1
  fi
  if ! log_to build.log cmake --build "$BUILD_DIR" -j"$JOBS"; then
    note "build: FAILED after $((SECONDS - t0)) s (see build.log)"
    return 1
  fi
  note "build: ok in $((SECONDS - t0)) s"
}

phase_test() {
  if [ ! -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
    note "test: no build in $BUILD_DIR"
    return 1
  fi
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu-check: /' || true
  local rc=0 rc_all=0
  (cd "$BUILD_DIR" && log_to ctest-gpu.log ctest -L gpu --output-on-failure) || rc=$?
  (cd "$BUILD_DIR" && log_to ctest.log ctest --output-on-failure -j"$JOBS") || rc_all=$?
  local line
  line=$(grep -E 'tests passed|tests failed' "${OUT:-/nonexistent}/ctest-gpu.log" 2>/dev/null | tail -1 || true)
  note "test: gpu label rc=$rc ${line:+($line)}; all tests rc=$rc_all"
  [ "$rc" -eq 0 ] && [ "$rc_all" -eq 0 ]
}

phase_bench() {
  local ran=0 rc=0 exe
  exe="$BUILD_DIR/bench/packfa-bench"
  if [ -x "$exe" ]; then
    ran=1
    if [ -n "$OUT" ]; then log_to bench.log "$exe" --json "$OUT/bench.json" || rc=$?; else "$exe" || rc=$?; fi
    note "bench: packfa-bench rc=$rc"
  fi
  exe="$BUILD_DIR/bench/pdl-chain"
  [ -x "$exe" ] || exe="$BUILD_DIR/bench/pdl_chain"
  if [ -x "$exe" ]; then
    ran=1
    local r=0
    if [ -n "$OUT" ]; then log_to pdl.log "$exe" --json "$OUT/pdl.json" || r=$?; else "$exe" || r=$?; fi
    note "bench: pdl-chain rc=$r"
    [ "$r" -ne 0 ] && rc=$r
  fi
  [ "$ran" -eq 0 ] && note "bench: no bench binaries built"
  return "$rc"
}

# The sanitizer subset: Catch2 test specs per GPU test binary (ctest name), one spec a line
# (specs on separate lines are ORed; the names carry commas, so a name is given by its
# prefix and '*'). Chosen so that every kernel kind runs and four tools fit one 10-minute
# device call (README, Testing):
#   gpu_test_robust   "[sanitize]": a call per kind of the contiguous layout, each asserting
#                     the path it took: int8 Q.K tensor-core scores (4 and 16 rows, D = 256 16
#                     rows), the lane path (fp16-Q mode, bf16 V, D = 256 decode rows, f16 K at
#                     D = 256), the 8-row D = 256 class, f16 K tensor-core scores, the options
#                     on a part-filled block, combine wave / row_block / block, claim counters,
#                     tile edges (1 and 33 keys), ggml V rows at both 16-byte phases
#   gpu_test_paged    the paged layout (f16 K, head dims 64/80/256, MTP rows, windows, masks,
#                     the 16-row class), pack/quantize-on-write through a slot mapping, the
#                     device-side guards and error counters, per-head ggml masks
#   gpu_test_pack, gpu_test_pdl_chain, gpu_test_probe: every case (pack/quantize kernels,
#                     the PDL chain pack -> quantize -> split -> combine, the probes)
#   pdl_test_*        every case but [planted] (the planted races need kernels to overlap,
#                     which the sanitizers serialise away; they run in the test phase)
#   gpu_test_attention, gpu_test_attention_switches_on: left out (the accuracy sweep, ~4 min
#                     bare; test_robust's subset runs its kernel kinds); python_*: left out
#                     (a Python process, not packfa's binaries)
#   gpu_test_robust_switches_on: its command carries "[sanitize]" and the two decode
#                     switches flipped (cmake -E env, tests/gpu/CMakeLists.txt): the subset
#                     again with the one-block-per-row combine and split rounds
# A binary not named here runs every case, so a new GPU test is never skipped silently.
sanitize_specs() {
  case "$1" in
    gpu_test_robust) echo "[sanitize]" ;;
    gpu_test_paged)
      # one argument, names ORed by commas (Catch2 v2 joins separate arguments into one name)
      echo "paged: f16 K*,pack/quantize-on-write through a vLLM slot mapping*,device-side values out of contract*,ggml ALiBi*" ;;
    gpu_test_attention | gpu_test_attention_switches_on | python_*) echo "SKIP" ;;
    pdl_*) echo "~[planted]~[api-error]" ;;  # [api-error]: a launch that must fail (the tool reports the API error)
    *) ;;
  esac
}

# Errors a compute-sanitizer log reports: "ERROR SUMMARY: N errors" (memcheck, initcheck,
# synccheck) or "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)"; prints
# "<errors> <warnings>", nothing when the log has no summary (the run did not finish).
sanitize_count() {
  local log="$1" n
  n=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)' "$log" | tail -1)
  if [ -n "$n" ]; then
    echo "$n" | sed -E 's/.*\(([0-9]+) errors?, ([0-9]+) warnings?\)/\1 \2/'
    return
  fi
  n=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
  [ -n "$n" ] && echo "$n 0"
}

# sanitize [tool...]: tools from the command line (after "sanitize"), else SANITIZE_TOOLS,
# else all four.
phase_sanitize() {
  if [ ! -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
    note "sanitize: no build in $BUILD_DIR"
    return 1
  fi
  local cs
  cs="$(command -v compute-sanitizer || true)"
  [ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
  if [ -z "$cs" ]; then
    note "sanitize: compute-sanitizer not found"
    return 1
  fi
  # One line per ctest with the gpu label: name and argv, separated by \x1f.
  local list
  if ! list=$(cd "$BUILD_DIR" && ctest -L gpu --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    print("\x1f".join([t["name"]] + t["command"]))'); then
    note "sanitize: cannot list the GPU tests"
    return 1
  fi
  if [ -z "$list" ]; then
    note "sanitize: no GPU tests in $BUILD_DIR"
    return 1
  fi
  local tools="${sanitize_tools:-${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}}"
  local timeout_s="${SANITIZE_TIMEOUT:-300}" budget="${SANITIZE_BUDGET:-540}" only="${SANITIZE_TESTS:-}"
  local logdir="${OUT:-$BUILD_DIR/sanitize}" rc_all=0 tool t_start=$SECONDS
  local -a user_args=()
  [ -n "${SANITIZE_ARGS:-}" ] && read -r -a user_args <<<"$SANITIZE_ARGS"
  mkdir -p "$logdir"
  for tool in $tools; do
    local -a opts=(--tool "$tool" --error-exitcode 99)
    [ "$tool" = memcheck ] && opts+=(--leak-check full)
    local runs=0 failed=0 errors=0 warnings=0 t_tool=$SECONDS line
    while IFS= read -r line; do
      [ -z "$line" ] && continue
      local -a argv=()
      IFS=$'\x1f' read -r -a argv <<<"$line"
      local name="${argv[0]}"
      argv=("${argv[@]:1}")
      [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
      local -a targs=()
      if [ ${#user_args[@]} -gt 0 ]; then
        targs=("${user_args[@]}")
      elif [ -n "${SANITIZE_FULL:-}" ]; then
        [[ "$name" == pdl_* ]] && targs=("~[planted]~[api-error]")
        [[ "$name" == python_* ]] && continue
      else
        local specs
        specs=$(sanitize_specs "$name")
        [ "$specs" = SKIP ] && continue
        [ -n "$specs" ] && mapfile -t targs <<<"$specs"
      fi
      runs=$((runs + 1))
      local log="$logdir/sanitize-$tool-$name.log" t0=$SECONDS rc=0 left limit counts n w
      left=$((budget - (SECONDS - t_start)))
      if [ "$left" -le 0 ]; then  # out of time: a failure, never a silent pass
        failed=$((failed + 1))
        echo "gpu-check: sanitize $tool $name NOT RUN (SANITIZE_BUDGET=$budget s spent)"
        continue
      fi
      limit=$timeout_s
      [ "$left" -lt "$limit" ] && limit=$left
      if [ ${#targs[@]} -gt 0 ]; then
        echo "gpu-check: sanitize $tool $name$(printf ' %q' "${targs[@]}")"
      else
        echo "gpu-check: sanitize $tool $name (every case)"
      fi
      # -w NoTests: a spec that matches no test case fails the binary (Catch2 v2: exit 2).
      (cd "$BUILD_DIR" && timeout "$limit" "$cs" "${opts[@]}" "${argv[@]}" -w NoTests "${targs[@]}") \
        </dev/null >"$log" 2>&1 || rc=$?
      counts=$(sanitize_count "$log")
      n=${counts% *}
      w=${counts#* }
      # Catch2 v3 exits 0 on a spec that matches nothing as long as another matched.
      if grep -q 'No test cases matched' "$log" && [ "$rc" -eq 0 ]; then rc=2; fi
      if [ "$rc" -ne 0 ] || [ -z "$counts" ] || [ "$n" -ne 0 ]; then
        failed=$((failed + 1))
        errors=$((errors + ${n:-0}))
        local what="no sanitizer summary"
        [ -n "$counts" ] && what="$n errors reported"
        echo "gpu-check: sanitize $tool $name FAILED (exit $rc, $what; $log)"
        tail -20 "$log" | sed 's/^/    /'
      else
        local wnote=""
        [ "${w:-0}" -gt 0 ] && wnote=" ($w warnings)"
        echo "gpu-check: sanitize $tool $name ok in $((SECONDS - t0)) s$wnote"
      fi
      warnings=$((warnings + ${w:-0}))
    done <<<"$list"
    echo "gpu-check: sanitize $tool: $errors errors, $warnings warnings, $failed of $runs runs failed, $((SECONDS - t_tool)) s"
    note "sanitize $tool: $errors errors ($warnings warnings), $failed of $runs runs failed, $((SECONDS - t_tool)) s"
    [ "$failed" -ne 0 ] && rc_all=1
    [ "$runs" -eq 0 ] && { note "sanitize $tool: no binary ran"; rc_all=1; }
  done
  return "$rc_all"
}

for p in "${phases[@]}"; do
  echo "==== gpu-check: $p ===="
  "phase_$p" || status=1
  if [ "$p" = build ] && [ "$status" -ne 0 ]; then
    break
  fi
done

echo "==== gpu-check summary ===="
for s in "${summary[@]}"; do echo "  $s"; done
if [ -n "$OUT" ]; then
  printf '%s\n' "${summary[@]}" > "$OUT/summary.txt"
  echo "  results in $OUT"
fi
exit "$status"
