"""The daemon's heart: unfinished jobs in memory, one scheduling pass at a time: the I/O shell
around :mod:`berth.core`. It holds its parts (composed, not inherited), each given the books it
shares and the calls it needs: starting attempts (``engine.launcher``, :mod:`.starts`), hearing how
they end, controlling and adopting them (``engine.control``, :mod:`.control`). Commits go through
its journal (:mod:`berth.daemon.store.journal`). It reads the time from its clock and reaches the
processes that run its jobs only through its process port, both given to it
(:mod:`berth.daemon.ports`), so its passes run in a test without a fork. Every state change
goes through :func:`berth.core.transition.transition` and is committed before anything acts
on it (write-ahead: a job's command runs only once the job is RUNNING with ``launched`` set in
the database; its attempt waits for that at its start gate, :mod:`berth.daemon.supervisor.gate`).
Event-driven: :meth:`kick` schedules one pass at the next turn (paced by the passes' own time).
"""

from __future__ import annotations

import asyncio
import logging
import time

from berth.claims.together import Want
from berth.core.deps import Finished
from berth.core.job import Job
from berth.core.policy import DEFAULT_POLICY, Inputs, schedule
from berth.core.states import State
from berth.daemon.engine import cpuslots, explaining
from berth.daemon.engine.accounts import Accounts
from berth.daemon.engine.control import Control
from berth.daemon.engine.diskfull import DiskFull
from berth.daemon.engine.estimates import Estimates
from berth.daemon.engine.jobtable import JobTable
from berth.daemon.engine.kept import KeptCapacity
from berth.daemon.engine.pauses import Pauses
from berth.daemon.engine.queue_order import QueueOrder
from berth.daemon.engine.reservations import Reservations
from berth.daemon.engine.starts import PRIVATE, Launcher
from berth.daemon.ports import SystemClock
from berth.daemon.store import summaries
from berth.daemon.store.journal import Journal
from berth.daemon.store.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence, ValuesView
    from typing import Any

    from berth.claims.claim import Claim
    from berth.core.inventory import Usage
    from berth.daemon.engine.enforcer import Enforcer
    from berth.daemon.engine.host import Until
    from berth.daemon.engine.resources import Resources
    from berth.daemon.options import Options
    from berth.daemon.ports import Clock, LiveAttempt, Processes
    from berth.daemon.store.tasks import Tasks
    from berth.wire.jobspec import JobSpec

log = logging.getLogger("berth.daemon")


