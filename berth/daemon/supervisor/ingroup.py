"""A supervisor's side of its cgroup (:mod:`berth.daemon.procs.cgroup`): made by the daemon,
joined once by the supervisor while it is still root, and emptied of everything but itself
after each attempt."""

from __future__ import annotations

import os
import signal

# The cgroup this supervisor joined ("" if none): every process of its attempts is in it.
JOINED: list[str] = []


def members(path: str) -> list[int]:
    """The processes of the cgroup ``path`` (the kernel's list), [] if it has gone. Read
    with bare system calls (open, read until empty, close: asked after every attempt, where
    a buffered text file cost 5 more calls and its objects)."""
    try:
        fd = os.open(path + "/cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return [int(x) for x in b"".join(chunks).split()]
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)


def enter(path: str, main: bool = True) -> None:
    """Move this process into the cgroup ``path`` (the daemon made it): the one that holds
    its attempts (``main``), or one more of another v1 hierarchy (``devices``). Raises
    OSError if it cannot."""
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    if main:
        JOINED[:] = [path]


def kill_others() -> int:
    """SIGKILL every process of our cgroup but ourselves (what an attempt left, whatever
    session it made for itself); how many there were."""
    if not JOINED:
        return 0
    me = os.getpid()
    others = [p for p in members(JOINED[0]) if p != me]
    for pid in others:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(others)
