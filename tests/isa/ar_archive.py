"""Members of a System V / GNU (or BSD) `ar` archive, for the ISA gates (stdlib only).

Shared by check_cuda_spills.py and check_hip_isa.py: both read a static library's objects
without calling `ar` (one less tool the gates depend on).
"""

AR_MAGIC = b"!<arch>\n"


def is_archive(data):
    return data.startswith(AR_MAGIC)


def ar_members(data):
    """(name, bytes) of each member of the archive held in `data` (symbol tables skipped)."""
    if not is_archive(data):
        raise ValueError("not an ar archive")
    pos, names, out = len(AR_MAGIC), b"", []
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        name = hdr[0:16].decode("ascii", "replace").rstrip()
        size = int(hdr[48:58].decode("ascii").strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name == "//":  # GNU long-name table
            names = body
            continue
        if name in ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            continue
        if name.startswith("/") and name[1:].isdigit():
            off = int(name[1:])
            name = names[off:names.find(b"\n", off)].decode("utf-8", "replace")
        elif name.startswith("#1/"):  # BSD long name: stored in front of the body
            n = int(name[3:])
            name, body = body[:n].decode("utf-8", "replace").rstrip("\0"), body[n:]
        out.append((name.rstrip("/"), body))
    return out
