"""PEP 517 build backend for the packfa Python package, standard library only.

Why not setuptools: setuptools before 70.1 needs the separate `wheel` package to build a
wheel, and pip's build isolation downloads it; this backend needs nothing, so
`pip install ./python` works offline with or without --no-build-isolation.
Builds a pure-Python wheel of packfa/*.py (+ a generated _version.py) and an sdist.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "packfa"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PKG = os.path.join(HERE, NAME)


def _version():
    # Installed by CMake: packfa/_version.py. In a checkout: CMakeLists.txt's project(VERSION).
    vf = os.path.join(PKG, "_version.py")
    if os.path.exists(vf):
        m = re.search(r'__version__\s*=\s*"([^"]+)"', open(vf, encoding="utf-8").read())
        if m:
            return m.group(1)
    cm = os.path.join(HERE, "..", "CMakeLists.txt")
    if os.path.exists(cm):
        m = re.search(r"project\(\s*packfa\s+VERSION\s+([0-9.]+)", open(cm, encoding="utf-8").read())
        if m:
            return m.group(1)
    raise RuntimeError("packfa version not found: neither packfa/_version.py nor ../CMakeLists.txt")


def _metadata(version):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: packed16 K cache flash attention: ctypes bindings of the packfa C ABI\n"
            "License: MIT\nRequires-Python: >=3.8\n" % (NAME, version))


def _files(version):
    """(archive name, bytes) of the package, with _version.py generated when absent."""
    out = []
    for fn in sorted(os.listdir(PKG)):
        if fn.endswith(".py"):
            with open(os.path.join(PKG, fn), "rb") as f:
                out.append((NAME + "/" + fn, f.read()))
    if not any(n == NAME + "/_version.py" for n, _ in out):
        out.append((NAME + "/_version.py", ('__version__ = "%s"\n' % version).encode()))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _dist_info(version):
    di = "%s-%s.dist-info" % (NAME, version)
    lic = os.path.join(HERE, "LICENSE")
    if not os.path.exists(lic):
        lic = os.path.join(HERE, "..", "LICENSE")
    files = [(di + "/METADATA", _metadata(version).encode()),
             (di + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: packfa_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")]
    if os.path.exists(lic):
        files.append((di + "/LICENSE", open(lic, "rb").read()))
    return di, files


def _write_wheel(wheel_directory, entries, version):
    di, meta = _dist_info(version)
    name = "%s-%s-py3-none-any.whl" % (NAME, version)
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries + meta:
            z.writestr(arc, data)
            records.append(_record_line(arc, data))
        records.append(di + "/RECORD,,")
        z.writestr(di + "/RECORD", "\n".join(records) + "\n")
    return name


# ---- PEP 517 hooks ---------------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    di, files = _dist_info(version)
    for arc, data in files:
        path = os.path.join(metadata_directory, arc)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return di


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    return _write_wheel(wheel_directory, _files(version), version)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth file that puts this directory on sys.path (the checkout's packfa/).
    version = _version()
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % NAME, (HERE + "\n").encode())], version)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        def add(arc, data):
            info = tarfile.TarInfo(base + "/" + arc)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
        for rel in ("pyproject.toml", "README.md", "_build/packfa_build.py"):
            p = os.path.join(HERE, rel)
            if os.path.exists(p):
                add(rel, open(p, "rb").read())
        for arc, data in _files(version):
            add(arc, data)
        for lic in (os.path.join(HERE, "LICENSE"), os.path.join(HERE, "..", "LICENSE")):
            if os.path.exists(lic):
                add("LICENSE", open(lic, "rb").read())
                break
        add("PKG-INFO", _metadata(version).encode())
    return name
