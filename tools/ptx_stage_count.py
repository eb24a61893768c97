#!/usr/bin/env python3
"""tools/ptx_stage_count.py KERNEL.ptx [--ks W] [--v W] [--vs W] [--iters N --rows N] [--dump]

Per-chunk PTX instruction count of the key loop's staging code (ChunkStager::stage for the
next chunk: from the `next >= 0` branch to cp.async.commit_group) at the warp level.

Width dispatch branches are resolved from the given widths (ks, v, vs); k_block == 16 is
false (the bench's K blocks of 32). Every other conditional (row / lane guards) counts both
sides (a full chunk: some lane takes each guarded body). --rows N: runs of N rows
(page 16: N = 16), a row guard whose row is a constant >= N off the lane's first row is
taken by no lane. A run loop (`#pragma unroll 1`, the paged staging before session 11) body
is counted `iters` times; commit / wait_group count as instructions. Null-pointer tests are
taken as non-null, page ids as in range.
Input: the PTX of one .entry (split a unit's `nvcc --ptx -arch=compute_90` output at
`.visible .entry`); a heuristic for comparing staging code, not a SASS count (bench/NOTES.md,
session 11)."""
import re, sys, argparse
from collections import Counter

ap = argparse.ArgumentParser()
ap.add_argument("ptx")
ap.add_argument("--ks", type=int, default=8)
ap.add_argument("--v", type=int, default=8)
ap.add_argument("--vs", type=int, default=8)
ap.add_argument("--iters", type=int, default=1)
ap.add_argument("--rows", type=int, default=32)
ap.add_argument("--dump", action="store_true")
a = ap.parse_args()
OFF = {148: a.ks, 192: a.v, 232: a.vs}  # FaKernelParams: ks_width, v_width, vs_width  # FaKernelParams field offsets relative to %rd1 (+24)

lines = open(a.ptx).read().split("\n")
blocks = []  # [label, [instr]]
cur = ["<entry>", []]
for ln in lines:
    s = ln.strip()
    if not s or s.startswith("//"):
        continue
    m = re.match(r"^(\$L__BB\d+_\d+):$", s)
    if m:
        blocks.append(cur)
        cur = [m.group(1), []]
        continue
    if s.startswith(".pragma"):
        cur[1].append(s)
        continue
    if s.endswith(";") and not s.startswith("."):
        cur[1].append(s)
        if re.match(r"^(@!?%p\d+\s+)?bra", s):
            blocks.append(cur)
            cur = [cur[0] + "+", []]
blocks.append(cur)
# a conditional branch followed by `bra.uni` ends one block (two-way branch)
merged = blocks
blocks = []
for b in merged:
    if blocks and b[0].endswith("+") and len(b[1]) == 1 and re.match(r"^bra(\.uni)?\s", b[1][0]) and \
            blocks[-1][1] and re.match(r"^@!?%p\d+\s+bra", blocks[-1][1][-1]):
        blocks[-1][1].append(b[1][0])
        continue
    blocks.append(b)
idx = {b[0]: i for i, b in enumerate(blocks)}

defs = {}
for b in blocks:
    for ins in b[1]:
        m = re.match(r"^(?:@!?%p\d+\s+)?[\w.]+\s+(%\w+),\s*(.*);$", ins)
        if m:
            defs.setdefault(m.group(1), []).append(ins)

