"""`berth sweep`'s grid: a command template whose brace groups are the axes.

``python train.py --lr {1e-3,1e-4} --seed {0..4}`` is 2 x 5 = 10 commands, the first axis
varying slowest (``--lr 1e-3 --seed 0``, ``--lr 1e-3 --seed 1``, ...). A group is a list
(``{a,b,c}``) or a range of integers (``{0..4}``, ``{0..10..2}``, ``{10..0}``, zero-padded as
bash pads: ``{01..10}``); it may sit inside a word (``--out=run{1,2}``). Braces without a
comma or ``..`` (``{}``, ``{x}``) stay as they are, as in bash. Unlike bash, groups multiply
into commands instead of adding words to one command, and nothing is run by a shell: the
template is split into words as a shell would, and each word is one argument.
"""

from __future__ import annotations

import itertools
import re

from berth.errors import UsageError

_GROUP = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
MAX_COMMANDS = 10_000  # as an array's tasks


def _values(body: str, whole: str) -> list[str] | None:
    """The values of a group's body, or None if it is no group (kept literally)."""
    m = _RANGE.match(body)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1))
        if step == 0:
            raise UsageError(f"sweep: {whole!r}: a step of 0 never ends")
        width = max(len(m.group(1)), len(m.group(2))) if re.match(r"-?0\d", m.group(1)) else 0
        span = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        if len(span) > MAX_COMMANDS:  # (before making them: {1..99999999} took minutes)
            raise UsageError(
                f"sweep: {whole!r} is {len(span)} values; a grid has at most {MAX_COMMANDS} "
                "commands: take a larger step ({0..1000..10}) or a shorter range"
            )
        return [str(v).zfill(width) if width else str(v) for v in span]
    if ".." in body and "," not in body:
        raise UsageError(f"sweep: {whole!r}: a range is of integers ({{0..4}}, {{0..10..2}})")
    if "," in body:
        return body.split(",")
    return None


def expand(words: list[str]) -> tuple[list[list[str]], list[tuple[str, list[str]]]]:
    """(every command, the axes as (group text, values)) of a template's words."""
    if not words:
        raise UsageError("sweep: no command template")
    axes: list[tuple[str, list[str]]] = []
    parts: list[list[str | int]] = []  # per word: literal text, or an axis number
    for word in words:
        pieces: list[str | int] = []
        at = 0
        for m in _GROUP.finditer(word):
            values = _values(m.group(1), m.group(0))
            if values is None:
                continue
            pieces.append(word[at : m.start()])
            pieces.append(len(axes))
            axes.append((m.group(0), values))
            at = m.end()
        pieces.append(word[at:])
        parts.append(pieces)
    count = 1
    for _, values in axes:
        count *= len(values)
    if count > MAX_COMMANDS:
        raise UsageError(f"sweep: the grid has {count} commands; at most {MAX_COMMANDS}")
    commands = []
    for choice in itertools.product(*(values for _, values in axes)):
        commands.append(
            ["".join(choice[p] if isinstance(p, int) else p for p in pieces) for pieces in parts]
        )
    return commands, axes
