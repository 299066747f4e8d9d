"""A job id as the user writes it on the command line: ``12``, or ``12_3`` for task 3 of array
12 (as Slurm writes them, on either backend): ASCII digits only (``str.isdigit`` alone takes
"²" and "٣"). The one parser of a job id for every command that takes one.
"""

from __future__ import annotations


def job_id(text: str) -> str:
    """A job id as the user wrote it: ``12`` or ``12_3``."""
    head, _, task = text.partition("_")
    digits = text.isascii() and head.isdigit() and (not task or task.isdigit())
    if not digits:  # (str.isdigit alone takes "²" and "٣")
        import argparse  # rare: a malformed id (`submit -i` imports this module, not argparse)

        raise argparse.ArgumentTypeError(f"invalid job id {text!r}: expected 12 or 12_3")
    return text


def job_ref(text: str) -> int | str:
    """A job id for the local queue: ``12`` -> 12; ``12_3`` stays (the daemon resolves it)."""
    text = job_id(text)
    return text if "_" in text else int(text)
