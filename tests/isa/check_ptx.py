#!/usr/bin/env python3
"""PTX gate: require instruction patterns in nvcc's compute_90 PTX.

  check_ptx.py --ptx FILE --require REGEX [--require REGEX ...] [--kernels REGEX] [--json OUT]

Without --kernels, each REQUIRE regex must match somewhere in the PTX. With --kernels, at
least one .entry must match KERNELS (re.search on the mangled name) and each REQUIRE regex
must match inside the body of every such .entry. The PTX must target sm_90 (or newer).
stdlib only; exit 0 = pass, 1 = gate failure, 2 = usage error.
"""
import argparse
import json
import os
import re
import sys


def entries(ptx):
    """{mangled name: body text} of the .entry functions."""
    out = {}
    for m in re.finditer(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx):
        name, i = m.group(1), ptx.find("{", m.end())
        depth, j = 0, i
        while j < len(ptx):
            c = ptx[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out[name] = ptx[i:j + 1]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--require", action="append", default=[], required=True)
    ap.add_argument("--kernels", help="regex: check each matching .entry separately")
    ap.add_argument("--json")
    ap.add_argument("--name", default="ptx")
    a = ap.parse_args()
    with open(a.ptx) as f:
        ptx = f.read()
    failures, facts = [], []
    m = re.search(r"^\s*\.target\s+sm_(\d+)", ptx, re.M)
    if not m or int(m.group(1)) < 90:
        failures.append("PTX target is %s, want sm_90+" % (m.group(0).strip() if m else "missing"))
    ents = entries(ptx)
    if a.kernels:
        kre = re.compile(a.kernels)
        chosen = {k: v for k, v in ents.items() if kre.search(k)}
        if not chosen:
            failures.append("no .entry matches /%s/ (have: %s)" % (a.kernels, ", ".join(sorted(ents)) or "none"))
    else:
        chosen = {"<whole PTX>": ptx}
    for name, body in sorted(chosen.items()):
        rec = {"kernel": name, "counts": {}}
        for r in a.require:
            n = len(re.findall(r, body))
            rec["counts"][r] = n
            if n == 0:
                failures.append("%s: /%s/ not found" % (name, r))
        facts.append(rec)
        print("%-80s %s" % (name[:80], " ".join("%s:%d" % kv for kv in rec["counts"].items())))
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"gate": a.name, "ptx": os.path.basename(a.ptx), "pass": not failures,
                       "failures": failures, "kernels": facts}, f, indent=1)
    if failures:
        print("\nPTX gate %s FAILED:" % a.name)
        for x in failures:
            print("  - " + x)
        return 1
    print("\nPTX gate %s passed (%d kernel scopes)" % (a.name, len(facts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
