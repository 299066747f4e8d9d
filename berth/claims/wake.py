"""Wake waiters the moment capacity may have been freed: inotify on the ledger directory.

Capacity is freed when a claim file is unlinked (an explicit release: ``IN_DELETE``) or when
the last descriptor of a dead holder is closed by the kernel (``IN_CLOSE_WRITE``: holders
open their files read-write), and a reservation shrinks when a waiter file is removed, closed
or rewritten (``IN_MODIFY``). Everybody else opens ledger files read-only, so liveness probes
raise only ``IN_CLOSE_NOWRITE``, which is not watched: waiters can never wake each other in a
loop; nor do waiters' signs of life (an mtime change: ``IN_ATTRIB``, not watched). inotify is reached through :mod:`berth.inotify`; where it is unavailable, :class:`Watcher` falls back to polling.
"""

from __future__ import annotations

import os
import select
import time

from berth.inotify import IN_Q_OVERFLOW, events, watch

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_DELETE = 0x00000200
MASK = IN_CLOSE_WRITE | IN_DELETE | IN_MODIFY
_POLL_FALLBACK = 0.25  # seconds between ledger scans without inotify


def inotify(path: str, mask: int = MASK) -> int | None:
    """An inotify descriptor watching ``path`` for ``mask``, or None where inotify cannot be
    had."""
    return watch([path], mask)


class Watcher:
    """Waits for ledger events that may let a waiter proceed.

    :meth:`wait` returns the names of the relevant files touched (``c.*``, ``w.*``) since the
    last call, or an empty list when the timeout passed. ``ignore`` names files whose events
    do not matter to this waiter (its own waiter file)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = inotify(path)
        self.ignore: set[str] = set()

    @property
    def polling(self) -> bool:
        return self.fd is None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drain(self) -> list[str] | None:
        """Relevant names from the queued events; None on overflow (assume anything)."""
        assert self.fd is not None
        out: list[str] = []
        for mask, name in events(self.fd):
            if mask & IN_Q_OVERFLOW:
                return None
            if name in self.ignore or not relevant(name, mask):
                continue
            out.append(name)
        return out

    def wait(self, timeout: float | None) -> list[str]:
        """Block until a relevant event or ``timeout`` seconds (None: for ever)."""
        if self.fd is None:
            time.sleep(_POLL_FALLBACK if timeout is None else min(timeout, _POLL_FALLBACK))
            return ["*"]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return []
            names = self._drain()
            if names is None:
                return ["*"]
            if names:
                return names
            if deadline is not None and time.monotonic() >= deadline:
                return []


def relevant(name: str, mask: int) -> bool:
    """Can this event have freed capacity (or shrunk a reservation)?"""
    if name.startswith("c."):
        return bool(mask & (IN_DELETE | IN_CLOSE_WRITE))
    if name.startswith("w."):
        return bool(mask & (IN_DELETE | IN_CLOSE_WRITE | IN_MODIFY))
    return False


_watchers: dict[str, Watcher] = {}


def watcher_for(path: str) -> Watcher:
    """This process's watcher of ``path``, kept open for reuse (closing an inotify descriptor
    costs milliseconds). Events queued since its last use are dropped."""
    w = _watchers.get(path)
    if w is None:
        w = _watchers[path] = Watcher(path)
    elif w.fd is not None:
        w._drain()
    return w
