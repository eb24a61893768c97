#!/usr/bin/env python3
"""CUDA spill gate: no kernel of the built library uses local memory for spills.

Reads the library's own object files (no second compile, no cuobjdump needed): every member
of the static library (or each .o given) has a .nv_fatbin section; each cubin in it (one per
real architecture) is an ELF whose .nv.info section carries, per kernel, the register count
(EIATTR_REGCOUNT) and the stack frame size (EIATTR_FRAME_SIZE). ptxas puts register spills
(and private arrays it cannot keep in registers) in the stack frame, so the gate asks for
frame size 0 in every kernel whose mangled name matches --kernels, on every architecture in
--archs (default: every cubin found); --allow REGEX=BYTES lets matching kernels keep a frame of
at most BYTES (a known private array, not a spill: say why where it is passed). A compressed cubin cannot be read with the standard
library: the gate then fails and says so (build with nvcc --no-compress).

stdlib only. Exit 0 = pass, 1 = gate failure, 2 = usage / tool error.
"""
import argparse
import json
import os
import re
import struct
import sys

from ar_archive import ar_members, is_archive

FATBIN_MAGIC = 0xBA55ED50
KIND_CUBIN = 2
FLAG_COMPRESSED = 0x2000 | 0x8000  # LZ4 (older nvcc) and zstd (CUDA >= 12.8) payloads
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_REGCOUNT = 0x2F
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4


def elf_sections(e):
    """[(name, type, offset, size, link)] of a little-endian ELF64."""
    if e[:4] != b"\x7fELF" or e[4] != 2:
        raise ValueError("not an ELF64 object")
    shoff, = struct.unpack_from("<Q", e, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", e, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", e, shoff + i * shentsize) for i in range(shnum)]
    stroff = raw[shstrndx][4]

    def cstr(base, o):
        return e[base + o:e.index(b"\0", base + o)].decode("utf-8", "replace")
    return [(cstr(stroff, r[0]), r[1], r[4], r[5], r[6]) for r in raw], cstr


def section_bytes(e, name):
    secs, _ = elf_sections(e)
    for s in secs:
        if s[0] == name:
            return e[s[2]:s[2] + s[3]]
    return None


