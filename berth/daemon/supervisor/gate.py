"""The start gate: an attempt goes to its supervisor while its start is being committed, and
waits at a gate that opens only once that start is committed.

Why: the write-ahead (the job RUNNING, its attempt launched, in the state database) must be
committed before the job's command runs, and a commit takes a turn of the committer thread
(and the disk's sync after it: milliseconds on a busy disk). Handing the attempt over only after the commit put the commit,
the hand-over and the supervisor's preparations (run file, logs, the command's lookup) one
after the other between a job's end and the next one's start. With the gate they overlap:
the daemon creates a pipe per attempt, sends its read end with the attempt, and queues the
write end with the commit; the journal's committer writes :data:`GO` into it right after the
``COMMIT`` returns (:mod:`berth.daemon.store.writer`, on its own thread: no turn of the event loop in
between), before it forces the database's log to disk: a daemon that dies from then on, even
by ``kill -9``, finds the start on restart. The supervisor prepares, then blocks reading the
gate:

- :data:`GO`: the start is committed; it notes ``go`` in the run file and spawns the command;
- end of file: the gate's writer closed it without a word (the commit failed and the daemon
  withdrew the start, or the daemon died, even by ``kill -9``, before the start was
  committed): the command is never run, and the run file gets no ``exit`` line.

The write end is held by the daemon alone (close-on-exec; never sent anywhere), so its end of
file is certain when the daemon dies. A run file with a ``sup`` line and no ``go`` line is
thus an attempt that never ran, whatever became of the daemon (:mod:`berth.daemon.engine.recovery`).
"""

from __future__ import annotations

import os

GO = b"g"


def make() -> tuple[int, int]:
    """A new gate: (read end for the supervisor, write end the journal opens)."""
    return os.pipe2(os.O_CLOEXEC)


def open_all(fds: list[int]) -> None:
    """Open these gates (their starts are committed). A gate whose supervisor has gone (no
    reader) is skipped: its attempt is settled by the supervisor's end."""
    for fd in fds:
        try:
            os.write(fd, GO)
        except OSError:
            pass


def passed(fd: int) -> bool:
    """Wait at the gate ``fd`` (supervisor side) and close it: True once it opens, False if
    it was closed without :data:`GO`."""
    try:
        while True:
            try:
                return os.read(fd, 1) == GO
            except InterruptedError:  # pragma: no cover - PEP 475 retries already
                continue
    except OSError:
        return False
    finally:
        os.close(fd)
