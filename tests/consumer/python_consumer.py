"""ctest consumer_python / consumer_pip: the Python package of an install prefix.

  python_consumer.py import <prefix> <version> <work dir>
      put <prefix>/share/packfa/python on PYTHONPATH, import packfa in a fresh interpreter
  python_consumer.py pip <prefix> <version> <work dir>
      pip install --no-index --no-build-isolation --target <work dir>/site <prefix>/share/packfa/python
      (offline), then import from there; exit 77 (skipped) when this Python has no pip
Either way the imported package must be the installed one, report <version>, and find the
installed libpackfa_c.so by itself (no PACKFA_LIB)."""
import os
import shutil
import subprocess
import sys

CHECK = r'''
import os, sys
where, version, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
import packfa
real = os.path.realpath
assert real(packfa.__file__).startswith(real(where) + os.sep), (packfa.__file__, where)
assert packfa.__version__ == version, (packfa.__version__, version)
lib = packfa.load()  # through the install's libdir (packfa/_install.py)
assert real(lib._name).startswith(real(prefix) + os.sep), (lib._name, prefix)
assert packfa.version(lib) == version, (packfa.version(lib), version)
try:
    packfa.forward(lib, packfa.AttnParams(batch=1, nq=1, n_q_heads=8, n_kv_heads=2, head_dim=100))
    raise AssertionError("no error for head_dim")
except packfa.Error as e:
    assert e.code == 1 and "head_dim" in str(e), str(e)
print("packfa python consumer OK: %s from %s, library %s" % (packfa.__version__, packfa.__file__, lib._name))
'''


def run_check(where, version, prefix, work):
    env = {k: v for k, v in os.environ.items() if k not in ("PACKFA_LIB", "PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = where
    r = subprocess.run([sys.executable, "-c", CHECK, where, version, prefix], cwd=work, env=env)
    return r.returncode


def main():
    mode, prefix, version, work = sys.argv[1:5]
    pkg = os.path.join(prefix, "share", "packfa", "python")
    if not os.path.isfile(os.path.join(pkg, "packfa", "__init__.py")):
        print("consumer: %s holds no Python package (did cmake --install run?)" % pkg)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if mode == "import":
        return run_check(pkg, version, prefix, work)
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        print("SKIP: %s has no pip" % sys.executable)
        return 77
    site = os.path.join(work, "site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                        "--disable-pip-version-check", "--no-warn-script-location", "--target", site, pkg],
                       cwd=work)
    if r.returncode != 0:
        print("consumer: offline pip install of %s failed" % pkg)
        return 1
    return run_check(site, version, prefix, work)


sys.exit(main())
