"""Build the fake ``libnvidia-ml.so.1`` from fakenvml.c, only when the source changed.

Usage: ``python tests/fakenvml/build.py [BUILD_DIR]`` prints the directory that holds the
library (put it on ``LD_LIBRARY_PATH``). From Python: ``build() -> str`` (the directory).

The build directory is keyed by a hash of the source and the compiler command, so an edited
fakenvml.c gets a fresh library and concurrent builds (pytest-xdist, two terminals) never see a
half-written file: the library is compiled under a temporary name and renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "fakenvml.c")
DEFAULT_BUILD_ROOT = os.path.join(HERE, "build")
LIBNAME = "libnvidia-ml.so.1"
CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-std=c11", "-pthread"]


def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError(
            "no C compiler found (gcc or cc): the fake NVML library needs one; "
            "install gcc (Debian: apt-get install gcc)"
        )
    return cc


def build(root: str = DEFAULT_BUILD_ROOT) -> str:
    """Compile fakenvml.c if needed; return the directory holding libnvidia-ml.so.1."""
    cc = _compiler()
    cmd = [cc, *CFLAGS, f"-Wl,-soname,{LIBNAME}"]
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + " ".join(cmd).encode()).hexdigest()[:16]
    out_dir = os.path.join(root, digest)
    lib = os.path.join(out_dir, LIBNAME)
    if os.path.exists(lib):
        return out_dir
    os.makedirs(out_dir, exist_ok=True)
    tmp = f"{lib}.{os.getpid()}.tmp"
    proc = subprocess.run(
        [*cmd, "-o", tmp, SOURCE, "-ldl"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building the fake NVML library failed:\n{proc.stderr}")
    os.replace(tmp, lib)
    return out_dir


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_BUILD_ROOT))
