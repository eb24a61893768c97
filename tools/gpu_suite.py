#!/usr/bin/env python3
"""The GPU suite in parallel: every Catch2 test case of every ctest entry labelled `gpu`, one
process a case, JOBS at a time (one process a case keeps a crash or a hang to one case, and
spreads the accuracy sweeps over the GPU's idle time between their host references).

    tools/gpu_suite.py BUILD_DIR [--jobs 8] [--timeout 400] [--log-dir DIR] [--filter REGEX]

Python entries (a `.py` in the command) run whole. A ctest entry's environment prefix
(`cmake -E env VAR=...`) and test spec (e.g. "[switches]") are kept: the spec selects the cases
listed, each then run by its escaped name with the same prefix. Prints per entry: processes,
how many exited 0, assertions (Catch2's summary line) and the names that matched nothing;
exits non-zero on any failure, skip (77), timeout or unmatched name.
"""
import argparse, concurrent.futures as cf, json, os, re, subprocess, sys, time


def catch_escape(name):
    # Catch2 v2.13 test-spec syntax: a backslash escapes the characters it would parse.
    return re.sub(r'([\\,\[\]*~"])', r'\\\1', name)


def assertions(text):
    m = re.search(r'All tests passed \((\d+) assertions? in (\d+) test cases?\)', text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.search(r'assertions:\s+(\d+)', text)
    return (int(m.group(1)) if m else 0), None


def run(cmd, timeout, log):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        rc, out = p.returncode, p.stdout.decode(errors='replace')
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b'').decode(errors='replace') + '\n[timeout]\n'
    if log:
        with open(log, 'w') as f:
            f.write(' '.join(cmd) + '\n' + out)
    return rc, out, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build')
    ap.add_argument('--jobs', type=int, default=8)
    ap.add_argument('--timeout', type=int, default=400)
    ap.add_argument('--log-dir')
    ap.add_argument('--filter', default='')
    a = ap.parse_args()
    if a.log_dir:
        os.makedirs(a.log_dir, exist_ok=True)
    js = json.loads(subprocess.check_output(['ctest', '-L', 'gpu', '--show-only=json-v1'], cwd=a.build))
    jobs = []  # (entry, label, cmd)
    for t in js['tests']:
        name = t['name']
        if a.filter and not re.search(a.filter, name):
            continue
        if 'command' not in t:  # its executable is not built (a partial build): say so, run the rest
            print(f'{name}: not built, skipped')
            continue
        cmd = t['command']
        if any(c.endswith('.py') for c in cmd):
            jobs.append((name, name, cmd))
            continue
        exe = max(i for i, c in enumerate(cmd) if os.path.isfile(c) and os.access(c, os.X_OK)
                  and not os.path.basename(c).startswith('cmake'))
        listed = subprocess.run(cmd[:exe + 1] + cmd[exe + 1:] + ['--list-test-names-only'],
                                stdout=subprocess.PIPE, cwd=a.build).stdout.decode()
        names = [n for n in listed.splitlines() if n.strip()]
        for n in names:
            jobs.append((name, n, cmd[:exe + 1] + [catch_escape(n)]))
    t0 = time.time()
    res = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        futs = {}
        for k, (entry, label, cmd) in enumerate(jobs):
            log = os.path.join(a.log_dir, f'{entry}-{k:03d}.log') if a.log_dir else None
            futs[ex.submit(run, cmd, a.timeout, log)] = (entry, label)
        for f in cf.as_completed(futs):
            entry, label = futs[f]
            rc, out, dt = f.result()
            n, cases = assertions(out)
            r = res.setdefault(entry, {'procs': 0, 'ok': 0, 'asserts': 0, 'bad': []})
            r['procs'] += 1
            unmatched = 'No test cases matched' in out
            if rc == 0 and not unmatched and (cases is None or cases >= 1 or entry.startswith('python')):
                r['ok'] += 1
            else:
                r['bad'].append(f'{label} (rc {rc}{", unmatched" if unmatched else ""}, {dt:.0f} s)')
            r['asserts'] += n
    bad = 0
    for entry in sorted(res):
        r = res[entry]
        print(f"{entry}: {r['ok']}/{r['procs']} processes rc=0, {r['asserts']} assertions")
        for b in r['bad']:
            print(f'  FAILED {b}')
            bad += 1
    print(f'suite: {len(jobs)} processes, {bad} failed, {time.time() - t0:.0f} s')
    return 1 if bad or not jobs else 0


if __name__ == '__main__':
    sys.exit(main())
