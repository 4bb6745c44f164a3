"""Check that every agentreel package in this venv is byte for byte the wheel in a wheelhouse.

``nox -s build`` runs this in each venv it makes outside the repository. Wheels rebuilt
with an unchanged version have the same name, and an installer's cache may hand back an
older build of that name: every installed file is compared with the sha256 the wheel's
``RECORD`` lists. Usage: ``python installed_from_wheelhouse.py WHEELHOUSE``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
import zipfile
from importlib.metadata import distributions
from pathlib import Path


def main() -> None:
    wheelhouse = Path(sys.argv[1])
    checked = 0
    for dist in distributions():
        name = dist.metadata["Name"]
        if not name.startswith("agentreel-"):
            continue
        stem = f"{name.replace('-', '_')}-{dist.version}"
        wheels = list(wheelhouse.glob(f"{stem}-*.whl"))
        if len(wheels) != 1:
            sys.exit(
                f"{name} {dist.version} is installed but {wheelhouse} holds {wheels or 'no'} wheel"
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            record = wheel.read(f"{stem}.dist-info/RECORD").decode("utf-8")
        for path, digest, _size in csv.reader(io.StringIO(record)):
            if not digest or ".dist-info/" in path:
                continue
            algorithm, _, expected = digest.partition("=")
            data = Path(str(dist.locate_file(path))).read_bytes()
            actual = base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).rstrip(b"=")
            if actual.decode() != expected:
                sys.exit(
                    f"{name}: installed {path} differs from {wheels[0].name}: an older build of "
                    "the same version came from the installer's cache; install with "
                    f"--refresh-package {name}"
                )
            checked += 1
    if checked == 0:
        sys.exit("no agentreel package is installed in this venv")
    print(f"{checked} installed agentreel files match the wheels in {wheelhouse}")


if __name__ == "__main__":
    main()