def cubin_kernels(e):
    """{kernel: {"regs", "frame", "stack"}} from a cubin's .nv.info (attributes keyed by symbol)."""
    secs, cstr = elf_sections(e)
    symtab = [s for s in secs if s[1] == 2]  # SHT_SYMTAB
    if not symtab:
        return {}
    symtab = symtab[0]
    strbase = secs[symtab[4]][2]
    syms = []
    for i in range(symtab[3] // 24):
        st_name, st_info, _, _, _, _ = struct.unpack_from("<IBBHQQ", e, symtab[2] + i * 24)
        syms.append((cstr(strbase, st_name), st_info & 0xF))
    out = {}
    for name, _, off, size, _ in secs:
        if name != ".nv.info":
            continue
        d, o = e[off:off + size], 0
        while o + 2 <= len(d):
            fmt, attr = d[o], d[o + 1]
            o += 2
            if fmt == EIFMT_SVAL:
                n, = struct.unpack_from("<H", d, o)
                val = d[o + 2:o + 2 + n]
                o += 2 + n
            elif fmt == EIFMT_HVAL:
                val, o = d[o:o + 2], o + 2
            elif fmt == EIFMT_BVAL:
                val, o = d[o:o + 1], o + 1
            else:
                val = b""
            if fmt != EIFMT_SVAL or len(val) != 8:
                continue
            idx, v = struct.unpack("<II", val)
            if idx >= len(syms):
                continue
            key = {EIATTR_REGCOUNT: "regs", EIATTR_FRAME_SIZE: "frame", EIATTR_MIN_STACK_SIZE: "stack"}.get(attr)
            if key:
                out.setdefault(syms[idx][0], {})[key] = v
    return out


def fatbin_cubins(fb):
    """[(sm, flags, payload)] of the cubin entries of one fatbin container."""
    out, off = [], 0
    while off + 16 <= len(fb):
        magic, _, hsz, size = struct.unpack_from("<IHHQ", fb, off)
        if magic != FATBIN_MAGIC:
            break
        pos, end = off + hsz, off + hsz + size
        while pos + 16 <= end:
            kind, _, ehsz, psize = struct.unpack_from("<HHIQ", fb, pos)
            if ehsz < 48:
                raise ValueError("unexpected fatbin entry header (%d bytes)" % ehsz)
            sm, = struct.unpack_from("<I", fb, pos + 28)
            flags, = struct.unpack_from("<Q", fb, pos + 40)
            if kind == KIND_CUBIN:
                out.append((sm, flags, fb[pos + ehsz:pos + ehsz + psize]))
            pos += ehsz + psize
        off = end
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="static libraries (.a) or objects (.o) built by nvcc")
    ap.add_argument("--kernels", default=".", help="regex on the mangled kernel name (default: every kernel)")
    ap.add_argument("--archs", default="", help="semicolon/comma separated SM numbers to check (default: all found)")
    ap.add_argument("--allow", action="append", default=[], metavar="REGEX=BYTES",
                    help="kernels matching REGEX may have a stack frame of at most BYTES")
    ap.add_argument("--json", help="write per-kernel facts here")
    ap.add_argument("--name", default="cuda_spills")
    a = ap.parse_args()
    want = {int(x) for x in re.split(r"[;,\s]+", a.archs) if x.strip()}
    regex = re.compile(a.kernels)
    allow = []
    for item in a.allow:
        pat, _, nbytes = item.rpartition("=")
        if not pat or not nbytes.isdigit():
            print("bad --allow %r (want REGEX=BYTES)" % item, file=sys.stderr)
            return 2
        allow.append((re.compile(pat), int(nbytes)))

    failures, records, seen_archs = [], [], set()
    for path in a.inputs:
        if not os.path.exists(path):
            failures.append("%s: file missing" % path)
            continue
        with open(path, "rb") as f:
            data = f.read()
        members = ar_members(data) if is_archive(data) else [(os.path.basename(path), data)]
        for mname, body in members:
            try:
                fb = section_bytes(body, ".nv_fatbin")
            except ValueError:
                continue
            if not fb:
                continue
            for sm, flags, cubin in fatbin_cubins(fb):
                if want and sm not in want:
                    continue
                seen_archs.add(sm)
                if flags & FLAG_COMPRESSED or cubin[:4] != b"\x7fELF":
                    failures.append("%s(%s) sm_%d: compressed cubin, cannot read it (build with nvcc --no-compress)"
                                    % (path, mname, sm))
                    continue
                for kernel, facts in sorted(cubin_kernels(cubin).items()):
                    if not regex.search(kernel):
                        continue
                    rec = {"gate": a.name, "object": mname, "sm": sm, "kernel": kernel,
                           "regs": facts.get("regs", -1), "frame_bytes": facts.get("frame", 0),
                           "stack_bytes": facts.get("stack", 0)}
                    records.append(rec)
                    frame = max(rec["frame_bytes"], rec["stack_bytes"])
                    limit = max([n for r, n in allow if r.search(kernel)], default=0)
                    rec["allowed_frame_bytes"] = limit
                    if frame > limit:
                        failures.append("sm_%d %s %s: %d-byte stack frame, %d allowed (register spills or a private "
                                        "array in local memory; nvcc -Xptxas -warn-spills names spills)" % (
                                            sm, mname, kernel, frame, limit))
    for sm in sorted(want - seen_archs):
        failures.append("no sm_%d cubin in %s" % (sm, " ".join(a.inputs)))
    if not records and not failures:
        failures.append("no kernel matches /%s/ in %s" % (regex.pattern, " ".join(a.inputs)))

    by_arch = {}
    for r in records:
        by_arch.setdefault(r["sm"], []).append(r)
    for sm in sorted(by_arch):
        rs = by_arch[sm]
        framed = ["%s (%d B)" % (r["kernel"], max(r["frame_bytes"], r["stack_bytes"])) for r in rs
                  if r["frame_bytes"] or r["stack_bytes"]]
        print("sm_%d: %d kernels, registers %d..%d, %d with a stack frame%s" % (
            sm, len(rs), min(r["regs"] for r in rs), max(r["regs"] for r in rs), len(framed),
            (": " + ", ".join(framed)) if framed else ""))
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"gate": a.name, "pass": not failures, "failures": failures, "kernels": records}, f, indent=1)
    if failures:
        print("\nCUDA spill gate %s FAILED:" % a.name)
        for f in failures:
            print("  - " + f)
        return 1
    print("\nCUDA spill gate %s passed: %d kernel cubins on %s" % (
        a.name, len(records), ", ".join("sm_%d" % s for s in sorted(by_arch))))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, struct.error) as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(2)
