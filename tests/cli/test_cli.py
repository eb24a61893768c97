"""CLI input handling (issue 21): every tool parses numbers strictly, rejects unknown options and
surplus arguments with a message naming them and exit code 2, explains empty results, exits 0
for --help, and does not report success when asked to measure without a GPU.

  test_cli.py --cli packfa-cli --version X.Y.Z [--bench packfa-bench] [--pdl-chain pdl_chain]
              [--pdl-tune pdl_tune] [--wrapper ./packfa]

Each case: argv, the expected exit code, words that must appear in the output (stderr for
errors, stdout otherwise). Errors must leave stdout empty (results only ever go to stdout).
"""
import argparse
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--cli", required=True)
ap.add_argument("--version", required=True)
ap.add_argument("--bench")
ap.add_argument("--pdl-chain")
ap.add_argument("--pdl-tune")
ap.add_argument("--wrapper")
args = ap.parse_args()

failures = []
ran = 0


def run(argv, timeout=120, env=None):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, env=env)


def case(exe, argv, rc, words=(), where=None, timeout=120):
    """where: 'err' or 'out' (default: err for rc 2, out otherwise)."""
    global ran
    ran += 1
    r = run([exe] + argv, timeout=timeout)
    label = "%s %s" % (os.path.basename(exe), " ".join(argv))
    where = where or ("err" if rc == 2 else "out")
    text = r.stderr if where == "err" else r.stdout
    problems = []
    if r.returncode != rc:
        problems.append("exit code %d, expected %d" % (r.returncode, rc))
    for w in words:
        if w not in text:
            problems.append("%r not in std%s" % (w, where))
    if rc == 2 and r.stdout.strip():
        problems.append("an error wrote to stdout: %r" % r.stdout[:200])
    if problems:
        failures.append("%s: %s\n    stdout: %s\n    stderr: %s" % (label, "; ".join(problems), r.stdout[-600:],
                                                                    r.stderr[-600:]))
    return r


cli = args.cli
info = run([cli, "info"])
gpu = info.returncode == 0 and "no device" not in info.stdout
print("packfa-cli info: %s" % info.stdout.strip())

CUSTOM = ["--layers", "4", "--kv-heads", "8", "--head-dim", "128"]
# ---- the inputs of issue 21 -------------------------------------------------------------------
case(cli, ["plan", "--context", "1e6"], 2, ["--context", "'1e6'", "not a whole number"])
case(cli, ["plan", "--context", "99999999999999999999"], 2, ["--context", "out of range"])
case(cli, ["plan", "--swa-layers", "99", "--layers", "4"], 2, ["--swa-layers", "99", "--layers 4"])
case(cli, ["plan", "--layers", "4", "--kv-heads", "8", "--head-dim", "80"], 2, ["--v q4_0", "head_dim 80", "% 32"])
case(cli, ["plan", "--model", "gemma-3-27b", "--layers", "10"], 2, ["--model gemma-3-27b", "--layers"])
case(cli, ["plan", "--v", "q8_0_planar"], 0, ["| q8_0_planar", "packed16 B=32"])
case(cli, ["demo", "--kv", "-5"], 2, ["--kv", "-5", "out of range"])
case(cli, ["demo", "--kv", "abc"], 2, ["--kv", "'abc'"])
case(cli, ["demo", "--bogus"], 2, ["unknown option '--bogus'"])
case(cli, ["quality", "--seed", "abc"], 2, ["--seed", "'abc'"])
case(cli, ["quality", "--kv", "2147483647"], 2, ["--kv", "2147483647", "out of range"])
case(cli, ["--help"], 0, ["usage: packfa-cli", "plan", "quality"])

# ---- more: numbers, ranges, combinations, unknowns, surplus ----------------------------------
case(cli, ["plan", "--context", " 5"], 2, ["--context", "not a whole number"])
case(cli, ["plan", "--context", "0x10"], 2, ["--context", "'0x10'"])
case(cli, ["plan", "--context", ""], 2, ["--context"])
case(cli, ["plan", "--context", "0"], 2, ["--context", "out of range"])
case(cli, ["plan", "--context"], 2, ["--context", "needs a value"])
case(cli, ["plan", "--context=4096"], 0, ["context 4096 tokens"])
case(cli, ["plan", "--contexts", "2.5"], 2, ["--contexts", "'2.5'"])
case(cli, ["plan", "--contexts", "0"], 2, ["--contexts", "out of range"])
case(cli, ["plan", "--layers", "0", "--kv-heads", "8", "--head-dim", "128"], 2, ["--layers", "out of range"])
case(cli, ["plan", "--layers", "4", "--kv-heads", "x", "--head-dim", "128"], 2, ["--kv-heads", "'x'"])
case(cli, ["plan", "--layers", "4", "--kv-heads", "8", "--head-dim", "100"], 2, ["--head-dim", "multiple of 16"])
case(cli, ["plan", "--layers", "4", "--kv-heads", "8"], 2, ["--head-dim"])
case(cli, ["plan"] + CUSTOM + ["--swa-layers", "2"], 2, ["--swa-layers 2", "--swa-window"])
case(cli, ["plan"] + CUSTOM + ["--swa-window", "512"], 2, ["--swa-window", "--swa-layers"])
case(cli, ["plan", "--v", "q9_0"], 2, ["--v", "unknown value 'q9_0'", "q8_0_planar"])
case(cli, ["plan", "--model", "nosuch-7b"], 2, ["--model", "nosuch-7b", "llama-3.1-8b"])
case(cli, ["plan", "--contxt", "5"], 2, ["'--contxt'", "did you mean --context"])
case(cli, ["plan", "--swa-full=1"], 2, ["--swa-full", "takes no value"])
case(cli, ["plan", "extra"], 2, ["unexpected argument 'extra'"])
case(cli, ["plan", "--layers", "4", "--kv-heads", "2", "--head-dim", "80", "--v", "all"], 0,
     ["packed16 B=16", "packed16 B=32 omitted", "q8_0, q4_0 V omitted"])
