#!/usr/bin/env bash
# A/B of prefill kernel builds in one process chain on one GPU: each round runs every binary
# once over the same prefill cases (packfa-bench --prefill, stream-timed medians), binaries
# alternating within the round; prints every run's lines, then a table of each case's median
# over the rounds and its ratio to the first binary.
#   bench/prefill_ab.sh ROUNDS label=path/to/packfa-bench [label=path ...] [-- packfa-bench flags]
# Default flags: --d 128 --kv 4096 and --kv 32768 --nq 512 (two invocations a binary and round;
# both V formats, causal and not). Environment settings of a variant go into its label's
# binary as `label=env:VAR=value:path` (e.g. `mma=env:PACKFA_PREFILL_KERNEL=mma:build/bench/packfa-bench`).
# Each invocation is under `timeout 120`.
set -uo pipefail
ROUNDS=${1:?rounds}
shift
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  bins+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
flagsets=()
if [ $# -gt 0 ]; then
  flagsets=("$*")
else
  flagsets=("--d 128 --kv 4096" "--d 128 --kv 32768 --nq 512")
fi
[ ${#bins[@]} -ge 1 ] || { echo "prefill_ab.sh: no binary" >&2; exit 2; }
out=$(mktemp)
for ((r = 0; r < ROUNDS; ++r)); do
  for b in "${bins[@]}"; do
    label=${b%%=*}
    rest=${b#*=}
    envs=()
    while [[ "$rest" == env:* ]]; do
      rest=${rest#env:}
      envs+=("${rest%%:*}")
      rest=${rest#*:}
    done
    for f in "${flagsets[@]}"; do
      # shellcheck disable=SC2086
      env "${envs[@]}" timeout 120 "$rest" --prefill $f 2>&1 | grep -E '^(64|80|96|112|128|256) ' |
        sed "s/^/$label $r | /" | tee -a "$out"
    done
  done
done
python3 - "$out" "${bins[@]%%=*}" <<'EOF'
import sys, statistics, collections
path, labels = sys.argv[1], sys.argv[2:]
t = collections.defaultdict(list)
for line in open(path):
    head, row = line.split(" | ", 1)
    label = head.split()[0]
    f = row.split()
    # D H/G nq kv causal V dot us TFLOP/s event-us kernel
    key = (f[0], f[1], f[2], f[3], f[4], f[5], f[6])
    t[(key, label)].append(float(f[7]))
keys = sorted({k for k, _ in t}, key=lambda k: (int(k[0]), int(k[2]), int(k[3]), k[4], k[5], k[6]))
print("\n| D | nq | kv | causal | V | dot | " + " | ".join(labels) + " | " +
      " | ".join("%s/%s" % (l, labels[0]) for l in labels[1:]) + " |")
print("|" + "---|" * (6 + 2 * len(labels) - 1))
for k in keys:
    med = [statistics.median(t[(k, l)]) if t[(k, l)] else float("nan") for l in labels]
    cells = ["%.1f" % m for m in med] + ["%.3f" % (m / med[0]) for m in med[1:]]
    print("| %s | %s | %s | %s | %s | %s | %s |" % (k[0], k[2], k[3], k[4], k[5], k[6], " | ".join(cells)))
EOF
rm -f "$out"
