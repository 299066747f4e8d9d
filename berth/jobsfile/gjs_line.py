"""One line of the GPU Job Scheduler's jobs file: ``priority,script_path,conda_env,arguments,allowed_gpus``.

As the GPU Job Scheduler read it (``line.split(',', maxsplit=4)``, each field stripped): the first four
commas separate the fields and the fifth field keeps its own (``4,5,6,7``). Refinements, none
of which changes a line the GPU Job Scheduler accepted:

- a comma inside quotes separates nothing (``--names "a,b"``);
- ``#`` at the start of a word, outside quotes, starts a comment (the GPU Job Scheduler's own example
  ``0,/path/to/script3.py,baseenv,,0-3 # GPU range``); a line that is only a comment is
  skipped, as are blank lines;
- every error names the line and the column of the field, and says what was expected
  (the GPU Job Scheduler logged a warning and dropped the line, or only the bad GPU id).

Fields: ``priority`` an integer, lower first (berth's order is the other way round: see
:func:`berth_priority`); ``script_path`` required; ``conda_env`` empty for none; ``arguments``
split as a shell would (quotes), never run by one; ``allowed_gpus`` a GPU list with ranges
(``0-3``, ``4,5,6,7``), empty for any GPU.
"""

from __future__ import annotations

import re
import shlex

from berth.errors import UsageError
from berth.units import parse_gpu_indices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

FIELDS = ("priority", "script_path", "conda_env", "arguments", "allowed_gpus")
HEADER = ",".join(FIELDS)
_GJS_LINE = re.compile(r"\s*[+-]?\d+\s*,")


class GjsLine:
    """A parsed line; ``columns``: the 1-based column where each field starts."""

    __slots__ = ("args", "columns", "conda", "gpu_ids", "line", "priority", "script", "text")

    def __init__(
        self,
        line: int,
        text: str,
        priority: int,
        script: str,
        conda: str | None,
        args: list[str],
        gpu_ids: list[int] | None,
        columns: list[int],
    ) -> None:
        self.line = line
        self.text = text
        self.priority = priority
        self.script = script
        self.conda = conda
        self.args = args
        self.gpu_ids = gpu_ids
        self.columns = columns


def berth_priority(gjs_priority: int) -> int:
    """The GPU Job Scheduler runs lower numbers first; berth runs higher ones first: its priority ``p``
    is berth priority ``-p`` (0 stays 0, 1 comes after it, -1 before it)."""
    return -gjs_priority


def _unquoted(text: str) -> Iterator[tuple[int, str]]:
    """(index, character) of each character of ``text`` outside quotes ('...' or "..."),
    the quote marks left out."""
    quote = ""
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        else:
            yield i, c


def strip_comment(text: str) -> str:
    """``text`` up to a ``#`` that starts a word outside quotes (as a shell reads it)."""
    for i, c in _unquoted(text):
        if c == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def is_job_line(text: str) -> bool:
    """Not blank, not only a comment, and not the format's header line (:data:`HEADER`, as
    the GPU Job Scheduler's README gives its format: a file saved from it starts with it)."""
    body = strip_comment(text).strip()
    return bool(body) and "".join(body.split()).lower() != HEADER


def looks_like(text: str) -> bool:
    """Whether a job line is in the GPU Job Scheduler's format: an integer, then a comma."""
    return _GJS_LINE.match(text) is not None


def split_fields(text: str) -> list[tuple[int, str]]:
    """(0-based column, raw text) of each field: split at the first four commas outside
    quotes."""
    out: list[tuple[int, str]] = []
    start = 0
    for i, c in _unquoted(text):
        if c == "," and len(out) < len(FIELDS) - 1:
            out.append((start, text[start:i]))
            start = i + 1
    out.append((start, text[start:]))
    return out


def _column(raw: str, start: int) -> int:
    """1-based column of a field's first non-blank character."""
    return start + (len(raw) - len(raw.lstrip())) + 1


def parse(text: str, line: int, where: str) -> GjsLine:
    """Parse job line ``text`` (number ``line``; ``where`` is ``file:line`` for errors).
    Raises UsageError ``where:column: what is wrong; what to write``."""
    body = strip_comment(text).rstrip()
    fields = split_fields(body)
    cols = [_column(raw, start) for start, raw in fields]

    def bad(k: int, why: str) -> UsageError:
        return UsageError(f"{where}:{cols[k]}: {why} (the GPU Job Scheduler's format: {HEADER})")

    values = [raw.strip() for _, raw in fields]
    try:
        priority = int(values[0])
    except ValueError:
        raise bad(0, f"priority {values[0]!r} is not an integer") from None
    if len(values) < 2 or not values[1]:
        raise UsageError(
            f"{where}:{len(body) + 1}: no script_path: a line needs at least priority,script_path "
            f"(the GPU Job Scheduler's format: {HEADER})"
        )
    script = values[1]
    if any(c.isspace() for c in script) or script[0] in "\"'":
        raise bad(1, f"script_path {script!r} is not one path (arguments go in the 4th field)")
    conda = values[2] if len(values) > 2 and values[2] else None
    if conda is not None and (any(c.isspace() for c in conda) or conda[0] in "\"'-"):
        raise bad(2, f"conda_env {conda!r} is not an environment name")
    args: list[str] = []
    if len(values) > 3 and values[3]:
        try:
            args = shlex.split(values[3])
        except ValueError as e:
            raise bad(3, f"arguments {values[3]!r}: {e}") from None
    gpu_ids = None
    if len(values) > 4 and values[4]:
        try:
            gpu_ids = parse_gpu_indices(values[4], what="allowed_gpus")
        except UsageError as e:
            raise bad(4, str(e)) from None
    return GjsLine(line, text, priority, script, conda, args, gpu_ids, cols)
