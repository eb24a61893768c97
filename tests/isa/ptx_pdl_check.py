#!/usr/bin/env python3
"""Static PDL race detector over PTX (python3, stdlib only). Rules: docs/pdl.md.

For every kernel (.entry) in the given PTX files, unless excluded:
  * it must contain an unpredicated `griddepcontrol.wait`;
  * on every control-flow path from the entry, that wait must come before
      - any global memory access: ld.global (incl. .nc), ldu, st.global, atom/red (global or
        generic), cp.async* / cp.reduce.async* with a global operand, tex/tld4/suld/sust/sured,
        multimem, discard.global;
      - any generic ld/st (no state space: the pointer may be global), unless its address
        provably derives from the local stack or a shared variable;
      - any call (the callee may access global memory);
      - every ret/exit (a grid whose threads exit unwaited can complete before its own
        predecessor, breaking the next kernel's wait);
  * ld.global.nc after the wait is also an error (--nc): non-coherent loads assume data that
    is read-only for the kernel's lifetime, which predecessor data is not under PDL.
ld.param / ld.shared / ld.local / ld.const are always fine. Loads whose address derives only
from allow-listed parameters (constant tables: --allow) are fine anywhere.

The path analysis is a must-analysis over the PTX control-flow graph (labels, bra, predicated
bra, ret/exit): a point is "waited" only if every path to it passes an unpredicated wait. It
is conservative: a wait inside a callee (.func), a predicated wait, or a wait on only some
paths does not count.

Allow-list entries: KERNEL:PARAM where KERNEL is a glob (no glob characters = substring)
matched against the mangled and the demangled name, and PARAM is a parameter index or name,
optionally +BYTE_OFFSET inside a by-value struct parameter (packfa kernels take one params
struct: `fa_kernel:0+24` allows loads through the pointer at byte 24 of param 0), or
`sym:NAME` for a global symbol.

Exit status: 0 clean; 1 violations (one message each); 2 usage / parse error; 3 nothing was
checked (no kernel in the files, or every kernel excluded): a check of nothing is no pass.
--expect-flagged GLOB (repeatable) inverts: exit 0 iff the flagged kernels are exactly those
matching the globs. --expect-plain: exit 0 iff no griddepcontrol instruction appears at all
(a build for architectures below sm_90).
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

SPACES = {"global", "shared", "local", "param", "const", "tex", "shared::cta", "shared::cluster"}
GLOBAL_TEX_OPS = {"tex", "tld4", "suld", "sust", "sured", "suq"}


@dataclass
class Instr:
    line: int
    text: str
    pred: str | None
    opcode: str
    operands: list[str]
    labels: list[str] = field(default_factory=list)


@dataclass
class Kernel:
    path: str
    name: str
    params: list[str]
    body: list[Instr]
    line: int
    demangled: str = ""


@dataclass
class Violation:
    line: int
    text: str
    what: str


# ---------------------------------------------------------------------------------------------
# parsing

def strip_comments(src: str) -> str:
    # Keep newlines so that line numbers survive.
    def block(m: re.Match) -> str:
        return "\n" * m.group(0).count("\n")

    src = re.sub(r"/\*.*?\*/", block, src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def split_operands(s: str) -> list[str]:
    if "[" not in s and "{" not in s and "(" not in s:
        return [x.strip() for x in s.split(",") if x.strip()]
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


LABEL_RE = re.compile(r"\s*([A-Za-z_$%][\w$]*)\s*:(?!:)")


def parse_body(text: str, first_line: int) -> tuple[list[Instr], set[str]]:
    """Statements of a function body. Returns instructions and shared symbols declared in it."""
    instrs: list[Instr] = []
    shared_syms: set[str] = set()
    pending_labels: list[str] = []
    line = first_line
    # Scope braces inside bodies ({ .reg ...; ... }) carry no control flow. They only ever
    # start a statement (we split at ';'), so stripping leading braces keeps vector operands.
    for chunk in text.split(";"):
        chunk_line = line
        line += chunk.count("\n")
        pos = len(re.match(r"[\s{}]*", chunk).group(0))
        while True:
            m = LABEL_RE.match(chunk, pos)
            if not m:
                break
            pending_labels.append(m.group(1))
            pos = m.end()
            pos += len(re.match(r"[\s{}]*", chunk[pos:]).group(0))
        stmt_line = chunk_line + chunk.count("\n", 0, pos)
        s = chunk[pos:]
        s = s.strip()
        if not s:
            continue
        if s.startswith("."):
            m = re.match(r"\.shared\b.*?([A-Za-z_$][\w$]*)\s*(\[[^\]]*\])*\s*$", s)
            if m:
                shared_syms.add(m.group(1))
            continue
        pred = None
        m = re.match(r"^@(!?%?[\w$]+)\s+", s)
        if m:
            pred = m.group(1)
            s = s[m.end():]
        parts = s.split(None, 1)
        opcode = parts[0]
        operands = split_operands(parts[1]) if len(parts) > 1 else []
        instrs.append(Instr(stmt_line, " ".join(s.split()), pred, opcode, operands, pending_labels))
        pending_labels = []
    if pending_labels:
        instrs.append(Instr(line, "", None, "<end>", [], pending_labels))
    return instrs, shared_syms


def find_matching_brace(src: str, open_idx: int) -> int:
    depth = 0
    for i in range(open_idx, len(src)):
        c = src[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced braces")


def parse_ptx(path: str) -> tuple[list[Kernel], set[str], set[str]]:
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    src = strip_comments(raw)
    kernels: list[Kernel] = []
    module_shared: set[str] = set()
    module_global: set[str] = set()
    # module-scope variables
    for m in re.finditer(r"^\s*(?:\.visible\s+|\.extern\s+|\.weak\s+)*\.(shared|global|const)\b([^;]*);", src, re.M):
        names = re.findall(r"([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])*\s*(?:=|$)", m.group(2).strip())
        toks = re.findall(r"[A-Za-z_$][\w$]*", m.group(2))
        name = names[-1] if names else (toks[-1] if toks else None)
        if name:
            (module_shared if m.group(1) == "shared" else module_global).add(name)
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(", src):
        name = m.group(1)
        close = src.index(")", m.end())
        sig = src[m.end():close]
        params = re.findall(r"\.param\s+[^,]*?([\w$]+)\s*(?:\[\d*\])?\s*(?:,|$)", sig.strip() + ",")
        brace = src.index("{", close)
        # directives between ) and { (e.g. .maxntid) are fine
        end = find_matching_brace(src, brace)
        first_line = src.count("\n", 0, brace) + 1
        body, shared = parse_body(src[brace + 1:end], first_line)
        k = Kernel(path, name, params, body, src.count("\n", 0, m.start()) + 1)
        k.shared_syms = shared | module_shared  # type: ignore[attr-defined]
        k.global_syms = module_global  # type: ignore[attr-defined]
        kernels.append(k)
    return kernels, module_shared, module_global


def demangle_all(names: list[str]) -> dict[str, str]:
    out = {n: n for n in names}
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not tool or not names:
        return out
    try:
        r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30)
        lines = r.stdout.splitlines()
        if len(lines) == len(names):
            out = dict(zip(names, lines))
    except (OSError, subprocess.SubprocessError):
        pass
    return out


# ---------------------------------------------------------------------------------------------
# matching

def glob_match(pattern: str, k: Kernel) -> bool:
    if not any(c in pattern for c in "*?["):
        return pattern in k.name or pattern in k.demangled
    return fnmatch.fnmatchcase(k.name, pattern) or fnmatch.fnmatchcase(k.demangled, pattern)


@dataclass
class Allow:
    kernel: str
    param: str | None = None   # index (as str) or name
    offset: int | None = None
    sym: str | None = None


def parse_allow(spec: str) -> Allow:
    if ":" not in spec:
        raise ValueError(f"--allow {spec!r}: expected KERNEL:PARAM[+OFFSET] or KERNEL:sym:NAME")
    kern, rest = spec.split(":", 1)
    if rest.startswith("sym:"):
        return Allow(kern, sym=rest[4:])
    m = re.fullmatch(r"([\w$]+)(?:\+(\d+|0x[0-9a-fA-F]+))?", rest)
    if not m:
        raise ValueError(f"--allow {spec!r}: bad parameter spec {rest!r}")
    off = int(m.group(2), 0) if m.group(2) is not None else None
    return Allow(kern, m.group(1), off)


def origin_allowed(origin, k: Kernel, allows: list[Allow]) -> bool:
    for a in allows:
        if not glob_match(a.kernel, k):
            continue
        if origin[0] == "gsym" and a.sym is not None and a.sym == origin[1]:
            return True
        if origin[0] == "param" and a.param is not None:
            name, off = origin[1], origin[2]
            idx = k.params.index(name) if name in k.params else -1
            if a.param == name or (a.param.isdigit() and int(a.param) == idx):
                if a.offset is None or a.offset == off:
                    return True
    return False


# ---------------------------------------------------------------------------------------------
# analysis

REG_RE = re.compile(r"%[\w$]+")
ADDR_RE = re.compile(r"\[\s*([%\w$.]+)\s*(?:\+\s*(-?(?:0x[0-9a-fA-F]+|\d+)))?\s*\]")


def address_of(op: str):
    m = ADDR_RE.search(op)
    if not m:
        return None, None
    return m.group(1), (int(m.group(2), 0) if m.group(2) else 0)


def classify(ins: Instr):
    """('global'|'generic'|'call'|'exit'|None, address_operand_or_None, is_nc)."""
    toks = ins.opcode.split(".")
    base = toks[0]
    spaces = SPACES.intersection(toks)
    nc = "nc" in toks
    addrs = [o for o in ins.operands if o.startswith("[")]
    if base in ("ld", "ldu"):
        if "param" in spaces or "shared" in spaces or "shared::cta" in spaces or "shared::cluster" in spaces \
                or "local" in spaces or "const" in spaces:
            return None, None, False
        return ("global" if "global" in spaces else "generic"), (addrs[0] if addrs else None), nc
    if base == "st":
        if spaces - {"global"}:
            return None, None, False
        if "async" in toks:
            return None, None, False
        return ("global" if "global" in spaces else "generic"), (addrs[0] if addrs else None), False
    if base in ("atom", "red"):
        if spaces - {"global"} or "async" in toks:
            return None, None, False
        return ("global" if "global" in spaces else "generic"), (addrs[0] if addrs else None), False
    if base in ("cp",):
        if "prefetch" in toks:
            return None, None, False
        if any(t == "global" for t in toks) or "tensor" in toks:
            # operand order: destination first; for shared<-global the source is the 2nd.
            if len(addrs) >= 2 and toks.index("global") > 0 and "shared" in " ".join(toks) \
                    and [t for t in toks if t in ("global",) or t.startswith("shared")][0].startswith("shared"):
                return "global", addrs[1], False
            return "global", (addrs[0] if addrs else None), False
        return None, None, False
    if base in GLOBAL_TEX_OPS:
        return "global", None, False
    if base == "multimem":
        return "global", (addrs[0] if addrs else None), False
    if base == "discard" and "global" in toks:
        return "global", (addrs[0] if addrs else None), False
    if base == "call":
        return "call", None, False
    if base in ("ret", "exit"):
        return "exit", None, False
    return None, None, False


NO_DST = {"st", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "call", "griddepcontrol", "membar",
          "fence", "prefetch", "prefetchu", "cp", "trap", "pmevent", "discard", "applypriority", "stmatrix",
          "sust", "sured", "multimem", "nanosleep", "wgmma", "setmaxnreg", "elect", "<end>", "brkpt"}


def compute_taint(k: Kernel) -> dict[str, frozenset]:
    """Register -> set of pointer origins, flow-insensitive (union; two passes for loops)."""
    params = set(k.params)
    shared = getattr(k, "shared_syms", set())
    gsyms = getattr(k, "global_syms", set())
    taint: dict[str, set] = {"%SP": {"local"}, "%SPL": {"local"}}

    def sym_origin(tok: str):
        if tok in params:
            return ("paramaddr", tok)
        if tok.startswith("__local_depot"):
            return "local"
        if tok in shared:
            return "shared"
        if tok in gsyms:
            return ("gsym", tok)
        return None

    for _ in range(2):
        for ins in k.body:
            base = ins.opcode.split(".")[0]
            if base in NO_DST or not ins.operands:
                continue
            dst_op = ins.operands[0]
            dsts = REG_RE.findall(dst_op)
            if not dsts:
                continue
            srcs_ops = ins.operands[1:]
            new: set = set()
            if base in ("ld", "ldu", "atom", "ld.global"):
                a, off = address_of(" ".join(srcs_ops))
                toks = ins.opcode.split(".")
                if a is not None and a in params:
                    new.add(("param", a, off))
                elif a is not None and a.startswith("%"):
                    origins = taint.get(a, set())
                    pa = [o for o in origins if isinstance(o, tuple) and o[0] == "paramaddr"]
                    if pa and ("param" in toks or not SPACES.intersection(toks)):
                        for o in pa:
                            new.add(("param", o[1], None))
                    else:
                        new.add("mem")
                else:
                    new.add("mem")
            else:
                for op in srcs_ops:
                    for tok in re.findall(r"%?[A-Za-z_$][\w$]*", op):
                        if tok.startswith("%"):
                            new |= taint.get(tok, set())
                        else:
                            o = sym_origin(tok)
                            if o is not None:
                                new.add(o)
            for d in dsts:
                taint.setdefault(d, set()).update(new)
    return {r: frozenset(s) for r, s in taint.items()}


def address_origins(addr_op: str | None, k: Kernel, taint) -> frozenset:
    if addr_op is None:
        return frozenset()
    base, off = address_of(addr_op)
    if base is None:
        return frozenset()
    if base.startswith("%"):
        return taint.get(base, frozenset())
    if base in k.params:
        return frozenset({("paramaddr", base)})
    if base.startswith("__local_depot"):
        return frozenset({"local"})
    if base in getattr(k, "shared_syms", set()):
        return frozenset({"shared"})
    return frozenset({("gsym", base)})


def fmt_origins(origins: frozenset, k: Kernel) -> str:
    parts = []
    for o in sorted(origins, key=str):
        if isinstance(o, tuple) and o[0] == "param":
            idx = k.params.index(o[1]) if o[1] in k.params else "?"
            parts.append(f"param {idx}" + (f"+{o[2]}" if o[2] is not None else "+?"))
        elif isinstance(o, tuple):
            parts.append(f"{o[0]} {o[1]}")
        else:
            parts.append(str(o))
    return ", ".join(parts) if parts else "unknown"


def is_wait(ins: Instr) -> bool:
    return ins.opcode == "griddepcontrol.wait" and ins.pred is None


def build_cfg(body: list[Instr]) -> list[list[int]]:
    label_at: dict[str, int] = {}
    for i, ins in enumerate(body):
        for lab in ins.labels:
            label_at[lab] = i
    succ: list[list[int]] = []
    n = len(body)
    for i, ins in enumerate(body):
        base = ins.opcode.split(".")[0]
        nxt = [i + 1] if i + 1 < n else []
        if base == "bra":
            tgt = ins.operands[-1].strip() if ins.operands else ""
            t = [label_at[tgt]] if tgt in label_at else []
            succ.append(t + (nxt if ins.pred else []))
        elif base == "brx":
            succ.append(sorted(set(label_at.values())) + (nxt if ins.pred else []))
        elif base in ("ret", "exit", "trap"):
            succ.append(nxt if ins.pred else [])
        else:
            succ.append(nxt)
    return succ


def waited_before(body: list[Instr]) -> list[bool]:
    """waited[i]: every path from the entry to instruction i passed an unpredicated wait."""
    n = len(body)
    if n == 0:
        return []
    succ = build_cfg(body)
    preds: list[list[int]] = [[] for _ in range(n)]
    for i, ss in enumerate(succ):
        for s in ss:
            preds[s].append(i)
    w_in = [True] * n
    w_in[0] = False
    changed = True
    while changed:
        changed = False
        for i in range(n):
            if i == 0:
                v = False  # entry (a label at the top may also be a loop target: still unwaited)
            else:
                ps = preds[i]
                v = all(w_in[p] or is_wait(body[p]) for p in ps) if ps else True
            if v != w_in[i]:
                w_in[i] = v
                changed = True
    return w_in


def check_kernel(k: Kernel, allows: list[Allow], nc_mode: str) -> tuple[list[Violation], list[Violation]]:
    errs: list[Violation] = []
    warns: list[Violation] = []
    taint = compute_taint(k)
    if not any(is_wait(i) for i in k.body):
        errs.append(Violation(k.line, "", "no unpredicated griddepcontrol.wait in the kernel"))
    waited = waited_before(k.body)
    for i, ins in enumerate(k.body):
        kind, addr, nc = classify(ins)
        if kind is None:
            continue
        if kind == "exit":
            if not waited[i]:
                errs.append(Violation(ins.line, ins.text, "exits on a path without griddepcontrol.wait"))
            continue
        if kind == "call":
            if not waited[i]:
                errs.append(Violation(ins.line, ins.text, "call before griddepcontrol.wait (callee may touch global memory)"))
            continue
        origins = address_origins(addr, k, taint)
        if kind == "generic" and origins and all(o in ("local", "shared") for o in origins):
            continue
        if kind == "generic" and origins and all(isinstance(o, tuple) and o[0] == "paramaddr" for o in origins):
            continue  # generic access to the kernel's own parameter space
        allowed = bool(origins) and all(origin_allowed(o, k, allows) for o in origins)
        if allowed:
            continue
        if not waited[i]:
            what = {"global": "global memory access", "generic": "generic (possibly global) access"}[kind]
            errs.append(Violation(ins.line, ins.text,
                                  f"{what} before griddepcontrol.wait on some path (address from {fmt_origins(origins, k)})"))
        elif nc and nc_mode != "ignore":
            v = Violation(ins.line, ins.text,
                          f"non-coherent load (restrict/__ldg) of possibly predecessor-written data "
                          f"(address from {fmt_origins(origins, k)}); allow-list it if it is a constant table")
            (errs if nc_mode == "error" else warns).append(v)
    return errs, warns


# ---------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ptx", nargs="+")
    ap.add_argument("--exclude", action="append", default=[], metavar="KERNEL_GLOB",
                    help="kernel not enrolled in PDL (not checked)")
    ap.add_argument("--allow", action="append", default=[], metavar="KERNEL:PARAM[+OFF]",
                    help="loads through this parameter (constant table) are fine before the wait")
    ap.add_argument("--config", action="append", default=[], metavar="FILE",
                    help="lines 'exclude GLOB' / 'allow KERNEL:PARAM[+OFF]'; '#' comments")
    ap.add_argument("--nc", choices=["error", "warn", "ignore"], default="error",
                    help="ld.global.nc after the wait on non-allow-listed data (default: error)")
    ap.add_argument("--expect-flagged", action="append", default=[], metavar="KERNEL_GLOB",
                    help="self-test: succeed iff exactly the matching kernels are flagged")
    ap.add_argument("--expect-plain", action="store_true",
                    help="succeed iff no griddepcontrol instruction appears (sm < 90 build)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)

    excludes = list(a.exclude)
    allow_specs = list(a.allow)
    for cfg in a.config:
        try:
            with open(cfg, encoding="utf-8") as f:
                cfg_lines = f.read().splitlines()
            for ln in cfg_lines:
                ln = ln.split("#", 1)[0].strip()
                if not ln:
                    continue
                kw, _, val = ln.partition(" ")
                if kw == "exclude":
                    excludes.append(val.strip())
                elif kw == "allow":
                    allow_specs.append(val.strip())
                else:
                    print(f"ptx_pdl_check: {cfg}: unknown line {ln!r}", file=sys.stderr)
                    return 2
        except OSError as e:
            print(f"ptx_pdl_check: {e}", file=sys.stderr)
            return 2
    try:
        allows = [parse_allow(s) for s in allow_specs]
    except ValueError as e:
        print(f"ptx_pdl_check: {e}", file=sys.stderr)
        return 2

    kernels: list[Kernel] = []
    for p in a.ptx:
        try:
            ks, _, _ = parse_ptx(p)
        except (OSError, ValueError) as e:
            print(f"ptx_pdl_check: {p}: {e}", file=sys.stderr)
            return 2
        if a.expect_plain:
            with open(p, encoding="utf-8", errors="replace") as f:
                txt = strip_comments(f.read())
            if "griddepcontrol" in txt:
                print(f"ptx_pdl_check: FAIL {p}: griddepcontrol instruction in a build expected to be plain")
                return 1
        kernels.extend(ks)
    if a.expect_plain:
        if not kernels:
            print(f"ptx_pdl_check: FAIL: no kernel in {len(a.ptx)} file(s): nothing was checked")
            return 3
        print(f"ptx_pdl_check: ok: {len(a.ptx)} file(s), {len(kernels)} kernel(s), no griddepcontrol")
        return 0

    dm = demangle_all([k.name for k in kernels])
    for k in kernels:
        k.demangled = dm.get(k.name, k.name)

    flagged: list[Kernel] = []
    n_checked = n_excluded = n_viol = 0
    for k in kernels:
        if any(glob_match(g, k) for g in excludes):
            n_excluded += 1
            if not a.quiet:
                print(f"  excluded  {k.demangled}")
            continue
        n_checked += 1
        errs, warns = check_kernel(k, allows, a.nc)
        for w in warns:
            print(f"{k.path}:{w.line}: warning: {k.demangled}: {w.what}: `{w.text}`")
        if errs:
            flagged.append(k)
            n_viol += len(errs)
            print(f"FLAGGED {k.demangled}  [{k.name}]  ({k.path})")
            for v in errs:
                loc = f"{k.path}:{v.line}"
                print(f"  {loc}: {v.what}" + (f": `{v.text}`" if v.text else ""))
        elif not a.quiet:
            print(f"  ok        {k.demangled}")

    print(f"ptx_pdl_check: {n_checked} kernel(s) checked, {n_excluded} excluded, "
          f"{len(flagged)} flagged, {n_viol} violation(s)")

    if n_checked == 0:
        print(f"ptx_pdl_check: FAIL: no kernel checked ({len(kernels)} found, {n_excluded} excluded)")
        return 3
    if a.expect_flagged:
        missing = [g for g in a.expect_flagged if not any(glob_match(g, k) for k in flagged)]
        unexpected = [k for k in flagged if not any(glob_match(g, k) for g in a.expect_flagged)]
        for g in missing:
            print(f"ptx_pdl_check: SELF-TEST FAIL: expected a flagged kernel matching {g!r}, none flagged")
        for k in unexpected:
            print(f"ptx_pdl_check: SELF-TEST FAIL: {k.demangled} flagged but not expected")
        if missing or unexpected:
            return 1
        print("ptx_pdl_check: self-test ok: exactly the planted bugs were flagged")
        return 0
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
