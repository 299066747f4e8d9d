"""The engine's front: the verbs the protocol needs, on one object that holds the engine
privately (issue 38). Request handlers (:mod:`berth.daemon.requests`), the dashboard
(:mod:`berth.web`) and MCP reach the engine only through these verbs, never through its parts
(store, journal, loop, process port, job table, accounts, pauses, reservations, enforcer,
options, clock, estimates): tests/base/test_front.py counts them.

Who may do what is the requests' to judge (:mod:`berth.daemon.requests.authority`): a verb
that acts on jobs is given them once they were judged, or an ``allow`` the caller's rules
give, which it asks of each job before it changes any. What the caller is (uid, gid, user,
admin) is a :class:`~berth.daemon.engine.admission.prepared.Caller`: the socket's.
"""

from __future__ import annotations

import asyncio
from typing import Literal, overload

from berth.core.states import FINISHED, State
from berth.core.transition import hold, release
from berth.daemon.engine import front_reads as reads
from berth.daemon.engine import queue_view
from berth.daemon.engine.accounts import EVERYONE
from berth.daemon.engine.admission import admit, arrays, resubmit, update
from berth.daemon.engine.reservations import when
from berth.daemon.engine.starts import pty_path
from berth.daemon.engine.views import TaskIds, detail, row, with_task_ids
from berth.daemon.store.store import UnreadableSpec
from berth.units import format_duration
from berth.wire import protocol
from berth.wire.checks import bad
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.engine.admission.prepared import Allow, Caller
    from berth.daemon.engine.engine import Engine
    from berth.daemon.engine.queue_view import Selection

MAX_SPAN = 366 * 86400.0  # a reservation's longest window, and how far ahead one may start
MAX_RESERVATIONS = 1000  # kept at once (each pass reads them all)


