"""The audit log (``<state dir>/enforce.log``, JSON lines; `berth admin log` reads it): what
enforcement did, GPUs lost and back, notifications that could not be delivered. One writer
function for all of them, one reader."""

from __future__ import annotations

import json
import logging
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

log = logging.getLogger("berth.daemon")


def append_log(path: str, entry: dict[str, Any]) -> None:
    """One entry appended to the audit log ``path`` (a JSON line; made 0600 if new); a
    failure is logged, never raised: the audit log never stops what it records."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("cannot write the audit log %s: %s", path, e)


def read_log(path: str, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` entries of the audit log (none if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096 * max(1, limit)))
            lines = f.read().splitlines()
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for line in lines[-limit:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out
