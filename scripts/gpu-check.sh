#!/usr/bin/env bash
# GPU-machine check (H200: nvcc 13, cmake, ninja, python3; no network, no fmt/Catch2).
#
#   scripts/gpu-check.sh [build] [test] [bench] [sanitize]
#                                   (no argument = build test bench, in that order)
#
# build : configure build-gpu/ for sm_90 only (HIP off), Ninja, Release; build with -j16.
#         fmt/Catch2 come from a carried .deps/usr (prepare it on the CPU machine with
#         `../shared/tools/gpu-deps.sh .deps`); fmt is used header-only there.
# test  : ctest -L gpu (the GPU tests), then every test; logs to $OUT/ctest-gpu.log and
#         $OUT/ctest.log when $OUT is set.
# bench : build/bench/packfa-bench --json $OUT/bench.json, build/bench/pdl-chain --json
#         $OUT/pdl.json (each only if built).
# sanitize: every GPU test binary (ctest label gpu: tests/gpu and tests/pdl) under
#         compute-sanitizer memcheck, racecheck, initcheck and synccheck, one run per tool
#         and binary; fails on any reported error, a non-zero exit, or a skip (77: no device).
#         Logs: $OUT/sanitize-<tool>-<test>.log. SANITIZE_TOOLS narrows the tools (e.g.
#         "memcheck initcheck"), SANITIZE_ARGS is passed to each test binary (e.g. a Catch2
#         tag filter "[robust]"; without it the pdl_* binaries get "~[planted]"),
#         SANITIZE_TIMEOUT caps one run (seconds, default 7200).
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

phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(build test bench)
for p in "${phases[@]}"; do
  case "$p" in build | test | bench | sanitize) ;; *) echo "usage: $0 [build] [test] [bench] [sanitize]" >&2; exit 2 ;; esac
done

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
  local tools="${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}" timeout_s="${SANITIZE_TIMEOUT:-7200}"
  local logdir="${OUT:-$BUILD_DIR/sanitize}" rc_all=0 tool
  local -a user_args=()
  [ -n "${SANITIZE_ARGS:-}" ] && read -r -a user_args <<<"$SANITIZE_ARGS"
  mkdir -p "$logdir"
  for tool in $tools; do
    local -a opts=(--tool "$tool" --error-exitcode 99)
    [ "$tool" = memcheck ] && opts+=(--leak-check full)
    local runs=0 failed=0 errors=0 line
    while IFS= read -r line; do
      [ -z "$line" ] && continue
      local -a argv=()
      IFS=$'\x1f' read -r -a argv <<<"$line"
      local name="${argv[0]}"
      argv=("${argv[@]:1}")
      local -a targs=("${user_args[@]}")
      # The planted-bug PDL tests need real overlap between kernels, which the sanitizers
      # take away (they serialise launches): their assertions are about the race detector,
      # not about memory, so they are left out here (they run in the test phase).
      if [ ${#targs[@]} -eq 0 ] && [[ "$name" == pdl_* ]]; then targs=("~[planted]"); fi
      local log="$logdir/sanitize-$tool-$name.log" t0=$SECONDS rc=0 n
      echo "gpu-check: sanitize $tool $name ${targs[*]}"
      (cd "$BUILD_DIR" && timeout "$timeout_s" "$cs" "${opts[@]}" "${argv[@]}" "${targs[@]}") </dev/null >"$log" 2>&1 || rc=$?
      n=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$' || true)
      runs=$((runs + 1))
      if [ "$rc" -ne 0 ] || [ -z "$n" ] || [ "$n" -ne 0 ]; then
        failed=$((failed + 1))
        errors=$((errors + ${n:-0}))
        echo "gpu-check: sanitize $tool $name FAILED (exit $rc, ${n:-no} error summary; $log)"
        tail -20 "$log" | sed 's/^/    /'
      else
        echo "gpu-check: sanitize $tool $name ok in $((SECONDS - t0)) s"
      fi
    done <<<"$list"
    note "sanitize $tool: $runs binaries, $failed failed, $errors errors reported"
    [ "$failed" -ne 0 ] && rc_all=1
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
