"""Which build of berth this is, for ``berth --version``: the version alone says ``0.1.0`` for
builds hundreds of commits apart.

The build is, the first that applies:

1. in a git checkout (the package beside a ``.git``): the checkout's commit and its date, and
   ``modified`` when tracked files differ from it;
2. in an installed build (a wheel or a source build): the stamp ``setup.py`` wrote into the
   package when it was built (``_build.txt``: the commit and date of the tree it was built
   from, or the build's date where that tree was not a git checkout);
3. otherwise the date the package's metadata (its ``.dist-info``) was installed;
4. ``build unknown``.

``setup.py`` runs this file by path (no import of the package it is building).
"""

from __future__ import annotations

import os

STAMP = "_build.txt"  # in the package, written at build time (setup.py)
DIST = "gpu-berth"


def from_git(root: str) -> str | None:
    """ "commit 1a2b3c4 2026-11-28" (", modified": tracked files changed), or None where
    ``root`` is not a git checkout or git cannot be run. (git refuses a checkout another user
    owns, ``safe.directory``: its config could run commands as us. Left so: the build is then
    the stamp's or the metadata's.)"""
    import subprocess  # heavy (~3 ms): --version and builds only

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", root, *args], capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    head = git("log", "-1", "--format=%h %cs")
    if not head or len(head.split()) != 2:
        return None
    commit, date = head.split()
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"commit {commit} {date}" + (", modified" if changed else "")


def describe() -> str:
    """This build, in words (the module says where from)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if os.path.exists(os.path.join(root, ".git")):
        said = from_git(root)
        if said:
            return said
    try:
        with open(os.path.join(here, STAMP), encoding="utf-8") as f:
            stamp = f.read().strip()
        if stamp:
            return stamp
    except OSError:
        pass
    return _installed(here) or "build unknown"


def _installed(here: str) -> str | None:
    """ "installed 2026-11-28": when this package's metadata was written, or None."""
    import time  # rare: --version of a build without a stamp
    from importlib import metadata  # heavy (~5 ms): --version only

    try:
        dist = metadata.distribution(DIST)
        ours = os.path.join(str(dist.locate_file("berth")), "__init__.py")
        if not os.path.samefile(ours, os.path.join(here, "__init__.py")):
            return None  # (another copy's metadata)
        files = [str(dist.locate_file(f)) for f in dist.files or () if f.name == "METADATA"]
        stamp = os.stat(files[0] if files else ours).st_mtime
    except (metadata.PackageNotFoundError, OSError):
        return None
    return "installed " + time.strftime("%Y-%m-%d", time.gmtime(stamp))
