"""The script a submitted command runs, copied at submit (``berth submit train.sh``): what
runs is the copy, as sbatch runs the copy of the batch script it took, so editing the script
while the job waits (held, pending) changes nothing of what it runs.

The copy is named by its content (``DIR/scripts/<sha256, 16 hex>/<the script's name>``: the
same script submitted twice is one copy, and ``$0`` keeps its file name), written atomically
by the submitting user (mode 0700: the job runs as that user), never changed afterwards, in
a folder only that user may write to (:mod:`berth.wire.owndir`: else refused, as a copy
another user planted there would run in the job).
Where no copy can be written (no writable state dir), submit says so and the job runs the
script itself.
``DIR`` is where the backend's jobs can read it: the local queue's state dir, the Slurm
backend's log dir (shared with the nodes, as the logs are). Client side only.
"""

from __future__ import annotations

import os
import sys

from berth.errors import UsageError
from berth.wire.owndir import own_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def take(path: str, directory: str) -> str:
    """A copy of the script ``path`` under ``directory``; its path."""
    import hashlib  # heavy (~2 ms): a submitted script only

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"cannot read the script {path!r}: {e.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()[:16]
    scripts = own_dir(os.path.join(directory, "scripts"), "the folder of submitted scripts",
                      "give the backend's state or log dir a folder of yours")  # fmt: skip
    folder = os.path.join(scripts, digest)
    copy = os.path.join(folder, os.path.basename(path))
    if os.path.exists(copy):
        return copy
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = f"{copy}.{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700), "wb") as f:
        f.write(data)
    os.replace(tmp, copy)
    return copy


def apply(args: argparse.Namespace, directory: str) -> None:
    """The command of ``args`` running the copy of the script it names (``script_file``, set
    by :func:`berth.jobsfile.directives.apply`), not the script itself; nothing for a dry
    run (which writes nothing) or a command that is no script."""
    path = getattr(args, "script_file", None)
    if not path or getattr(args, "dry_run", False):
        return
    argv = list(args.argv)
    at = argv.index(path)
    try:
        argv[at] = take(path, directory)
    except OSError as e:  # (no writable state dir: a user without a home)
        sys.stderr.write(
            f"berth: cannot copy the script to {directory} ({e.strerror}): the job runs "
            f"{path} itself, as it is when it starts\n"
        )
        return
    args.argv = argv