class Front:
    """The verbs; ``engine`` is held, not exposed."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- jobs in (engine/admission/) ----------------------------------------------------------

    def admit(
        self, caller: Caller, raw: Any, dry: bool = False, *, each: bool = False, env: Any = None
    ) -> asyncio.Future[dict[str, Any]] | Awaitable[dict[str, Any]]:
        """Queue one job (or array), answered once durable; ``dry``: what it would be.
        ``each``: ``raw`` is a jobs file's list, all or none in one commit (``env``: of each
        job naming none), answered ``{"replies": [...]}``, one per job."""
        if each:
            return self._admit_all(caller, raw, env, dry)
        return admit.submit(self._engine, caller, raw, dry)

    async def _admit_all(
        self, caller: Caller, raws: Any, env: Any, dry: bool
    ) -> dict[str, Any]:
        return {"replies": await admit.submit_all(self._engine, caller, raws, env, dry)}

    async def update(
        self, caller: Caller, ref: Any, values: dict[str, Any], allow: Allow
    ) -> dict[str, Any]:
        """Change pending jobs (`berth update`), checked as submit checks them."""
        return await update.update(self._engine, caller, ref, values, allow)

    async def resubmit(
        self, caller: Caller, ref: Any, cascade: bool, allow: Allow
    ) -> dict[str, Any]:
        """Queue an ended job again (``cascade``: with its doomed dependents)."""
        return await resubmit.resubmit(self._engine, caller, ref, cascade, allow)

    # -- jobs by id ---------------------------------------------------------------------------

    def _job(self, ref: Any) -> Job:
        """The job ``ref`` names (``12``, ``"12_3"``); NO_SUCH_JOB if none is on record."""
        engine = self._engine
        job_id = arrays.resolve(engine, ref)
        job = engine.find(job_id)
        if job is None:
            raise ProtocolError(protocol.NO_SUCH_JOB, f"no job {job_id}: see `berth queue --all`")
        return job

    def named(self, refs: Any, mine: int | None = None) -> list[Job]:
        """The jobs ``refs`` name, an array's id all its tasks; ``mine``: and every unfinished
        job of that uid."""
        ids = arrays.resolve_all(self._engine, refs)
        named = [self._job(i) for i in ids]
        if mine is not None:
            given = set(ids)
            named += [j for j in self._engine.unfinished() if j.uid == mine and j.id not in given]
        return named

    def cancel(self, jobs: list[Job], sig: int | None) -> dict[str, str]:
        """Cancel (or signal) the unfinished ones of ``jobs``: task label -> what happened."""
        done = {}
        control = self._engine.control
        pending = []  # cancelled together (control.cancel_pending: one statement)
        for job in jobs:
            if job.state not in FINISHED:
                task = arrays.of(job)
                label = f"{task[0]}_{task[1]}" if task else str(job.id)
                if sig is None and job.state is State.PENDING and "requeue" not in job.extra:
                    pending.append(job)
                    done[label] = "cancelled"
                else:
                    done[label] = control.cancel(job, sig)  # (unfinished: in memory)
        control.cancel_pending(pending)
        failing = self._engine.journal.failing
        if failing is not None and sig is None:  # (each line says it: the CLI)
            note = f" (not saved yet: the state database cannot commit: {failing})"
            done = {label: what + note for label, what in done.items()}
        return done

    async def hold(
        self, jobs: list[Job], holding: bool, at: float | None = None
    ) -> dict[str, Any]:
        """Hold (or release: ``at``, not before then) pending jobs; answered once durable (or
        saying what was done but not saved: a full disk)."""
        engine = self._engine
        for job in jobs:
            if job.state is not State.PENDING:
                verb = "held" if holding else "released"
                raise ProtocolError(
                    protocol.INVALID_STATE,
                    f"job {job.id} is {job.state.value}: only a pending job can be {verb}",
                )
        now = engine.clock.time()
        for job in jobs:
            (hold if holding else release)(job, now=now)
            if at is not None and at > now:  # `release-job --at TIME`: not before then
                job.not_before = at
            engine.save(job)  # committed with this turn's group, by the engine's journal
        engine.kick()
        unsaved = await engine.saved()  # durable before we answer (or we say it is not)
        return {"job_ids": [j.id for j in jobs], **unsaved}

    # -- views --------------------------------------------------------------------------------

    def show(self, ref: Any, allow: Allow | None = None) -> tuple[Job, dict[str, Any]]:
        """The job ``ref`` names (``12``, ``"12_3"``; NO_SUCH_JOB if none is on record) and
        everything of it (`berth show`), with where to attach to its terminal; ``allow``
        is asked first (`berth logs`, `attach`: its owner or an admin)."""
        job = self._job(ref)
        if allow is not None:
            allow(job)
        engine = self._engine
        engine.explain()
        try:
            # a job listed a moment ago may not be written yet: its spec is the journal's
            spec = engine.journal.peek(job.id) or engine.store.spec(job.id)
        except UnreadableSpec as e:
            raise ProtocolError(
                protocol.INTERNAL,
                f"{e}; it cannot run: submit it again (`berth queue` shows its state)",
            ) from e
        reason = with_task_ids(engine.reason(job.id), TaskIds(engine.jobs))
        out = detail(job, reason, spec, engine.opts.max_job_time)
        if job.state is State.PENDING:
            out["start_estimate"] = engine.estimates.get().get(job.id)
        run = engine.runs.get(job.id)
        out["attach"] = (
            pty_path(spec, job.id, run.attempt) or run.path + ".pty"
            if run is not None and out["pty"]
            else None
        )
        return job, out

    def queue(self, sel: Selection, see: Callable[[Job], bool]) -> Iterator[dict[str, Any]]:
        """`berth queue`'s answer in frames (:mod:`berth.daemon.engine.queue_view`)."""
        return queue_view.frames(self._engine, sel, see)

    async def wait(self, ref: Any, timeout: float | None) -> dict[str, Any]:
        """Until the job ends (or ``timeout``). An array's id waits for every task: the
        answer is its first task's row with the array's outcome (COMPLETED if every task
        did, else the first other outcome, in task order), as the Slurm backend answers."""
        engine = self._engine
        job = self._job(ref)
        tasks = None if type(ref) is str else arrays.members(engine, job.id)
        deadline = None if timeout is None else engine.loop.time() + timeout
        ended = []
        for task_id in tasks or [job.id]:
            left = None if deadline is None else max(0.0, deadline - engine.loop.time())
            ended.append(await self._wait_one(self._job(task_id), left))
        out = row(ended[0], engine.reason(ended[0].id))
        finished = all(j.state in FINISHED for j in ended)
        if tasks and finished:
            worst = next((j for j in ended if j.state is not State.COMPLETED), ended[0])
            out.update(state=worst.state.value, st=worst.state.code, exit_code=worst.exit_code)
        return {"job": out, "finished": finished}

    async def _wait_one(self, job: Job, limit: float | None) -> Job:
        engine = self._engine
        if job in engine.settling_jobs():  # it has ended: wait until that is durable
            await engine.durable()
        elif (fut := engine.on_end(job.id)) is not None:
            try:
                await asyncio.wait_for(asyncio.shield(fut), limit)
            except asyncio.TimeoutError:
                pass
            job = self._job(job.id)
        return job

    # -- what is read (berth/daemon/engine/front_reads.py) ------------------------------------

    @overload
    def view(self, kind: Literal["status", "stats", "gpus", "projects"]) -> dict[str, Any]: ...
    @overload
    def view(self, kind: Literal["enforce_log"], limit: int) -> dict[str, Any]: ...
    @overload
    def view(self, kind: Literal["unfinished"]) -> list[Job]: ...
    @overload
    def view(
        self, kind: Literal["samples"], *, since: float | None = None,
        keep: tuple[Any, ...] | None = None, before: float | None = None, recent: int = 0,
        usage: list[tuple[str, list[tuple[Any, ...]]]] | None = None,
    ) -> dict[str, Any]: ...  # fmt: skip
    @overload
    def view(
        self, kind: Literal["report"], caller: Caller, since: float, until: float | None,
        groupings: dict[str, list[str]], by: list[str],
    ) -> asyncio.Future[dict[str, Any]]: ...  # fmt: skip

    def view(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        """One of the read answers, by ``kind`` (each is :mod:`front_reads`' function of
        that name):

        - ``status``: `berth status`'s view of the daemon (each GPU's jobs and others' use,
          pauses, notes, enforcement, reservations);
        - ``stats``: `berth ping`'s (the daemon, its jobs, the last passes' cost, the GPUs'
          error);
        - ``gpus``: the GPUs as the daemon sees them, for the dashboard;
        - ``projects``: each project's usage, quotas and members (`berth admin projects`);
        - ``enforce_log``: the last ``limit`` entries of the enforcement audit log
          (`berth admin log`);
        - ``unfinished``: the unfinished jobs (pending, running, completing), in no order;
        - ``samples``: the dashboard's history in the store (``keep``: a sample row, and
          ``usage``, what the page gathered for `berth report`, kept with the next commit);
        - ``report``: `berth report` and the Usage tab (GPU-hours, waits, end states and
          efficiency over ``since``..``until``, grouped; on its own thread).
        """
        return reads.VIEWS[kind](self._engine, *args, **kwargs)

    def stop(self) -> int:
        """Stop the daemon (its jobs run on); the jobs running now."""
        engine = self._engine
        engine.loop.call_soon(engine.stop_event.set)
        return engine.running_count()

    # -- what admins do -----------------------------------------------------------------------

    def pause(
        self, by: str, names: list[Any], note: str | None = None, *,
        drain: bool = False, resume: bool = False, everything: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Pause GPUs (``drain``: all of them without names, and say who and why), or
        ``resume`` them (``everything``: every paused GPU and the queue)."""
        engine = self._engine
        pauses = engine.pauses
        if resume:
            uuids = list(pauses.gpus) if everything else self._uuids(names)
            pauses.resume(uuids, queue=everything)
            return {"paused": sorted(pauses.indexes()), "queue_paused": pauses.queue}
        if drain and not names:
            uuids = [s.uuid for s in engine.res.snapshots]
        else:
            uuids = self._uuids(names)
        pauses.pause(uuids, by, note, engine.clock.time())
        if not drain:
            return {"paused": sorted(pauses.indexes())}
        out: list[dict[str, Any]] = []
        for u in pauses.gpus:
            s = engine.res.by_uuid.get(u)
            if s is None:
                continue
            who, why, since = pauses.notes.get(u, (None, None, None))
            out.append({"gpu": s.index, "by": who, "note": why, "since": since})
        out.sort(key=lambda r: r["gpu"])
        return {"paused": [r["gpu"] for r in out], "drained": out}

    def _uuids(self, names: list[Any]) -> list[str]:
        """The uuids of the GPUs a request names (index, uuid...); an unknown one is refused."""
        res = self._engine.res
        out = []
        for n in names:
            s = res.resolve(str(n))
            if s is None:
                known = ", ".join(str(g) for g in sorted(res.by_index)) or "none"
                raise ProtocolError(protocol.NO_SUCH_GPU, f"no GPU {n!r} here (GPUs: {known})")
            out.append(s.uuid)
        return out

    def limits(self, user: str | None, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The limits of ``user`` (None: everyone's), first set to ``changes`` if given."""
        engine = self._engine
        accounts = engine.accounts
        if changes:
            accounts.set(engine.store, EVERYONE if user is None else user, changes)
            engine.kick()  # (a raised limit may let jobs start)
        return accounts.table(user)

    def reserve(
        self, entry: dict[str, Any] | None, names: list[Any], count: int | None,
        remove: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Keep a reservation (``entry``: its window and holders; the GPUs ``names`` or any
        ``count``), or ``remove`` one by id, or (neither) read them all."""
        engine = self._engine
        book = engine.reservations
        now = engine.clock.time()
        if remove is not None:
            return {"removed": remove, "described": book.describe(book.remove(remove))}
        if entry is None:
            return {"now": now, "reservations": book.view(now)}
        start, end = entry["start"], entry["end"]
        if start > now + MAX_SPAN:
            raise bad(
                "start", start, f"{when(start)} is more than {format_duration(MAX_SPAN)} away"
            )
        if end <= start:
            raise bad("end", end, f"must be after the start ({when(start)})")
        if end <= now:
            raise bad("end", end, f"{when(end)} has passed: a reservation must end in the future")
        if end - start > MAX_SPAN:
            raise bad("end", end, f"the window may last at most {format_duration(MAX_SPAN)}")
        if len(book.entries) >= MAX_RESERVATIONS:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"{MAX_RESERVATIONS} reservations are kept already: `berth admin unreserve` some",
            )
        entry = {**entry, "uuids": self._uuids(names) if names else [], "made": now}
        kept = book.add(entry, count, now)
        return {"reservation": next(v for v in book.view(now) if v["id"] == kept["id"])}

    def follow(self, on_commit: Callable[[list[Job], list[Job], bool], None]) -> None:
        """Call ``on_commit(inserted, saved, ok)`` after each commit of the engine's journal
        (after the engine's own bookkeeping): the jobs whose new state is durable."""
        journal = self._engine.journal
        before = journal.on_committed

        def chained(inserted: list[Job], saved: list[Job], ok: bool) -> None:
            before(inserted, saved, ok)
            on_commit(inserted, saved, ok)

        journal.on_committed = chained
