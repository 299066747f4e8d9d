"""The command that `berth run` and `berth submit` take: the words after ``--``, or ``--wrap``.

A command is run without a shell: each word is one argument. Scheduler.py's scheduler.py took the
task as one quoted string (``scheduler.py "train.py foo --bar 5"``); given to berth the same
way (``berth run -- "python job.py --x 5"``) it would name a program called
``python job.py --x 5``. Such a lone word with spaces that names no program is refused before
anything is claimed or queued, with the two ways to say it.
"""

from __future__ import annotations

import os

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def words(argv: Sequence[str], wrap: str | None, *, prog: str) -> list[str]:
    """The words after ``--`` (``[]`` with ``--wrap``); exactly one of the two must be given."""
    cmd = list(argv)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if cmd and wrap is not None:
        raise UsageError(
            f"{prog}: give the command after -- ({prog} -- python train.py) or --wrap "
            "'shell string', not both"
        )
    if not cmd and not wrap:
        raise UsageError(
            f"{prog}: no command; give it after -- ({prog} -- python train.py), or a shell "
            "string with --wrap 'python a.py && python b.py'"
        )
    if len(cmd) == 1 and any(c.isspace() for c in cmd[0]) and not _is_program(cmd[0]):
        import shlex  # rare: an error

        raise UsageError(
            f"{prog}: {cmd[0]!r} is one quoted string, and no program has that name: write its "
            f"words apart ({prog} -- {cmd[0]}) or give it to a shell with "
            f"--wrap {shlex.quote(cmd[0])}"
        )
    return cmd


def _is_program(name: str) -> bool:
    """Would exec find ``name`` (a path, or a file on $PATH)?"""
    if "/" in name:
        return os.path.exists(name)
    path = os.environ.get("PATH") or os.defpath
    return any(os.path.isfile(os.path.join(d or ".", name)) for d in path.split(os.pathsep))
