#!/usr/bin/env python3
"""expect_rc.py RC COMMAND...: run COMMAND, exit 0 iff it exits with exactly RC.

For tests that must fail in one particular way (ctest's WILL_FAIL accepts any non-zero
exit, so a crash or a usage error would pass as the expected failure)."""
import subprocess
import sys


def main(argv):
    if len(argv) < 2:
        print("usage: expect_rc.py RC COMMAND...", file=sys.stderr)
        return 2
    want = int(argv[0])
    rc = subprocess.call(argv[1:])
    if rc != want:
        print(f"expect_rc: {argv[1:]} exited {rc}, expected {want}")
        return 1
    print(f"expect_rc: exited {rc} as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
