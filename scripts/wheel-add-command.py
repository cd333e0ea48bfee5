#!/usr/bin/env python3
"""Puts the `toolbrake` command into a wheel maturin built (scripts/package).

The wheel's data `scripts/` folder (`NAME-VERSION.data/scripts/toolbrake`, the wheel format's
place for executables) is what pip, pipx and uv install into the environment's `bin/`, as the
file is: here the static binary itself, not a Python entry point (a hook starts a process per
tool call). maturin's own `[tool.maturin] data` would need the folder to exist in every build
from source (the sdist, `maturin develop`), which have no binary to put there; so the file is
added to the finished wheel instead, with its line in RECORD (sha256, size), as the wheel
specification asks.

    wheel-add-command.py WHEEL BINARY
"""

import base64
import hashlib
import os
import sys
import zipfile


def main() -> None:
    wheel, binary = sys.argv[1], sys.argv[2]
    with open(binary, "rb") as f:
        command = f.read()
    digest = base64.urlsafe_b64encode(hashlib.sha256(command).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    record_info, record = next((i, d) for i, d in entries if i.filename.endswith(".dist-info/RECORD"))
    record_name = record_info.filename
    dist = record_name[: -len(".dist-info/RECORD")]
    name = f"{dist}.data/scripts/toolbrake"
    if any(i.filename == name for i, _ in entries):
        sys.exit(f"{wheel} already has {name}")

    tmp = wheel + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for info, data in entries:
            if info.filename == record_name:
                continue
            out.writestr(info, data)
        added = zipfile.ZipInfo(name, date_time=entries[0][0].date_time)
        added.external_attr = 0o100755 << 16  # a regular file, executable
        added.compress_type = zipfile.ZIP_DEFLATED
        out.writestr(added, command)
        lines = [l for l in record.decode().splitlines() if l and not l.startswith(record_name + ",")]
        lines.append(f"{name},sha256={digest},{len(command)}")
        lines.append(f"{record_name},,")
        out.writestr(record_info, "\n".join(lines) + "\n")
    os.replace(tmp, wheel)


if __name__ == "__main__":
    main()
