"""The daemon's journal: every change to a job goes to the state database before anything
acts on it, and the changes of one turn of the event loop go together (group commit).

The engine queues inserts (new jobs) and saves (a job's new state), and actions to run once
they are durable (answer a client, hand an attempt to a supervisor, reuse a run file) or,
instead, if the commit fails. :meth:`Journal.flush` writes one transaction; with a
:class:`~berth.daemon.store.writer.Writer` the commit happens on the writer's thread while the loop
goes on serving, and what changes meanwhile waits for the next commit (one in flight), so a
burst of submits or exits costs one ``fsync``.

A commit that fails (a full disk, an I/O error) loses nothing the daemon has accepted: new jobs
are refused (their submitters are told), but saved states, other writes and the actions that
wait for them stay queued and the commit is retried with a growing pause (up to
``RETRY_MAX`` seconds) until it succeeds; meanwhile the engine keeps showing the jobs as they
are. Only actions registered with an ``otherwise`` (what must not happen unless its
write-ahead is durable) are replaced by that alternative.

A commit may also open start gates (:meth:`Journal.open_on_commit`, :mod:`berth.daemon.supervisor.gate`):
the attempts it starts wait at them in their supervisors, and the committer opens them the
moment the commit is written (before its log's sync: :mod:`berth.daemon.store.writer`). A
gate whose commit fails is never opened: the ``otherwise`` of
its launch closes it, and that attempt never runs.
"""

from __future__ import annotations

import logging

from berth.daemon.store.store import Store
from berth.daemon.store.tasks import Tasks, spec_of
from berth.daemon.supervisor import gate

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.store.writer import Writer
    from berth.wire.jobspec import JobSpec

    Insert = tuple[Job, JobSpec | Tasks, asyncio.Future[None] | None]

log = logging.getLogger("berth.daemon")

