"""Which format a jobs file is in: the GPU Job Scheduler's CSV (``priority,script_path,...``: every job line
starts with an integer and a comma) or berth's own (``[options] [--] command``). A file is in
one of them: a file mixing both is refused at the first line that differs from the first job
line's format, naming both lines.
"""

from __future__ import annotations

import re

from berth.errors import UsageError
from berth.jobsfile import gjs_line

GJS = "the GPU Job Scheduler's CSV"
BERTH = "berth"
_QUOTED = re.compile(r"'([^']+)'")


def detect(path: str, lines: list[tuple[int, str]]) -> tuple[str, list[tuple[int, str]]]:
    """(format, the job lines: not blank, not only a comment)."""
    job_lines = [(n, t) for n, t in lines if gjs_line.is_job_line(t)]
    if not job_lines:
        return BERTH, []
    first_n, first = job_lines[0]
    gjs = gjs_line.looks_like(first)
    for n, text in job_lines[1:]:
        if gjs and not gjs_line.looks_like(text) and _csv(text):
            gjs_line.parse(text, n, f"{path}:{n}")  # a GPU Job Scheduler line gone wrong: say what is
        if gjs_line.looks_like(text) != gjs:
            this, that = ("the GPU Job Scheduler's", "berth's") if gjs else ("berth's", "the GPU Job Scheduler's")
            raise UsageError(
                f"{path}:{n}:1: this line is in {that} format, but line {first_n} is in "
                f"{this} ({_formats()}): write the whole file in one format; nothing was queued"
            )
    return (GJS if gjs else BERTH), job_lines


def _csv(text: str) -> bool:
    """A comma in the line's first word: meant as the GPU Job Scheduler's CSV."""
    word = text.split(None, 1)[0] if text.split() else ""
    return "," in word


def _formats() -> str:
    return f"the GPU Job Scheduler's is {gjs_line.HEADER}; berth's is [options] [--] command args"


def column(text: str, hint: str | None) -> int:
    """The 1-based column of what an error names in a line (a quoted word of ``hint``, or
    the word after its last colon, or ``hint`` itself), else of the line's first word."""
    words: list[str] = []
    if hint:
        words += _QUOTED.findall(hint)
        words += hint.rsplit(": ", 1)[-1].split()[:1]
    for word in words:
        at = text.find(word)
        if at >= 0:
            return at + 1
    return len(text) - len(text.lstrip()) + 1