def succs(i):
    ins = blocks[i][1]
    out = []
    if len(ins) >= 2:
        m1 = re.match(r"^(@!?%p\d+)\s+bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ins[-2])
        m2 = re.match(r"^bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ins[-1])
        if m1 and m2:
            return [("cond", m1.group(1), idx[m1.group(2)]), ("fall", None, idx[m2.group(1)])]
    if ins:
        last = ins[-1]
        m = re.match(r"^(@!?%p\d+)\s+bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", last)
        if m:
            return [("cond", m.group(1), idx[m.group(2)]), ("fall", None, i + 1)]
        m = re.match(r"^bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", last)
        if m:
            return [("jmp", None, idx[m.group(1)])]
        if last.startswith("ret") or last.startswith("exit"):
            return []
    return [("fall", None, i + 1)]

def base_off(reg, depth=0):
    """Offset of a 64-bit register from the kernel's parameter base, or None."""
    for d in defs.get(reg, []):
        if re.match(r"^mov\.b64\s+%\w+,\s*\w+_param_0;", d):
            return 0
        m = re.match(r"^add\.s64\s+%\w+,\s*(%rd\d+),\s*(\d+);", d)
        if m and depth < 4:
            b = base_off(m.group(1), depth + 1)
            if b is not None:
                return b + int(m.group(2))
    return None

def param_of(reg, depth=0):
    """Absolute FaKernelParams offset a 32-bit register was loaded from, or None."""
    for d in defs.get(reg, []):
        m = re.match(r"^ld\.param\.u32\s+%\w+,\s*\[(%rd\d+)(?:\+(\d+))?\];", d)
        if m:
            b = base_off(m.group(1))
            if b is not None:
                return b + int(m.group(2) or 0)
        m = re.match(r"^mov\.u32\s+%\w+,\s*(%r\d+);", d)
        if m and depth < 4:
            return param_of(m.group(1), depth + 1)
    return None

def row_const(reg, depth=0):
    """Constant row offset of a guard's row register (or.b32 / add.s32 %r, %base, C), else 0."""
    for d in defs.get(reg, []):
        m = re.match(r"^(?:or\.b32|add\.s32)\s+%\w+,\s*%r\d+,\s*(\d+);", d)
        if m:
            return int(m.group(1))
    return 0

def decide(i, pred):
    """'T' branch taken, 'F' not taken, 'B' both (divergent guard)."""
    neg = pred.startswith("@!")
    p = pred.lstrip("@!")
    for ins in list(reversed(blocks[i][1])) + list(reversed(defs.get(p, []))):
        if not re.match(r"^setp\.\w+\.\w+\s+" + re.escape(p) + ",", ins):
            continue
        if re.match(r"^setp\.eq\.s64\s+%p\d+,\s*%rd\d+,\s*0;", ins):  # null pointer tests: non-null
            return "F" if not neg else "T"
        if re.match(r"^setp\.lt\.u32\s+%p\d+,\s*%r\d+,\s*%r\d+;", ins):  # page id < num_pages
            return "T" if not neg else "F"
        if re.match(r"^setp\.le\.s32\s+%p\d+,\s*%r\d+,\s*%r\d+;", ins):  # n <= keys left in the page
            r = a.rows >= 32
            return "T" if r != neg else "F"
        m = re.match(r"^setp\.(\w+)\.s32\s+" + re.escape(p) + r",\s*(%r\d+),\s*(-?\d+|%r\d+);", ins)
        if m:
            op, reg, rhs = m.groups()
            off = param_of(reg)
            if off in OFF and rhs.lstrip("-").isdigit():
                w = OFF[off]; c = int(rhs)
                r = {"gt": w > c, "lt": w < c, "eq": w == c, "ne": w != c}[op]
                return ("T" if r != neg else "F")
            if off == 144 and op in ("eq", "ne") and rhs == "16":  # k_block == 16: false
                r = op == "ne"
                return ("T" if r != neg else "F")
            if op == "ge" and a.rows < 32 and row_const(reg) >= a.rows:
                return "T" if not neg else "F"  # row beyond the run: every lane skips
            return "B"
    return "B"

# region: commit before "wait_group 1"
commit = None
for i, b in enumerate(blocks):
    for j, ins in enumerate(b[1]):
        if ins.startswith("cp.async.commit_group"):
            rest = b[1][j + 1:j + 3]
            if any("wait_group 1" in r for r in rest):
                commit = i
if commit is None:  # one stage: `if (it > 0) stage(chunk, 0)` then wait_group 0; the last commit
    for i, b in enumerate(blocks):
        if any(x.startswith("cp.async.commit_group") for x in b[1]):
            commit = i
# start: the target of the last `setp.gt.s32 %p, %r, -1` branch before commit
start = None
for i in range(commit, -1, -1):
    ins = blocks[i][1]
    for k, x in enumerate(ins):
        m = re.match(r"^setp\.gt\.s32\s+(%p\d+),\s*%r\d+,\s*-1;", x)
        if m and ins[-1].startswith("@" + m.group(1) + " bra") or (m and len(ins) >= 2 and ins[-2].startswith("@" + m.group(1) + " bra")):
            br = ins[-1] if ins[-1].startswith("@") else ins[-2]
            start = idx[re.search(r"(\$L__BB\d+_\d+)", br).group(1)]
            break
    if start is not None:
        break
if start is None or not any(re.match(r"^min\.s32\s+%r\d+,\s*%r\d+,\s*32;", x) for i in range(start, commit) for x in blocks[i][1]):
    # the block computing n = min(32, hi - key0) nearest before the commit
    for i in range(commit, -1, -1):
        if any(re.match(r"^min\.s32\s+%r\d+,\s*%r\d+,\s*32;", x) for x in blocks[i][1]):
            start = i
            break

seen = set()
stack = [start]
loop_heads = set()
while stack:
    i = stack.pop()
    if i in seen or i > commit:
        continue
    seen.add(i)
    if i == commit:
        continue
    for kind, pred, t in succs(i):
        if t <= i:  # back edge: the run loop
            loop_heads.add(t)
            continue
        if kind == "cond":
            d = decide(i, pred)
            if d == "T":
                stack.append(t); continue
            if d == "F":
                continue
            stack.append(t)
        elif kind == "fall" and succs(i)[0][0] == "cond":
            d = decide(i, succs(i)[0][1])
            if d == "T":
                continue
            stack.append(t)
        else:
            stack.append(t)

def count(bs):
    c = Counter()
    for i in bs:
        for ins in blocks[i][1]:
            if ins.startswith(".pragma"):
                continue
            op = ins.split()[0]
            if op.startswith("@"):
                op = ins.split()[1]
            base = op.split(".")[0]
            if op.startswith("cp.async"):
                base = "cp.async"
            c[base] += 1
    return c

loop = set(i for i in seen if loop_heads and i >= min(loop_heads) and i < commit)
tot = count(seen)
lb = count(loop)
n = sum(tot.values()) + (a.iters - 1) * sum(lb.values())
cpa = tot["cp.async"] + (a.iters - 1) * lb["cp.async"]
print(f"{a.ptx}: start {blocks[start][0]} commit {blocks[commit][0]} blocks {len(seen)} | per chunk {n} instr, "
      f"{cpa} cp.async, {n - cpa} other (run loop body {sum(lb.values())} x {a.iters})")
allc = tot.copy()
for k, v in lb.items():
    allc[k] += (a.iters - 1) * v
print("   ", " ".join(f"{k}:{v}" for k, v in allc.most_common()))
if a.dump:
    for i in sorted(seen):
        print(blocks[i][0], len(blocks[i][1]), [x for x in blocks[i][1] if x.startswith("cp.async") or x.startswith("setp") or "bra" in x])
