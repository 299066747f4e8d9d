"""The daemon's committer: a thread of its own, with its own SQLite connection, that commits
batches of statements in order, each in one durable transaction: written to the write-ahead
log (WAL, ``synchronous=NORMAL``: no sync inside the ``COMMIT``), then the log forced to disk
(``fdatasync``) by this thread itself, before anyone is told (as ``synchronous=FULL`` would,
inside the ``COMMIT``).

Why a thread: a durable commit waits for the disk (an ``fsync``: 0.2 ms on a quiet disk, several
milliseconds on a busy one). The event loop hands the batch over and goes on serving (reading
exits, deciding starts) while it is written; what it changes meanwhile is committed as the next
batch (group commit with one commit in flight). Nothing is acted on before its batch is durable:
the engine runs a batch's follow-ups (answer a submit, remove a run file) only in the
completion callback, on the loop, once the log is on disk. The one exception is not an action
but a word: a batch may carry start gates (:mod:`berth.daemon.supervisor.gate`), which this
thread opens the moment the ``COMMIT`` has returned, before the log is forced to disk and
before the loop hears of it, so that an attempt waiting at its gate starts without the
``fsync`` and without a turn of the loop in between (issue 35: the fsync was a quarter to a
third of the time between a job's end and the next start on its GPU, bench/dispatch_chain.py).

What a gate opened before the sync still guarantees: the start is in the log, written (in the
system's cache) before the command runs, so a daemon that dies at any point, ``kill -9``
included, finds it on restart (SQLite reads the log's committed transactions back): the job
is RUNNING, its attempt is adopted or settled, and it never runs twice. What it does not: a
crash of the *machine* in the ~1 ms between the gate and the sync may lose the start with
the job, which then runs again after the reboot (as a job submitted with ``--requeue`` would)
instead of being reported LOST. A submit is still answered, and an end still reported, only
once the log is on disk.
"""

from __future__ import annotations

import logging
import os
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

log = logging.getLogger("berth.daemon")


class Writer:
    """Commits batches of ``(sql, rows)`` (``executemany``) in submission order."""

    def __init__(self, path: str, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # (the log is synced by _sync, below)
        self._wal_path = path + "-wal"
        self._wal = -1  # the write-ahead log, opened at the first commit
        self._sync_failed = False
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
        if self._wal >= 0:
            os.close(self._wal)
            self._wal = -1

    def _sync(self) -> None:
        """Force the write-ahead log to disk (what ``synchronous=FULL`` does inside each
        ``COMMIT``). If that fails, the transaction is committed all the same (other
        connections, and a restarted daemon, see it; only whether the disk has it is in
        doubt): the failure is logged, and from then on the connection syncs inside each
        ``COMMIT`` (``synchronous=FULL``, gates after the sync, as before issue 35), so a disk
        that cannot sync fails the commits themselves, which the journal retries."""
        if self._sync_failed:
            return
        try:
            if self._wal >= 0 and os.fstat(self._wal).st_nlink == 0:
                os.close(self._wal)  # (the log was removed and made again: sync the new one)
                self._wal = -1
            if self._wal < 0:
                self._wal = os.open(self._wal_path, os.O_RDONLY | os.O_CLOEXEC)
            os.fdatasync(self._wal)
        except OSError as e:
            log.error("cannot force the state database's log to disk (%s): syncing inside "
                      "each commit from now on", e)  # fmt: skip
            self._sync_failed = True
            try:
                self.db.execute("PRAGMA synchronous=FULL")
            except sqlite3.Error:  # (the batch is committed: never reported failed for this)
                pass

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
            if gates:  # (written to the log: see the module)
                gate.open_all(list(gates))
            self._sync()
        except Exception as e:
            error = e
        try:
            self.loop.call_soon_threadsafe(done, error)
        except RuntimeError:  # the loop is closed: nobody waits for the answer
            pass
        return True
