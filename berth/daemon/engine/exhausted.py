"""A start that met a limit of the system: no file descriptor left (EMFILE: the process's
table, ENFILE: the system's), no memory or no process to fork (ENOMEM, EAGAIN). The job never
ran its command, so it must not end FAILED (DESIGN.md invariant 10): the engine takes its
start back as it does on a full state disk (:mod:`berth.daemon.engine.diskfull`, which holds
the passes back with a growing pause and says why, ``SystemLimit``), and it starts once the
limit is no longer met.

Where the limit was met tells who waits. The daemon's own (a pipe, a run file, a claim file, a
supervisor it cannot fork) and the system's (ENFILE, ENOMEM) hold every start back; a
supervisor's own (EMFILE, EAGAIN: its descriptors, or its user's processes, which that user
can lower with ``prlimit``) holds back only that job, :data:`ALONE_WAIT` seconds, and that
supervisor is not given another attempt: a user cannot hold back anyone else's starts.
"""

from __future__ import annotations

from berth.daemon.supervisor.jobfiles import EXHAUSTED, own_limit

__all__ = ["ALONE_WAIT", "RETRY_MAX", "is_exhausted", "own_limit"]

ALONE_WAIT = 2.0  # seconds a job waits whose supervisor met its own limit (a fresh one then)
RETRY_MAX = 5.0  # seconds at most between tries while the daemon's or the system's limit is met

# What the errors say (a message carried as text: a supervisor's, the fork server's).
_WORDS = (
    *(f"[Errno {n}]" for n in EXHAUSTED),
    "Too many open files", "Cannot allocate memory", "Resource temporarily unavailable",
)  # fmt: skip


def is_exhausted(e: BaseException | str | None) -> bool:
    """Is ``e`` a limit of the system met (EMFILE, ENFILE, ENOMEM, EAGAIN, or their words)?"""
    if isinstance(e, OSError) and e.errno is not None:
        return e.errno in EXHAUSTED
    text = str(e or "")
    return any(w in text for w in _WORDS)
