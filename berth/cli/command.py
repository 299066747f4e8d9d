"""The command that `berth run` and `berth submit` take: the words after ``--``, or ``--wrap``.

A command is run without a shell: each word is one argument. Scheduler.py's scheduler.py took the
task as one quoted string (``scheduler.py "train.py foo --bar 5"``); given to berth the same
way (``berth run -- "python job.py --x 5"``) it would name a program called
``python job.py --x 5``. Such a lone word with spaces that names no program is refused before
anything is claimed or queued, with the two ways to say it; so is a command that would start
with a word like ``-1`` not after ``--``, or with a word that names no program right after a
flag and before ``--`` (``--requeue -1``, ``--requeue 3 -- true``: a flag given a value, which
argparse leaves as the command's first word).
"""

from __future__ import annotations

import os
import sys

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def words(argv: Sequence[str], wrap: str | None, *, prog: str) -> list[str]:
    """The words after ``--`` (``[]`` with ``--wrap``); exactly one of the two must be given."""
    cmd = list(argv)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    elif cmd and (cmd[0].startswith("-") or _a_flags_value(cmd)):
        flag = _flag_before(cmd[0])  # (--requeue -1, --requeue 3 -- true: a flag's "value")
        raise UsageError(
            f"{prog}: {cmd[0]!r} would be the command"
            + (f"; {flag} takes no value" if flag else "")
            + f": give the command after -- ({prog} -- python train.py)"
        )
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


def _a_flags_value(cmd: list[str]) -> bool:
    """``3 -- true`` after a flag (``--requeue 3 -- true``), ``3`` no program: the flag's
    value, as its user meant it, and the command after the ``--``."""
    return cmd[1:2] == ["--"] and bool(_flag_before(cmd[0])) and not _is_program(cmd[0])


def _flag_before(word: str) -> str:
    """The option word just before ``word`` on the command line, where it is one (``--requeue``
    in ``--requeue -1``), else "". Options that take a value never leave it there: argparse
    takes ``-1`` as their value."""
    for before, w in zip(sys.argv[:-1], sys.argv[1:], strict=True):
        if w == word and before.startswith("-") and before != "--" and "=" not in before:
            return before
    return ""


def _is_program(name: str) -> bool:
    """Would exec find ``name`` (a path, or a file on $PATH)?"""
    if "/" in name:
        return os.path.exists(name)
    path = os.environ.get("PATH") or os.defpath
    return any(os.path.isfile(os.path.join(d or ".", name)) for d in path.split(os.pathsep))
