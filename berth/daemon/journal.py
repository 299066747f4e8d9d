"""The daemon's journal: every change to a job goes to the state database before anything
acts on it, and the changes of one turn of the event loop go together (group commit).

The engine queues inserts (new jobs) and saves (a job's new state), and actions to run once
they are durable (answer a client, hand an attempt to a supervisor, reuse a run file) or,
instead, if the commit fails. :meth:`Journal.flush` writes one transaction; with a
:class:`~berth.daemon.writer.Writer` the commit happens on the writer's thread while the loop
goes on serving, and what changes meanwhile waits for the next commit (one in flight), so a
burst of submits or exits costs one ``fsync``.
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.store import Store
    from berth.daemon.writer import Writer

    Insert = tuple[Job, dict[str, Any], asyncio.Future[None] | None]

log = logging.getLogger("berth.daemon")


class Journal:
    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        on_committed: Callable[[list[Job], list[Job], bool], None],
    ) -> None:
        """``on_committed(inserted, saved, ok)`` runs after each commit, before its actions
        (the engine forgets settled jobs, or failed inserts)."""
        self.store = store
        self.loop = loop
        self.on_committed = on_committed
        self.writer: Writer | None = None  # commits on its own thread (else: on the loop)
        self.hold = False  # a scheduling pass is about to run: it flushes (one commit for both)
        self._inserts: list[Insert] = []
        self._dirty: dict[int, tuple[Job, dict[str, Any]]] = {}
        self._after: list[Callable[[], None]] = []
        self._on_fail: list[Callable[[], None]] = []
        self._statements: list[tuple[str, list[tuple[Any, ...]]]] = []  # other writes
        self._armed = False
        self._in_flight = False

    def insert(self, job: Job, spec: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a new job; the future completes once it is durable."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self._inserts.append((job, spec, fut))
        self._arm()
        return fut

    def save(self, job: Job, **cols: Any) -> None:
        """Queue a job's new state for the next commit (``cols``: ended_at, launched)."""
        old = self._dirty.get(job.id)
        self._dirty[job.id] = (job, {**old[1], **cols} if old else cols)
        self._arm()

    def execute(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Queue ``executemany(sql, rows)`` for the next commit (after its inserts and saves)."""
        self._statements.append((sql, rows))
        self._arm()

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once everything queued so far is durable."""
        self._after.append(action)

    def on_failure(self, action: Callable[[], None]) -> None:
        """Run ``action`` instead of the after-commit actions if that commit fails."""
        self._on_fail.append(action)

    def _arm(self) -> None:
        if not self._armed:
            self._armed = True
            self.loop.call_soon(self.flush)

    def flush(self, force: bool = False) -> None:
        """Commit every queued change in one transaction, then act on it (see the module)."""
        self._armed = False
        if self._in_flight or (self.hold and not force):
            return  # the commit in flight (or the pass about to run) takes it
        inserts, dirty, after, on_fail = self._inserts, self._dirty, self._after, self._on_fail
        statements = self._statements
        if not (inserts or dirty or after or statements):
            return
        self._inserts, self._dirty, self._after, self._on_fail = [], {}, [], []
        self._statements = []
        saved = [job for job, _ in dirty.values()]
        if not (inserts or dirty or statements):
            self._committed(None, inserts, saved, after, on_fail)
            return
        from berth.daemon.store import Store

        batch = []
        if inserts:
            rows = [Store.insert_row(job.to_dict(), spec) for job, spec, _ in inserts]
            batch.append((Store.INSERT_SQL, rows))
        if dirty:
            rows = [
                Store.save_row(job.to_dict(), cols.get("ended_at"), cols.get("launched"))
                for job, cols in dirty.values()
            ]
            batch.append((Store.SAVE_SQL, rows))
        batch += statements
        if self.writer is None:
            error: BaseException | None = None
            try:
                with self.store.tx() as db:
                    for sql, many in batch:
                        db.executemany(sql, many)
            except Exception as e:
                error = e
            self._committed(error, inserts, saved, after, on_fail)
            return
        self._in_flight = True
        self.writer.submit(
            batch, lambda error: self._committed(error, inserts, saved, after, on_fail, True)
        )

    def _committed(
        self,
        error: BaseException | None,
        inserts: list[Insert],
        saved: list[Job],
        after: list[Callable[[], None]],
        on_fail: list[Callable[[], None]],
        was_in_flight: bool = False,
    ) -> None:
        if was_in_flight:
            self._in_flight = False
        self.on_committed([job for job, _, _ in inserts], saved, error is None)
        if error is not None:
            log.error("cannot commit to the state database: %s", error)
            for _, _, fut in inserts:
                if fut is not None and not fut.done():
                    fut.set_exception(error)
            for action in on_fail:
                action()
        else:
            for _, _, fut in inserts:
                if fut is not None and not fut.done():
                    fut.set_result(None)
            for action in after:
                action()
        if was_in_flight:
            self.flush()  # what changed while this batch was being written

    def durable(self) -> asyncio.Future[None]:
        """A future that completes once every change queued so far is committed."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self._after.append(lambda: None if fut.done() else fut.set_result(None))
        self._on_fail.append(
            lambda: None if fut.done() else fut.set_exception(OSError("commit failed"))
        )
        self._arm()
        return fut

    async def drain(self) -> None:
        """Wait until nothing is queued or being committed."""
        while self._in_flight or self._inserts or self._dirty or self._after or self._statements:
            fut = self.durable()
            self.flush(force=True)
            try:
                await fut
            except OSError:
                return