case(cli, ["plan", "--list"], 0, ["llama-3.1-8b", "gemma-3-27b"])
case(cli, ["plan", "--help"], 0, ["usage: packfa-cli plan"])
r = case(cli, ["plan", "--model", "llama-3.1-8b"], 0, ["model llama-3.1-8b", "| packed16 B=32 | q4_0"])
if r.stderr.strip():
    failures.append("plan wrote to stderr on success: %r" % r.stderr[:200])
case(cli, ["quality", "--d", "100"], 2, ["--d", "multiple of 32"])
case(cli, ["quality", "--d", "48"], 2, ["--d", "multiple of 32"])
case(cli, ["quality", "--queries", "6", "--kv-heads", "4"], 2, ["--queries", "--kv-heads 4"])
case(cli, ["quality", "--kv", "0"], 2, ["--kv", "out of range"])
case(cli, ["quality", "--kv-heads"], 2, ["--kv-heads", "needs a value"])
case(cli, ["quality", "surplus"], 2, ["unexpected argument 'surplus'"])
case(cli, ["quality", "--help"], 0, ["usage: packfa-cli quality"])
case(cli, ["demo", "--kv", "99999999999"], 2, ["--kv", "out of range"])
case(cli, ["demo", "--runs", "0"], 2, ["--runs", "out of range"])
case(cli, ["demo", "--kv"], 2, ["--kv", "needs a value"])
case(cli, ["demo", "extra"], 2, ["unexpected argument 'extra'"])
case(cli, ["demo", "--help"], 0, ["usage: packfa-cli demo", "--kv"])
case(cli, ["demo", "--kv", "64"], 0, ["64 keys", "error vs fp16 K + fp16 V attention", "saved"])
case(cli, ["info", "extra"], 2, ["unexpected argument 'extra'"])
case(cli, ["version"], 0, ["packfa " + args.version])
case(cli, ["nosuchcmd"], 2, ["unknown command 'nosuchcmd'"])

# ---- benches (CUDA builds) --------------------------------------------------------------------
if args.bench:
    b = args.bench
    case(b, ["--bogus"], 2, ["unknown option '--bogus'"])
    case(b, ["--reps", "10"], 2, ["--reps", "out of range"])
    case(b, ["--reps", "ten"], 2, ["--reps", "'ten'"])
    case(b, ["--kv", "1000"], 2, ["no case", "4096"])
    case(b, ["--d", "64"], 2, ["no case"])
    case(b, ["--chain-only", "--kv", "4096"], 2, ["--chain-only"])
    case(b, ["--v", "q9"], 2, ["--v", "unknown value"])
    case(b, ["--splits", "-1"], 2, ["--splits", "out of range"])
    case(b, ["--json"], 2, ["--json", "needs a value"])
    case(b, ["surplus"], 2, ["unexpected argument"])
    case(b, ["--help"], 0, ["usage: packfa-bench"])
    if not gpu:  # asked to measure with nothing to measure on: a failure that names the cause
        case(b, ["--quick"], 1, ["no GPU to measure on"], where="err")
for exe, bad in ((args.pdl_chain, ["--threads", "2000"]), (args.pdl_tune, ["--work", "-1"])):
    if not exe:
        continue
    case(exe, ["--n", "abc"], 2, ["--n", "'abc'"])
    case(exe, bad, 2, [bad[0], "out of range"])
    case(exe, ["--bogus"], 2, ["unknown option '--bogus'"])
    case(exe, ["surplus"], 2, ["unexpected argument"])
    case(exe, ["--help"], 0, ["usage:"])
    if not gpu:
        case(exe, [], 77, ["SKIP", "no CUDA device"])

# ---- the ./packfa wrapper (only what needs no build) ------------------------------------------
if args.wrapper:
    w = args.wrapper
    case(w, ["--help"], 0, ["./packfa demo", "./packfa test", "./packfa build"])
    case(w, ["nosuch"], 2, ["unknown command 'nosuch'"])
    case(w, ["build", "--bogus"], 2, ["--bogus"])
    if not gpu and not os.path.exists("/dev/nvidia0"):
        case(w, ["bench"], 1, ["no GPU"], where="err", timeout=60)

print("%d CLI cases, %d failed" % (ran, len(failures)))
for f in failures:
    print("FAILED " + f)
sys.exit(1 if failures else 0)
