#!/usr/bin/env python3
"""HIP ISA gate: compile-level verification of packfa's AMD device code (there is no AMD GPU).

For every entry (FILE|KERNEL_REGEX|FLAGS) and every offload target (FLAGS: 0, 1 = REQUIRE_DOT4,
or a comma list of 1 and require=<mnemonic> items):
  * the device code object for the target is taken out of each object's .hip_fatbin section
    (FILE is a static library .a, a host object .o, or a raw offload bundle);
  * at least one kernel whose (mangled) name matches KERNEL_REGEX (re.search) must exist;
  * each matching kernel must have zero scratch: .private_segment_fixed_size == 0 and no
    dynamic stack (AMDGPU metadata note, llvm-readelf --notes), and .wavefront_size 32;
  * with REQUIRE_DOT4 = 1, each matching kernel's disassembly (llvm-objdump -d --mcpu=<target>)
    must contain v_dot4_i32_iu8; with require=<mnemonic>, that mnemonic (e.g.
    v_wmma_i32_16x16x16_iu8: the prefill kernel's int8 Q·K on the matrix cores);
  * the mnemonic v_dot4_i32_i8 must not appear anywhere in the code object (it does not exist
    on gfx11; an upstream LLVM alias once dropped the signedness).
Per-kernel facts (VGPRs, SGPRs, LDS, scratch, spills, waves/SIMD, dot4 count) go to --json.

stdlib only. Exit 0 = pass, 1 = gate failure, 2 = usage / tool error.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from ar_archive import ar_members, is_archive

# VGPR file per SIMD (per lane) and allocation granule, wave32. Waves/SIMD are capped at 16.
VGPR_FILE = {"gfx1100": (1536, 24), "gfx1101": (1536, 24), "gfx1151": (1536, 24), "gfx1201": (1536, 24),
             "gfx1102": (1024, 16), "gfx1103": (1024, 16)}
MAX_WAVES = 16


def waves_per_simd(target, vgprs):
    total, granule = VGPR_FILE.get(target, (1024, 16))
    if vgprs <= 0:
        return MAX_WAVES
    alloc = -(-vgprs // granule) * granule
    return min(MAX_WAVES, total // alloc)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr.strip()))
    return p.stdout


BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"


def fatbins_of(path, tools, tmp):
    """Paths of offload bundles (the .hip_fatbin contents) found in FILE."""
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(BUNDLE_MAGIC):
        return [(os.path.basename(path), path)]
    if is_archive(head):
        with open(path, "rb") as f:
            members = ar_members(f.read())
        objs = []
        for i, (name, body) in enumerate(members):
            p = os.path.join(tmp, "m%d_%s" % (i, re.sub(r"[^A-Za-z0-9_.]", "_", name)))
            with open(p, "wb") as g:
                g.write(body)
            objs.append((name, p))
    else:
        objs = [(os.path.basename(path), path)]
    out = []
    for name, obj in objs:
        sections = run([tools.readelf, "-S", "-W", obj])
        if ".hip_fatbin" not in sections:
            continue
        fb = obj + ".fatbin"
        run([tools.objcopy, "--dump-section=.hip_fatbin=" + fb, obj, os.path.join(tmp, "discard.o")])
        with open(fb, "rb") as g:
            if not g.read(len(BUNDLE_MAGIC)) == BUNDLE_MAGIC:
                continue
        out.append((name, fb))
    return out


def parse_metadata(notes):
    """Kernel records from `llvm-readelf --notes` AMDGPU metadata (YAML subset)."""
    kernels, cur, in_kernels = [], None, False
    for line in notes.splitlines():
        if line.startswith("amdhsa.kernels:"):
            in_kernels = True
            continue
        if in_kernels and re.match(r"^[A-Za-z.]", line):
            in_kernels = False
        if not in_kernels:
            continue
        m = re.match(r"^  - (\.\w+):\s*(.*)$", line)
        if m:
            cur = {}
            kernels.append(cur)
            if m.group(2):
                cur[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^    (\.\w+):\s*(.*)$", line)
        if m and cur is not None and m.group(2):
            cur[m.group(1)] = m.group(2).strip().strip("'\"")
    return kernels


def split_disassembly(text):
    """{symbol: disassembly text} from llvm-objdump -d."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:\s*$", line)
        if m:
            cur = m.group(1)
            out.setdefault(cur, [])
            continue
        if cur is not None:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def demangle(cxxfilt, names):
    if not cxxfilt or not names:
        return {}
    try:
        p = subprocess.run([cxxfilt], input="\n".join(names) + "\n", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
    except OSError:
        return {}
    out = p.stdout.splitlines()
    return dict(zip(names, out)) if p.returncode == 0 and len(out) == len(names) else {}


def as_int(v, default=0):
    try:
        return int(str(v), 0)
    except (TypeError, ValueError):
        return default


def markdown_table(name, targets, records):
    """Per-kernel register/LDS/scratch facts, one table row per (kernel, target)."""
    lines = ["<!-- generated by tests/isa/check_hip_isa.py (gate %s) -->" % name, "",
             "| kernel | target | VGPRs | SGPRs | LDS bytes | scratch | waves/SIMD | v_dot4_i32_iu8 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    order = {t: i for i, t in enumerate(targets)}
    for r in sorted(records, key=lambda r: (r["kernel"], order.get(r["target"], 99))):
        lines.append("| `%s` | %s | %d | %d | %d | %d | %d | %d |" % (
            r.get("demangled", r["kernel"]).replace("|", "\\|"), r["target"], r["vgprs"], r["sgprs"], r["lds_bytes"], r["scratch_bytes"],
            r["waves_per_simd"], r["dot4_iu8"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objdump", default="llvm-objdump-19")
    ap.add_argument("--readelf", default="llvm-readelf-19")
    ap.add_argument("--objcopy", default="llvm-objcopy-19")
    ap.add_argument("--bundler", default="clang-offload-bundler-19")
    ap.add_argument("--cxxfilt", default="", help="llvm-cxxfilt: demangled names in the report; KERNEL_REGEX matches either")
    ap.add_argument("--targets", required=True, help="semicolon/comma separated gfx targets")
    ap.add_argument("--entry", action="append", default=[], required=True,
                    help="FILE|KERNEL_REGEX|FLAGS (0, 1 = require v_dot4_i32_iu8, require=<mnemonic>, comma separated)")
    ap.add_argument("--json", help="write per-kernel facts here")
    ap.add_argument("--markdown", help="also write a Markdown table of the per-kernel facts here")
    ap.add_argument("--name", default="hip_isa")
    tools = ap.parse_args()
    targets = [t for t in re.split(r"[;,\s]+", tools.targets) if t]

    failures, records = [], []
    with tempfile.TemporaryDirectory(prefix="packfa-isa-") as tmp:
        for ei, entry in enumerate(tools.entry):
            # FILE|REGEX|0/1; the regex may itself contain '|'.
            if entry.count("|") < 2:
                print("bad --entry %r (want FILE|REGEX|0/1)" % entry, file=sys.stderr)
                return 2
            path, rest = entry.split("|", 1)
            pattern, flag = rest.rsplit("|", 1)
            regex = re.compile(pattern)
            items = [f.strip() for f in flag.split(",") if f.strip()]
            dot4 = any(f.lower() in ("1", "yes", "on", "true", "require_dot4") for f in items)
            required = [f.split("=", 1)[1] for f in items if f.lower().startswith("require=")]
            if not os.path.exists(path):
                failures.append("%s: file missing" % path)
                continue
            etmp = os.path.join(tmp, "e%d" % ei)
            os.makedirs(etmp)
            bundles = fatbins_of(path, tools, etmp)
            if not bundles:
                failures.append("%s: no .hip_fatbin device code found" % path)
                continue
            for target in targets:
                matched = 0
                for oi, (oname, fb) in enumerate(bundles):
                    listing = run([tools.bundler, "--list", "--type=o", "--input=" + fb]).split()
                    triple = [t for t in listing if t.endswith("--" + target)]
                    if not triple:
                        failures.append("%s(%s): no code object for %s (has: %s)" % (path, oname, target, " ".join(listing)))
                        continue
                    co = os.path.join(etmp, "o%d_%s.co" % (oi, target))
                    run([tools.bundler, "--unbundle", "--type=o", "--input=" + fb, "--targets=" + triple[0],
                         "--output=" + co])
                    kernels = parse_metadata(run([tools.readelf, "--notes", co]))
                    dis_text = run([tools.objdump, "-d", "--mcpu=" + target, co])
                    if re.search(r"\bv_dot4_i32_i8\b", dis_text):
                        failures.append("%s(%s) %s: forbidden mnemonic v_dot4_i32_i8" % (path, oname, target))
                    dis = split_disassembly(dis_text)
                    pretty = demangle(tools.cxxfilt, [k.get(".name", "?") for k in kernels])
                    for k in kernels:
                        name = k.get(".name", "?")
                        if not (regex.search(name) or regex.search(pretty.get(name, name))):
                            continue
                        matched += 1
                        body = dis.get(name, "")
                        n_dot4 = len(re.findall(r"\bv_dot4_i32_iu8\b", body))
                        n_req = {m: len(re.findall(r"\b%s\b" % re.escape(m), body)) for m in required}
                        vgprs = as_int(k.get(".vgpr_count"))
                        rec = {
                            "gate": tools.name, "target": target, "kernel": name, "object": oname,
                            "demangled": pretty.get(name, name),
                            "file": os.path.basename(path),
                            "vgprs": vgprs, "sgprs": as_int(k.get(".sgpr_count")),
                            "agprs": as_int(k.get(".agpr_count")),
                            "lds_bytes": as_int(k.get(".group_segment_fixed_size")),
                            "scratch_bytes": as_int(k.get(".private_segment_fixed_size")),
                            "vgpr_spills": as_int(k.get(".vgpr_spill_count")),
                            "sgpr_spills": as_int(k.get(".sgpr_spill_count")),
                            "dynamic_stack": k.get(".uses_dynamic_stack", "false") == "true",
                            "wavefront_size": as_int(k.get(".wavefront_size")),
                            "max_workgroup_size": as_int(k.get(".max_flat_workgroup_size")),
                            "waves_per_simd": waves_per_simd(target, vgprs),
                            "dot4_iu8": n_dot4, "require_dot4": dot4, "required": n_req,
                        }
                        records.append(rec)
                        what = "%s %s %s" % (target, oname, name)
                        if not body:
                            failures.append("%s: symbol not found in disassembly" % what)
                        if rec["scratch_bytes"] != 0 or rec["dynamic_stack"]:
                            failures.append("%s: scratch %d bytes (dynamic stack %s)" % (what, rec["scratch_bytes"], rec["dynamic_stack"]))
                        if rec["wavefront_size"] != 32:  # absent from the metadata reads as 0: a failure too
                            failures.append("%s: wavefront size %d, want 32" % (what, rec["wavefront_size"]))
                        if dot4 and n_dot4 == 0:
                            failures.append("%s: no v_dot4_i32_iu8" % what)
                        for m, n in n_req.items():
                            if n == 0:
                                failures.append("%s: no %s" % (what, m))
                if matched == 0:
                    failures.append("%s %s: no kernel matches /%s/" % (path, target, regex.pattern))

    for r in records:
        print("%-8s %-70s vgpr %3d sgpr %3d lds %6d scratch %d waves/simd %2d dot4 %d%s" % (
            r["target"], r["kernel"][:70], r["vgprs"], r["sgprs"], r["lds_bytes"], r["scratch_bytes"],
            r["waves_per_simd"], r["dot4_iu8"], "".join(" %s %d" % kv for kv in sorted(r["required"].items()))))
    if tools.json:
        os.makedirs(os.path.dirname(os.path.abspath(tools.json)), exist_ok=True)
        with open(tools.json, "w") as f:
            json.dump({"gate": tools.name, "targets": targets, "pass": not failures, "failures": failures,
                       "vgpr_file": {t: {"vgprs_per_lane": v[0], "granule": v[1]} for t, v in VGPR_FILE.items()},
                       "kernels": records}, f, indent=1)
    if tools.markdown:
        with open(tools.markdown, "w") as f:
            f.write(markdown_table(tools.name, targets, records))
    if failures:
        print("\nHIP ISA gate %s FAILED:" % tools.name)
        for f in failures:
            print("  - " + f)
        return 1
    print("\nHIP ISA gate %s passed: %d kernel instances on %d targets" % (tools.name, len(records), len(targets)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print("error: %s" % e, file=sys.stderr)
        sys.exit(2)
