"""The daemon's heart: unfinished jobs in memory, one scheduling pass at a time. The I/O
shell around :mod:`berth.core`; starting attempts (:mod:`berth.daemon.engine.starts`) and recording
how they end (:class:`berth.daemon.engine.endings.Lifecycle`) are its other parts; commits go
through its journal (:mod:`berth.daemon.store.journal`). It reads the time from its clock and
reaches the processes that run its jobs only through its process port, both given to it
(:mod:`berth.daemon.engine.ports`; the real ones by default), so its passes run in a test without a
fork. (How long a pass itself takes is measured with the process's performance counter: it
paces the passes, see :meth:`Engine.kick`.)

Every state change goes through :func:`berth.core.transition.transition` and is committed to
the store before anything acts on it (write-ahead: a job's command runs only once the job is
RUNNING with ``launched`` set in the database; its attempt waits for that at its start gate,
:mod:`berth.daemon.supervisor.gate`). Scheduling is event-driven: :meth:`kick`
schedules one pass at the next turn of the loop, however many events asked for it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from berth.core.policy import DEFAULT_POLICY, schedule
from berth.core.states import ACTIVE, State
from berth.daemon.engine.accounts import Accounts
from berth.daemon.engine.endings import Lifecycle
from berth.daemon.engine.ports import SystemClock
from berth.daemon.engine.queue_order import QueueOrder
from berth.daemon.procs.port import Supervisors
from berth.daemon.requests.admin import drained as drain_notes
from berth.daemon.store.journal import Journal
from berth.daemon.store.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.claims.claim import Claim
    from berth.core.inventory import Usage
    from berth.core.job import Job
    from berth.daemon.engine.ports import Clock, Processes, Run
    from berth.daemon.engine.resources import Resources
    from berth.daemon.options import Options
    from berth.wire.jobspec import JobSpec

log = logging.getLogger("berth.daemon")


class Engine(Lifecycle):
    def __init__(
        self,
        opts: Options,
        store: Store,
        res: Resources,
        loop: asyncio.AbstractEventLoop,
        *,
        clock: Clock | None = None,
        procs: Processes | None = None,
    ) -> None:
        """``clock`` and ``procs``: the engine's ports (:mod:`berth.daemon.engine.ports`); by
        default the real clock and the supervisors under ``<state dir>/run``."""
        self.opts = opts
        self.store = store
        self.res = res
        self.loop = loop
        self.clock: Clock = clock or SystemClock()
        if procs is None:
            procs = Supervisors(loop, f"{opts.state_dir}/run", res.ledger.path)
        self.procs: Processes = procs
        self.jobs: dict[int, Job] = {}  # unfinished jobs
        self.runs: dict[int, Run] = {}  # job id -> its running attempt
        self.reasons: dict[int, str] = {}  # pending job -> why it waits (last pass)
        self.finished_states: dict[int, State] = {}  # for dependencies
        self.paused: set[str] = set()  # GPU uuids
        self.pause_notes = store.pause_notes()  # uuid -> (who drained it, why, since)
        self.accounts = Accounts(store, res.cfg)  # fair share and per-user limits
        self.queue_paused = False
        self.notes: list[Callable[[], str | None]] = []  # lines for `berth status`, if any
        self.waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.next_id = 1
        self.unique: dict[str, int] = {}  # `submit --unique` identity -> newest job with it
        self._kicked = False
        self._timer: asyncio.TimerHandle | None = None
        self.last_pass_seconds = 0.0
        self.last_explain_seconds = 0.0
        self._next_pass = 0.0
        self._decide_seconds = 0.0
        self._reasons_valid = False
        self._deps_dirty = False  # a job ended unsuccessfully: dependents may be doomed
        # Group commit: state changes made in one turn of the loop commit together.
        self.journal = Journal(store, loop, self._committed)
        procs.listen(self._on_done, self._on_gone, self._on_adopted_exit)
        self.committing: dict[int, Claim] = {}  # started, waiting for the write-ahead commit
        self.settling: dict[int, Job] = {}  # finished, the final state not yet committed
        self.cancel_on_start: set[int] = set()
        self.stop_event = asyncio.Event()
        self.order = QueueOrder()  # the queue in the policy's order, kept between passes

    # -- scheduling ---------------------------------------------------------------------------

    def kick(self) -> None:
        """Schedule one scheduling pass at the next turn of the event loop (however many
        events ask). A pass that took t seconds is followed by at least t seconds without
        one, so scheduling never takes more than half the daemon's time (a queue of 100,000
        jobs stays responsive; a small queue's passes take microseconds)."""
        self._reasons_valid = False
        if not self._kicked:
            self._kicked = True
            delay = self._next_pass - self.loop.time()
            # A pass due within 10 ms commits what is queued (one transaction for the exits
            # that caused it and the starts it makes); a later one leaves that to flush().
            self.journal.hold = delay < 0.010
            if delay > 0:
                self.loop.call_later(delay, self.schedule_pass)
            else:
                self.loop.call_soon(self.schedule_pass)

    def schedule_pass(self) -> None:
        self._kicked = False
        self.journal.hold = False
        started = time.perf_counter()
        try:
            self._pass()
        except Exception:
            log.exception("scheduling pass failed")
        finally:  # what this turn changed, with the exits that caused the pass
            self.flush(force=True)
        self.last_pass_seconds = time.perf_counter() - started
        self._next_pass = self.loop.time() + self._decide_seconds

    def _pass(self, explain: bool = False) -> None:
        """Decide and start. The dispatch pass does not explain (it stops as soon as nothing
        fits, so it stays fast with a long queue); :meth:`explain` asks for the reasons."""
        now = self.clock.time()
        t0 = time.perf_counter()
        self._decide_seconds = 0.0  # (a pass that decides nothing delays no later one)
        self._reasons_valid = False
        if self.queue_paused or (not explain and not self._deps_dirty and self._full()):
            return  # nothing could start: spare the sort of a long queue
        pending = self._pending()
        if not pending:
            return
        explain = explain or self._deps_dirty
        self._deps_dirty = False
        running = self._running()
        paused = {s.index for u in self.paused if (s := self.res.by_uuid.get(u)) is not None}
        ledger = self.res.ledger
        launches: list[tuple[Job, Any]] = []
        others = self.outside_usage(clean=True)
        decisions = schedule(
            pending,
            running,
            self.res.inventory,
            others,
            paused,
            now,
            policy=self.opts.policy or DEFAULT_POLICY,
            done=self.finished_states,
            fair=self.accounts.fair(running, now) if self.order.tenants > 1 else None,
            limits=self.accounts.user_limits(),
            explain=explain,
            presorted=self.order.presorted,
            profile=self.order.profile,
        )
        self._decide_seconds = time.perf_counter() - t0
        for start in decisions.starts:
            job = self.jobs[start.job_id]
            lease = ledger.claim(
                [self.res.by_index[i] for i in start.gpus],
                start.share,
                start.mem,
                label=f"berth job {job.id} ({job.name})",
            )
            if lease is None:
                # Another process claimed at the same moment (the ledger has no lock: see
                # berth.claims.verify); its claim, or its withdrawal, wakes the next pass.
                continue
            launches.append((job, (start, lease)))
        if explain and not launches:
            self._set_reasons(decisions)
        self._arm_timer(decisions.wakeup, now)
        if launches:
            self._launch(launches, now)
        for c in decisions.cancels:
            doomed = self.jobs.get(c.job_id)
            if doomed is not None and doomed.state is State.PENDING:
                self._change(doomed, State.CANCELLED, now, reason=c.reason)

    def _own_leases(self) -> set[str]:
        """Claims of our own jobs (running, being forked, or waiting for their commit)."""
        out = {r.lease for r in self.runs.values() if r.lease}
        out.update(lease.lease_id for lease in self.committing.values())
        return out

    def _running(self) -> list[Job]:
        """Jobs holding GPUs: watched, or being launched (not a scan of the whole queue)."""
        out = []
        for job_id in dict.fromkeys((*self.runs, *self.committing)):  # (may be in both)
            job = self.jobs.get(job_id)
            if job is not None and job.state in (State.RUNNING, State.COMPLETING):
                out.append(job)
        return out

    def _full(self) -> bool:
        """Every GPU is wholly taken by our own running jobs (others can only take more)."""
        if not self.res.inventory:
            return False
        held: dict[int, float] = {}
        for job_id in dict.fromkeys((*self.runs, *self.committing)):
            job = self.jobs.get(job_id)
            if job is None or not job.attempts:
                continue
            a = job.attempts[-1]
            for g in a.gpus:
                held[g] = held.get(g, 0.0) + a.share
        return all(held.get(g.index, 0.0) >= 1.0 - 1e-9 for g in self.res.inventory)

    def _pending(self) -> list[Job]:
        """Pending jobs in the policy's order (:mod:`berth.daemon.engine.queue_order`)."""
        policy = self.opts.policy or DEFAULT_POLICY
        return self.order.pending(self.jobs.values(), policy, self.clock.time())

    def _set_reasons(self, decisions: Any) -> None:
        drained = drain_notes(self)
        self.reasons = {
            i: p.reason.value
            + (f": {p.detail}" if p.detail else "")
            + (drained if drained and p.reason.value == "GpuPaused" else "")
            for i, p in decisions.pending.items()
        }
        self._reasons_valid = True

    def explain(self) -> None:
        """Bring the pending reasons up to date (for `berth queue`/`show`/`status`): a pass
        that explains but starts nothing (what it would start is `(None)`: starting now)."""
        if self._reasons_valid:
            return
        t0 = time.perf_counter()
        pending = [j for j in self.jobs.values() if j.state is State.PENDING]
        if self.queue_paused:
            self.reasons = {j.id: "QueuePaused" for j in pending}
            self._reasons_valid = True
            return
        running = [j for j in self.jobs.values() if j.state in (State.RUNNING, State.COMPLETING)]
        paused = {s.index for u in self.paused if (s := self.res.by_uuid.get(u)) is not None}
        now = self.clock.time()
        multi = len({j.tenant for j in pending}) > 1
        decisions = schedule(
            pending,
            running,
            self.res.inventory,
            self.outside_usage(),
            paused,
            now,
            policy=self.opts.policy or DEFAULT_POLICY,
            done=self.finished_states,
            fair=self.accounts.fair(running, now) if multi else None,
            limits=self.accounts.user_limits(),
            explain=True,
        )
        self._set_reasons(decisions)
        for start in decisions.starts:
            self.reasons[start.job_id] = "None: starting"
        self.last_explain_seconds = time.perf_counter() - t0
        if decisions.starts or decisions.cancels:
            self.kick()

    def outside_usage(self, clean: bool = False) -> dict[int, Usage]:
        """GPU index -> what holders other than our jobs use (daemonless claims and waiters,
        processes outside berth): what scheduling passes see. ``clean``: also remove dead
        claim files."""
        lstate = self.res.ledger.scan(bodies=self.res.bodies_needed(), clean=clean)
        return self.res.others(lstate, self._own_leases(), self._own_pids)

    def _own_pids(self) -> set[int]:
        """The leader of each running job (its session id) and the supervisor running it
        (its descendants, orphans included, are the job's): what tells our jobs' GPU
        processes from others'. Read from the run file until both are known."""
        out: set[int] = set()
        for r in self.runs.values():
            if r.job_pid is None or r.sup_pid is None:
                info = self.procs.record(r.path)
                r.job_pid = info.get("job")
                r.sup_pid = r.sup_pid or info.get("sup")
            out.update(p for p in (r.job_pid, r.sup_pid) if p is not None)
        return out

    def _arm_timer(self, wakeup: float | None, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if wakeup is not None:
            self._timer = self.loop.call_later(max(0.0, wakeup - now) + 0.001, self.kick)

    def purge_finished(self) -> int:
        """Forget jobs that ended more than ``--keep-finished`` ago (their logs stay, and
        their ids are never given again). Committed with the next group; returns how many."""
        keep = self.opts.keep_finished
        if not keep or keep == float("inf"):
            return 0
        ids = [
            i for i in self.store.ended_before(self.clock.time() - keep) if i not in self.settling
        ]
        if not ids:
            return 0
        self.journal.execute(Store.LAST_ID_SQL, [(str(self.next_id - 1),)])
        self.journal.execute(Store.PURGE_SQL, [(i,) for i in ids])

        def forget() -> None:
            for i in ids:
                self.finished_states.pop(i, None)

        self.journal.after_commit(forget)
        log.info("purged %d job record(s) that ended over %gs ago", len(ids), keep)
        return len(ids)

    def _change(
        self,
        job: Job,
        to: State,
        now: float,
        *,
        reason: str = "",
        exit_code: int | None = None,
    ) -> None:
        """:meth:`Lifecycle._change`, and an attempt that ends adds what it used to its
        tenant's fair-share usage, in the same commit as its end."""
        holding = job.state in ACTIVE
        super()._change(job, to, now, reason=reason, exit_code=exit_code)
        if holding:
            row = self.accounts.ended(job, max(now, self.clock.time()))
            if row is not None:
                self.journal.execute(Store.USAGE_SQL, [row])

    # -- the journal (berth.daemon.store.journal) ---------------------------------------------------

    def insert(self, job: Job, spec: JobSpec) -> asyncio.Future[None]:
        """Add a new job; the future completes once it is durable."""
        self.jobs[job.id] = job
        self.order.joined()
        fut = self.journal.insert(job, spec)
        self.kick()
        return fut

    def save(self, job: Job, **cols: Any) -> None:
        """Queue a job's new state for the next commit (``cols``: ended_at, launched)."""
        self.journal.save(job, **cols)

    def flush(self, force: bool = False) -> None:
        self.journal.flush(force)

    def durable(self) -> asyncio.Future[None]:
        """A future that completes once every change queued so far is committed."""
        return self.journal.durable()

    async def drain(self) -> None:
        """Wait until nothing is queued or being committed."""
        await self.journal.drain()

    def _committed(self, inserted: list[Job], saved: list[Job], ok: bool) -> None:
        for job in saved:
            if self.settling.get(job.id) is job:
                del self.settling[job.id]  # its final state is durable
        if not ok:
            for job in inserted:  # never accepted
                self.jobs.pop(job.id, None)
            self.order.joined()
