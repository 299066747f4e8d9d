"""The daemon's committer: a thread of its own, with its own SQLite connection, that commits
batches of statements in order, each in one durable transaction (WAL, ``synchronous=FULL``).

Why a thread: a durable commit waits for the disk (an ``fsync``: 0.2 ms on a quiet disk, several
milliseconds on a busy one). The event loop hands the batch over and goes on serving (reading
exits, deciding starts) while it is written; what it changes meanwhile is committed as the next
batch (group commit with one commit in flight). Nothing is acted on before its batch is durable:
the engine runs a batch's follow-ups (answer a submit, remove a run file) only in the
completion callback, on the loop. The one exception is not an action but a word: a batch may
carry start gates (:mod:`berth.daemon.supervisor.gate`), which this thread opens the moment the ``COMMIT``
has returned, before the loop hears of it, so that an attempt waiting at its gate starts
without a turn of the loop in between.
"""

from __future__ import annotations

import queue
import sqlite3
import threading

from berth.daemon.supervisor import gate

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Sequence
    from typing import Any

    Batch = Sequence[tuple[str, Sequence[Sequence[Any]]]]
    Done = Callable[[BaseException | None], None]
    Item = tuple[Batch, Done, Sequence[int]]


class Writer:
    """Commits batches of ``(sql, rows)`` (``executemany``) in submission order."""

    def __init__(self, path: str, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.commits = 0
        self._queue: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="berth-writer", daemon=True)
        self._thread.start()

    def submit(self, batch: Batch, done: Done, gates: Sequence[int] = ()) -> None:
        """Commit ``batch``; then ``done(None)`` (or ``done(error)``) runs on the loop.
        ``gates``: start gates to open as soon as the batch is durable (never if it fails);
        the caller closes them, in ``done`` or later."""
        self._queue.put((batch, done, gates))

    def close(self) -> None:
        """Commit what was submitted, then stop the thread and close the connection."""
        self._queue.put(None)
        self._thread.join()
        self.db.close()

    def _run(self) -> None:
        while self._one(self._queue.get()):
            pass

    def _one(self, item: Item | None) -> bool:
        """Commit one batch (False: stop). Its rows, and what ``done`` holds (a request's jobs
        and specs), are let go as it returns, not held until the next batch comes."""
        if item is None:
            return False
        batch, done, gates = item
        error: BaseException | None = None
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for sql, rows in batch:
                    self.db.executemany(sql, rows)
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            self.commits += 1
            if gates:
                gate.open_all(list(gates))
        except Exception as e:
            error = e
        try:
            self.loop.call_soon_threadsafe(done, error)
        except RuntimeError:  # the loop is closed: nobody waits for the answer
            pass
        return True