class Engine:
    def __init__(
        self,
        opts: Options,
        store: Store,
        res: Resources,
        loop: asyncio.AbstractEventLoop,
        *,
        procs: Processes,
        clock: Clock | None = None,
    ) -> None:
        """``procs``, ``clock``: its ports (:mod:`berth.daemon.ports`; the real clock if none)."""
        self.opts = opts
        self.store = store
        self.res = res
        self.loop = loop
        self.clock: Clock = clock or SystemClock()
        self.procs = procs
        self.jobs = JobTable()  # unfinished jobs (and how many each user has)
        self.runs: dict[int, LiveAttempt] = {}  # job id -> its running attempt
        self.reasons: dict[int, str] = {}  # pending job -> why it waits (last pass)
        self.considered: dict[int, int] = {}  # pending job -> its place in the last pass
        self.explained_all = False  # the reasons in hand cover every pending job
        self.finished_states = Finished()  # for dependencies (and --retry-oom's retries)
        self.pauses = Pauses(store, res, self.kick)  # paused GPUs, a paused queue
        self.accounts = Accounts(store, res.cfg)  # fair share and per-user limits
        self.reservations = Reservations(store, res, self.kick)  # `berth admin reserve`
        self.notes: list[Callable[[], str | None]] = []  # lines for `berth status`, if any
        self.waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.next_id = 1
        self.unique: dict[str, int] = {}  # `submit --unique` identity -> newest job with it
        self._kicked = False
        self._timer: asyncio.TimerHandle | None = None
        self.last_pass_seconds = self.last_explain_seconds = 0.0
        self._next_pass = 0.0
        self._decide_seconds = 0.0
        self._reasons_valid = False
        self._deps_dirty = False  # a job depended on ended, or one depends: one may be doomed
        self.depended: set[int] = set()  # jobs some job depends on (and may be doomed by)
        self.journal = Journal(store, loop, self._committed)  # group commit: a turn's changes
        self.committing: dict[int, Claim] = {}  # started, waiting for the write-ahead commit
        self.settling: dict[int, Job] = {}  # finished, the final state not yet committed
        self.purging: set[int] = set()  # old jobs summarized and purged, not yet committed
        self.cancel_on_start: set[int] = set()
        self.stop_event = asyncio.Event()
        self.order = QueueOrder()  # the queue in the policy's order, kept between passes
        self.kept = KeptCapacity()  # what the running jobs hold, kept between passes
        self.enforcer: Enforcer | None = None  # [enforce] (enforcer.py), set at start-up
        self.estimates: Estimates = Estimates(self)  # when each pending job should start
        self.diskfull = DiskFull(loop, self.kick)  # starts that wait for space (issue 41.7)
        self.notes.append(self.diskfull.note)
        self.journal.on_recovered = self.diskfull.room
        # Its parts: each given the books it shares (the same objects) and what it calls.
        books = (
            opts, store, res, self.clock, procs, self.journal, self.jobs, self.runs,
            self.committing, self.cancel_on_start, self.reasons, self.order, self.diskfull,
        )  # fmt: skip
        self.control: Control  # (made next: what starts call to change a state)
        self.launcher = Launcher(
            *books, kick=self.kick, save=self.save,
            change=lambda *a, **k: self.control._change(*a, **k),  # (made next)
        )  # fmt: skip
        self.control = Control(
            *books, self.accounts, self.settling, self.finished_states, self.waiters,
            self.depended, self.purging, kick=self.kick, save=self.save,
            deps_changed=self._deps_changed, last_id=lambda: self.next_id - 1,
            unstart=self.launcher._unstart, launch_failed=self.launcher._launch_failed,
            learn=self.estimates.learn,
        )  # fmt: skip
        procs.listen(self.control._on_done, self.control._on_gone, self.control._on_adopted_exit)

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
        if self.pauses.queue or (not explain and not self._deps_dirty and self._full()):
            return  # nothing could start: spare the sort of a long queue
        pending = self._pending()
        if not pending:
            return
        if self.diskfull.blocks():
            return  # starts wait for space: its timer, or a commit that succeeds, tries again
        explain = explain or self._deps_dirty
        self._deps_dirty = False
        running = self._running()
        paused = self.pauses.indexes()
        ledger = self.res.ledger
        launches: list[tuple[Job, Any]] = []
        others, nodes = self.outside_usage(clean=True), cpuslots.nodes(self.opts.cpu_slots)
        inventory = self.res.inventory  # (what the running jobs leave, kept between passes:)
        held = None if explain else self.kept.capacity(inventory, nodes, others, paused, running)
        decisions = schedule(Inputs(
            pending, running, inventory, others, paused, now, capacity=held,
            policy=self.opts.policy or DEFAULT_POLICY, nodes=nodes,  # (-g 0 jobs: CPU slots)
            done=self.finished_states,
            fair=self.accounts.fair(running, now) if self.order.tenants > 1 or self.accounts.projects.any else None,
            limits=self.accounts.user_limits(),
            explain=explain,
            presorted=self.order.presorted,
            profile=self.order.profile,
            reservations=self.reservations.windows(now),
            arrivals=self.order.arrivals.any(),  # (guarded: berth.core.guard)
            predicted=self.estimates.backfill(now),  # ([scheduling] predict)
        ))
        self._decide_seconds = time.perf_counter() - t0
        private = self.opts.private  # (claim files are readable by all: no command then)
        wants = [Want(
            [self.res.by_index[i] for i in start.gpus], start.share, start.mem,
            label=f"berth job {start.job_id} {PRIVATE if private else f'({self.jobs[start.job_id].name})'}",
            command=PRIVATE if private else None,
        ) for start in decisions.starts]  # fmt: skip
        # The pass's claims, checked in one look (berth.claims.together). One that is None:
        # another process claimed at the same moment (the ledger has no lock: see
        # berth.claims.verify), or none could be made (no descriptor left: diskfull.py).
        for start, claim in zip(decisions.starts, self.diskfull.claim_each(ledger, wants), strict=True):
            if claim is not None:
                launches.append((self.jobs[start.job_id], (start, claim)))
        if explain and not launches:
            explaining.set_reasons(self, decisions)
            self._reasons_valid = True
        if self._timer is not None:  # (the next pass the decisions ask for, if any)
            self._timer.cancel()
            self._timer = None
        if decisions.wakeup is not None:
            delay = max(0.0, decisions.wakeup - now) + 0.001
            self._timer = self.loop.call_later(delay, self.kick)
        if launches:
            self.launcher._launch(launches, now)
        for c in decisions.cancels:
            doomed = self.jobs.get(c.job_id)
            if doomed is not None and doomed.state is State.PENDING:
                self.control._change(doomed, State.CANCELLED, now, reason=c.reason)

    def own_lease_ids(self) -> set[str]:
        """The leases of our jobs' claims: running, handed over, or waiting for their commit."""
        out = {r.lease_id for r in self.runs.values() if r.lease_id}
        out.update(claim.lease_id for claim in self.committing.values())
        return out

    def _running(self) -> list[Job]:
        """Jobs holding GPUs: watched, being launched, or LOST once what they left has ended."""
        out = []
        for job_id in dict.fromkeys((*self.runs, *self.committing, *self.control.ending)):
            job = self.jobs.get(job_id)
            if job is not None and job.state in (State.RUNNING, State.COMPLETING):
                out.append(job)
        return out

    def _full(self) -> bool:
        """Every GPU is wholly taken by our own running jobs (others can only take more), and
        no job waits that needs none (-g 0: a CPU slot may be free)."""
        if not self.res.inventory:
            return False
        held: dict[int, float] = {}
        for job_id in dict.fromkeys((*self.runs, *self.committing, *self.control.ending)):
            job = self.jobs.get(job_id)
            if job is None or not job.attempts:
                continue
            a = job.attempts[-1]
            for g in a.gpus:
                held[g] = held.get(g, 0.0) + a.share
        if not all(held.get(g.index, 0.0) >= 1.0 - 1e-9 for g in self.res.inventory):
            return False
        return not self.order.waits_without_gpu(self.jobs.values)

    def _pending(self) -> Sequence[Job]:
        """Pending jobs in the policy's order (:mod:`berth.daemon.engine.queue_order`)."""
        policy = self.opts.policy or DEFAULT_POLICY
        return self.order.pending(self.jobs.values(), policy, self.clock.time())

    def explain(self, until: Until | None = None) -> None:
        """Bring the pending reasons up to date (for `berth queue`/`show`/`status`), for the
        whole queue or, with ``until``, its head (:mod:`berth.daemon.engine.explaining`)."""
        if not (self._reasons_valid and explaining.covered(self, until)):
            explaining.explain(self, until)
            self._reasons_valid = True

    def outside_usage(self, clean: bool = False) -> dict[int, Usage]:
        """GPU index -> what holders other than our jobs use (daemonless claims and waiters,
        processes outside berth): what passes see. ``clean``: also remove dead claim files."""
        own = self.own_lease_ids()  # (left out: not probed, one look fewer per running job)
        lstate = self.res.ledger.scan(bodies=self.res.bodies_needed(), clean=clean, skip=own)
        index = {u: s.index for u, s in self.res.by_uuid.items()}
        now = self.clock.time()
        rows = self.accounts.claims_seen(lstate.claims, own, now, index)
        if rows:  # claims outside the queue that ended: their users' usage (issue 20.15)
            self.journal.execute(Store.USAGE_SQL, rows)  # ... and `berth report`'s hours:
            self.journal.execute(summaries.ADD_SQL, summaries.claims(self.accounts.claims_ended, now))
        return self.res.others(lstate, own, self._own_pids)

    def _own_pids(self) -> dict[int, tuple[int, ...]]:
        """Each running job's leader (its session id) and supervisor (their descendants,
        orphans included, are the job's) with the job's GPUs (read from its run file)."""
        out: dict[int, tuple[int, ...]] = {}
        for job_id, r in self.runs.items():
            if r.job_pid is None or r.sup_pid is None:
                info = self.procs.record(r.path)
                r.job_pid = info.get("job")
                r.sup_pid = r.sup_pid or info.get("sup")
            a = (job := self.jobs.get(job_id)) and job.attempt
            out.update((p, a.gpus if a else ()) for p in (r.job_pid, r.sup_pid) if p is not None)
        return out

    def _deps_changed(self) -> None:  # (a job some job depends on has ended)
        self._deps_dirty = True

    # -- what requests and the web ask of the engine ---------------------------------------

    def unfinished(self) -> ValuesView[Job]:
        """The unfinished jobs (pending, running, completing), in no particular order."""
        return self.jobs.values()

    def reason(self, job_id: int) -> str | None:
        """Why a pending job waits, as the last pass (or :meth:`explain`) said; while the
        state disk is full, a job that would start waits for space."""
        said = self.reasons.get(job_id)
        if self.diskfull.full and (said is None or said.startswith("None")):
            return self.diskfull.reason()
        return said

    def live(self, job_id: int) -> Job | None:
        """A job in memory: unfinished, or ended with its end not yet durable."""
        return self.jobs.get(job_id) or self.settling.get(job_id)

    def find(self, job_id: int) -> Job | None:
        """A job on record: in memory, else as the store keeps it; None if there is none."""
        job = self.live(job_id)
        if job is None:
            data = self.store.job(job_id)
            job = None if data is None else Job.from_dict(data)
        return job

    def state_of(self, job_id: int) -> State | None:
        """The job's state from memory (an ended job's kept for dependencies), or None."""
        job = self.live(job_id)
        return job.state if job is not None else self.finished_states.get(job_id)

    def settling_jobs(self) -> list[Job]:
        """The jobs that have ended whose end is not durable yet."""
        return list(self.settling.values())

    def on_end(self, job_id: int) -> asyncio.Future[None] | None:
        """A future done once the unfinished job's end is durable (None: not unfinished)."""
        if job_id not in self.jobs:
            return None
        fut: asyncio.Future[None] = self.loop.create_future()
        self.waiters.setdefault(job_id, []).append(fut)
        return fut

    def unique_job(self, key: str) -> int | None:
        """The newest job with identity ``key`` (unique.key, or a watched line's), if any."""
        return self.unique.get(key)

    def note_unique(self, key: str, job_id: int) -> None:
        self.unique[key] = job_id

    def new_ids(self, n: int) -> int:
        """Give ``n`` consecutive new job ids (never given before); returns the first."""
        first = self.next_id
        self.next_id += n
        return first

    def running_count(self) -> int:
        return len(self.runs)

    # -- the journal (berth.daemon.store.journal) ---------------------------------------------------

    def insert(
        self, job: Job, spec: JobSpec | Tasks, durable: bool = True
    ) -> asyncio.Future[None] | None:
        """Add a new job; the future completes once it is durable (none if not ``durable``)."""
        self.jobs[job.id] = job
        self.order.joined(job)
        if job.dependencies:  # (one already never met: cancelled by the next pass)
            self.depended.update(d.job_id for d in job.dependencies)
            self._deps_dirty = True
        fut = self.journal.add(job, spec, self.loop.create_future() if durable else None)
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

    async def saved(self) -> dict[str, str]:
        """``{}`` once the changes made so far are durable, else what was not saved."""
        return await self.journal.saved()

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
