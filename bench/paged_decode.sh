#!/usr/bin/env bash
# Paged decode against the contiguous cache in one binary (issue 16's speed criterion: kv 128k,
# D 128, 32/8 heads, one row; pages >= 32 within 3% of contiguous, pages of 16 within 8%): per
# V format, contiguous / --paged 32 / --paged 16 (and any page sizes given) alternated ROUNDS
# times; prints each run's median us and per V format the median over rounds with the
# paged/contiguous ratio.
#   B=build-gpu/bench/packfa-bench bench/paged_decode.sh [ROUNDS] [PAGE ...]
set -uo pipefail
B=${B:-build-gpu/bench/packfa-bench}
ROUNDS=${1:-3}
shift || true
pages=(32 16)
[ $# -gt 0 ] && pages=("$@")
tmp=$(mktemp -d)
for ((r = 0; r < ROUNDS; ++r)); do
  for v in q8_0 q4_0 f16 q8_0_planar; do
    for pg in 0 "${pages[@]}"; do
      args=(--kv 131072 --nq 1 --d 128 --batch 1 --v "$v" --no-baseline --json "$tmp/$v-$pg-$r.json")
      [ "$pg" != 0 ] && args+=(--paged "$pg")
      "$B" "${args[@]}" > /dev/null 2>&1 || echo "run failed: $v pages $pg round $r"
    done
  done
done
python3 - "$tmp" "$ROUNDS" "${pages[@]}" <<'PY'
import json, statistics, sys, glob, os
d, rounds, pages = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
def us(v, pg):
    out = []
    for r in range(rounds):
        f = os.path.join(d, "%s-%d-%d.json" % (v, pg, r))
        if os.path.exists(f):
            out += [c["median_us"] for c in json.load(open(f))["cases"]]
    return out
print("kv 131072, D 128, 32/8 heads, nq 1, packed16 K int8 dot; median over rounds of each run's median us")
for v in ["q8_0", "q4_0", "f16", "q8_0_planar"]:
    base = us(v, 0)
    if not base:
        print("%-12s no runs" % v); continue
    mb = statistics.median(base)
    line = "%-12s contiguous %7.1f  runs %s" % (v, mb, base)
    for pg in pages:
        u = us(v, pg)
        if u:
            m = statistics.median(u)
            line += " | pages %d %7.1f (%+.1f%%) runs %s" % (pg, m, 100 * (m / mb - 1), u)
    print(line)
PY
rm -rf "$tmp"