RETRY_FIRST = 0.05  # seconds before the first retry of a failed commit; doubles each time
RETRY_MAX = 5.0
RECENT = 1024  # specs of committed new jobs kept for their launch (most recent first kept)


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
        self.changes = 0  # jobs' changes queued so far (inserted, saved, written in bulk)
        self.inserts = 0  # jobs inserted so far
        self._inserts: list[Insert] = []
        self._dirty: dict[int, tuple[Job, dict[str, Any]]] = {}
        self._after: list[Callable[[], None]] = []
        self._on_fail: list[Callable[[], None]] = []
        self._statements: list[tuple[str, list[tuple[Any, ...]]]] = []  # other writes
        self._written: list[Job] = []  # jobs whose new state a statement writes (bulk)
        self._gates: list[int] = []  # start gates to open once the next commit is durable
        self.unsaved: dict[int, JobSpec | Tasks] = {}  # specs of new jobs not yet committed
        # Specs of the last RECENT new jobs committed, until their launch takes them (a spec
        # never changes once stored): under a stream of short jobs, a launch need not read
        # its spec back from the database and parse it again.
        self._recent: dict[int, JobSpec | Tasks] = {}
        self._armed = False
        self._in_flight = False
        self._paired: set[int] = set()  # ids of actions that have an ``otherwise``
        self.failing: str | None = None  # the last commit's error, while commits fail
        self.on_recovered: Callable[[], None] | None = None  # commits succeed again
        self._retry_in = 0.0  # the pause before the next retry (0: not failing)
        self._retry: asyncio.TimerHandle | None = None

    def add(
        self, job: Job, spec: JobSpec | Tasks, fut: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None:
        """Queue a new job with ``fut`` (returned; it completes once the job is durable), or
        none: one of a request whose last job's future (in the same turn of the loop: the
        same commit) answers for all (one future a request, not one a job). ``spec``: its
        own, or its array's :class:`~berth.daemon.store.tasks.Tasks` (its spec made as its
        row is)."""
        self._inserts.append((job, spec, fut))
        self.inserts += 1
        self.changes += 1
        self.unsaved[job.id] = spec
        self._arm()
        return fut

    def spec(self, job_id: int) -> JobSpec | None:
        """The spec of a job submitted lately (not yet committed, or one of the last
        :data:`RECENT` committed), taken for its launch; None: read it from the store."""
        spec = self.unsaved.get(job_id)
        spec = spec if spec is not None else self._recent.pop(job_id, None)
        return None if spec is None else spec_of(job_id, spec)

    def peek(self, job_id: int) -> JobSpec | None:
        """The spec of a job submitted lately, left in place (`berth show` of a job queued a
        moment ago, before its row is written); None: read it from the store."""
        spec = self.unsaved.get(job_id)
        spec = spec if spec is not None else self._recent.get(job_id)
        return None if spec is None else spec_of(job_id, spec)

    def save(self, job: Job, **cols: Any) -> None:
        """Queue a job's new state for the next commit (``cols``: ended_at, launched)."""
        old = self._dirty.get(job.id)
        self._dirty[job.id] = (job, {**old[1], **cols} if old else cols)
        self.changes += 1
        self._arm()

    def queued(self, job_id: int) -> bool:
        """Whether a row of this job waits to be written (inserted or saved: made from the
        job as it is at the commit)."""
        return job_id in self._dirty or job_id in self.unsaved

    def execute(
        self, sql: str, rows: list[tuple[Any, ...]], jobs: list[Job] | None = None
    ) -> None:
        """Queue ``executemany(sql, rows)`` for the next commit (after its inserts and saves);
        ``jobs``: those whose new state it writes (not saved each: a bulk change), told to
        ``on_committed`` as saved."""
        self._statements.append((sql, rows))
        if jobs:
            self._written += jobs
            self.changes += 1
        self._arm()

    def open_on_commit(self, fd: int) -> None:
        """Open the start gate ``fd`` once everything queued so far is committed (never if that
        commit fails). The caller closes ``fd`` in the actions that follow the commit (or its
        ``otherwise``)."""
        self._gates.append(fd)
        self._arm()

    def after_commit(
        self, action: Callable[[], None], otherwise: Callable[[], None] | None = None
    ) -> None:
        """Run ``action`` once everything queued so far is durable. If that commit fails,
        ``otherwise`` runs instead (and ``action`` never); without one, ``action`` waits for
        the retry that succeeds."""
        self._after.append(action)
        if otherwise is not None:
            self._on_fail.append(otherwise)
            self._paired.add(id(action))

    def _arm(self) -> None:
        if not self._armed and self._retry is None:
            self._armed = True
            self.loop.call_soon(self.flush)

    def flush(self, force: bool = False) -> None:
        """Commit every queued change in one transaction, then act on it (see the module)."""
        self._armed = False
        if self._in_flight or (self.hold and not force):
            return  # the commit in flight (or the pass about to run) takes it
        if self._retry is not None:
            if not force:
                return  # commits fail: the retry timer takes it
            self._retry.cancel()
            self._retry = None
        inserts, dirty, after, on_fail = self._inserts, self._dirty, self._after, self._on_fail
        statements, gates, written = self._statements, self._gates, self._written
        if not (inserts or dirty or after or statements or gates):
            return
        self._inserts, self._dirty, self._after, self._on_fail = [], {}, [], []
        self._statements, self._gates, self._written = [], [], []
        if not (inserts or dirty or statements):
            gate.open_all(gates)  # (everything they wait for is durable already)
            self._committed(None, inserts, dirty, statements, after, on_fail, written)
            return
        batch = []
        if inserts:  # (an array's tasks: its shared spec once)
            # (each job's dict and an array task's spec made as its row is: not 10,000 of
            # them at once)
            batch += Store.insert_rows(
                (job.to_dict(), spec_of(job.id, spec)) for job, spec, _ in inserts
            )
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
            else:
                gate.open_all(gates)
            self._committed(error, inserts, dirty, statements, after, on_fail, written)
            return
        self._in_flight = True
        self.writer.submit(
            batch,
            lambda error: self._committed(
                error, inserts, dirty, statements, after, on_fail, written, True
            ),
            gates,
        )

    def _committed(
        self,
        error: BaseException | None,
        inserts: list[Insert],
        dirty: dict[int, tuple[Job, dict[str, Any]]],
        statements: list[tuple[str, list[tuple[Any, ...]]]],
        after: list[Callable[[], None]],
        on_fail: list[Callable[[], None]],
        written: list[Job],
        was_in_flight: bool = False,
    ) -> None:
        if was_in_flight:
            self._in_flight = False
        inserted = [job for job, _, _ in inserts]
        for job in inserted:
            self.unsaved.pop(job.id, None)
        if error is not None:
            self.on_committed(inserted, [], False)
            self._failed(error, inserts, dirty, statements, after, on_fail, written)
            return
        recent = self._recent
        for job, spec, _ in inserts:
            recent[job.id] = spec
        while len(recent) > RECENT:
            del recent[next(iter(recent))]
        self.on_committed(inserted, [job for job, _ in dirty.values()] + written, True)
        recovered = self.failing is not None
        if recovered:
            log.warning("the state database commits again")
        self.failing, self._retry_in = None, 0.0
        if recovered and self.on_recovered is not None:
            self.on_recovered()
        for _, _, fut in inserts:
            if fut is not None and not fut.done():
                fut.set_result(None)
        self._paired.difference_update(id(a) for a in after)
        for action in after:
            action()
        if was_in_flight:
            self.flush()  # what changed while this batch was being written

    def _failed(
        self,
        error: BaseException,
        inserts: list[Insert],
        dirty: dict[int, tuple[Job, dict[str, Any]]],
        statements: list[tuple[str, list[tuple[Any, ...]]]],
        after: list[Callable[[], None]],
        on_fail: list[Callable[[], None]],
        written: list[Job],
    ) -> None:
        """A commit failed: refuse its new jobs, run the ``otherwise`` of paired actions, and
        queue everything else again, before what was queued since, for a retry."""
        if self.failing is None:
            log.error("cannot commit to the state database (retrying): %s", error)
        self.failing = str(error)
        for _, _, fut in inserts:
            if fut is not None and not fut.done():
                fut.set_exception(error)
        for job_id, (job, cols) in dirty.items():
            newer = self._dirty.get(job_id)  # saved again since: its newest state wins
            self._dirty[job_id] = (job, cols) if newer is None else (newer[0], {**cols, **newer[1]})
        self._statements = statements + self._statements
        self._written = written + self._written
        self._after = [a for a in after if id(a) not in self._paired] + self._after
        self._paired.difference_update(id(a) for a in after)
        for action in on_fail:
            action()
        self._retry_in = min(RETRY_MAX, self._retry_in * 2 or RETRY_FIRST)
        self._retry = self.loop.call_later(self._retry_in, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.flush(force=True)

    def durable(self) -> asyncio.Future[None]:
        """A future that completes once every change queued so far is committed."""
        fut: asyncio.Future[None] = self.loop.create_future()

        def failed() -> None:
            if not fut.done():
                fut.set_exception(
                    OSError(f"the state database cannot commit ({self.failing}); berth retries")
                )

        self.after_commit(lambda: None if fut.done() else fut.set_result(None), failed)
        self._arm()
        return fut

    async def saved(self) -> dict[str, str]:
        """Wait until the changes queued so far are durable: ``{}``; or, if their commit
        fails (a full disk), what a request that made them must answer instead of "nothing
        was changed": they are in force (the daemon acts on them and saves them when it
        can), not yet on disk."""
        try:
            await self.durable()
        except OSError:
            return {
                "unsaved": (
                    f"done, but not saved yet: the state database cannot commit "
                    f"({self.failing}); the daemon acts on it now and saves it once the disk "
                    "has room (a daemon stopped before then forgets it, and its log says so)"
                )
            }
        return {}

    def unsaved_changes(self) -> str:
        """What is queued and not yet committed, in words ("" if nothing): each job whose
        last change is unsaved (its newest state) and how many other writes."""
        if self._retry is not None:
            self._retry.cancel()  # (nothing more is tried: the daemon stops)
            self._retry = None
        parts = [f"job {job.id} ({job.state.value})" for job, _ in self._dirty.values()]
        parts += [f"new job {job.id}" for job, _, _ in self._inserts]
        others = sum(len(rows) for _, rows in self._statements)
        if others:
            parts.append(f"{others} other row(s) (usage, limits, purges)")
        return ", ".join(parts)

    async def drain(self) -> None:
        """Wait until nothing is queued or being committed."""
        while (
            self._in_flight or self._inserts or self._dirty or self._after or self._statements
            or self._gates
        ):  # fmt: skip
            fut = self.durable()
            self.flush(force=True)
            try:
                await fut
            except OSError:
                return
