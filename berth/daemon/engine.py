"""The daemon's heart: unfinished jobs in memory, one scheduling pass at a time, launching
supervisors, and recording how attempts end. The I/O shell around :mod:`berth.core`.

Every state change goes through :func:`berth.core.transition.transition` and is committed to
the store before anything acts on it (write-ahead: a job is RUNNING with ``launched`` set in
the database before its supervisor is forked). Scheduling is event-driven: :meth:`kick`
schedules one pass at the next turn of the loop, however many events asked for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from berth.core.states import FINISHED, State
from berth.core.transition import transition
from berth.daemon import runfile
from berth.daemon.launcher import launch_spec
from berth.daemon.pool import Pool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.claims.ledger import Lease
    from berth.core.job import Job
    from berth.core.placement import Profile
    from berth.daemon.options import Options
    from berth.daemon.pool import Slot
    from berth.daemon.resources import Resources
    from berth.daemon.store import Store
    from berth.daemon.writer import Writer

log = logging.getLogger("berth.daemon")

MAX_SPARES = 256  # used run files kept for reuse


class Run:
    """Runtime handles of one running attempt (never persisted): the supervisor that runs
    it, either from our pool (``slot``) or adopted from a previous daemon (``pidfd``)."""

    __slots__ = ("attempt", "job_pid", "lease", "path", "pidfd", "slot")

    def __init__(
        self, path: str, attempt: int, lease: str | None, slot: Slot | None, pidfd: int = -1
    ) -> None:
        self.path = path
        self.attempt = attempt
        self.lease = lease
        self.slot = slot
        self.pidfd = pidfd
        self.job_pid: int | None = None


class Engine:
    def __init__(
        self, opts: Options, store: Store, res: Resources, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.opts = opts
        self.store = store
        self.res = res
        self.loop = loop
        self.run_dir = os.path.join(opts.state_dir, "run")
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        # Run files of ended attempts, kept for reuse (see runfile.open_run_file).
        self.spares = [
            os.path.join(self.run_dir, n)
            for n in os.listdir(self.run_dir)
            if n.startswith(runfile.SPARE)
        ][:MAX_SPARES]
        self._spare_seq = 0
        self._spare_tag = f"{os.getpid()}-{time.time_ns()}"
        self.jobs: dict[int, Job] = {}  # unfinished jobs
        self.runs: dict[int, Run] = {}  # job id -> its running attempt
        self.reasons: dict[int, str] = {}  # pending job -> why it waits (last pass)
        self.finished_states: dict[int, State] = {}  # for dependencies
        self.paused: set[str] = set()  # GPU uuids
        self.queue_paused = False
        self.waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.next_id = 1
        self._kicked = False
        self._timer: asyncio.TimerHandle | None = None
        self.last_pass_seconds = 0.0
        self.last_explain_seconds = 0.0
        self._next_pass = 0.0
        self._decide_seconds = 0.0
        self._reasons_valid = False
        self._deps_dirty = False  # a job ended unsuccessfully: dependents may be doomed
        # Group commit: state changes made in one turn of the loop commit together.
        self._inserts: list[tuple[Job, dict[str, Any], asyncio.Future[None] | None]] = []
        self._dirty: dict[int, tuple[Job, dict[str, Any]]] = {}
        self._after_commit: list[Callable[[], None]] = []
        self._on_fail: list[Callable[[], None]] = []  # instead of _after_commit, on failure
        self._flush_armed = False
        self.pool = Pool(loop, self._on_done, self._on_gone)
        self.writer: Writer | None = None  # commits on its own thread (else: on the loop)
        self._in_flight = False  # a batch is being committed by the writer
        self.committing: dict[int, Lease] = {}  # started, waiting for the write-ahead commit
        self.settling: dict[int, Job] = {}  # finished, the final state not yet committed
        self.cancel_on_start: set[int] = set()
        self.stop_event = asyncio.Event()
        self._pass_soon = False
        self._order_dirty = True  # a job joined (or rejoined) the queue: re-sort
        self._sorted: list[Job] = []
        self._left_order = 0  # jobs of _sorted that left PENDING since it was filtered
        self._presorted = False
        self._profile: Profile | None = None
        self._sorted_at = 0.0

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
            self._pass_soon = delay < 0.010
            if delay > 0:
                self.loop.call_later(delay, self.schedule_pass)
            else:
                self.loop.call_soon(self.schedule_pass)

    def schedule_pass(self) -> None:
        self._kicked = False
        self._pass_soon = False
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
        from berth.core.policy import DEFAULT_POLICY, schedule

        now = time.time()
        t0 = time.perf_counter()
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
        own_leases = self._own_leases()
        ledger = self.res.ledger
        launches: list[tuple[Job, Any]] = []
        with ledger.locked():
            lstate = ledger.scan(bodies=self.res.bodies_needed(), clean=True)
            others = self.res.others(lstate, own_leases, self._job_sids)
            decisions = schedule(
                pending,
                running,
                self.res.inventory,
                others,
                paused,
                now,
                policy=self.opts.policy or DEFAULT_POLICY,
                done=self.finished_states,
                explain=explain,
                presorted=self._presorted,
                profile=self._profile,
            )
            self._decide_seconds = time.perf_counter() - t0
            for start in decisions.starts:
                job = self.jobs[start.job_id]
                pairs = [(self.res.by_index[i].uuid, i) for i in start.gpus]
                lease = ledger.create(
                    pairs, start.share, start.mem, label=f"berth job {job.id} ({job.name})"
                )
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
        for job_id in (*self.runs, *self.committing):
            job = self.jobs.get(job_id)
            if job is not None and job.state in (State.RUNNING, State.COMPLETING):
                out.append(job)
        return out

    def _full(self) -> bool:
        """Every GPU is wholly taken by our own running jobs (others can only take more)."""
        if not self.res.inventory:
            return False
        held: dict[int, float] = {}
        for job_id in (*self.runs, *self.committing):
            job = self.jobs.get(job_id)
            if job is None or not job.attempts:
                continue
            a = job.attempts[-1]
            for g in a.gpus:
                held[g] = held.get(g, 0.0) + a.share
        return all(held.get(g.index, 0.0) >= 1.0 - 1e-9 for g in self.res.inventory)

    def _pending(self) -> list[Job]:
        """Pending jobs in the policy's order, re-sorted only when jobs joined the queue (the
        order of the others does not change), or, for ``balanced`` (whose order ages), at
        most once a second: a pass over a long queue must not sort it every time."""
        from berth.core.placement import Profile
        from berth.core.policy import DEFAULT_POLICY, order_key

        policy = self.opts.policy or DEFAULT_POLICY
        now = time.time()
        if self._order_dirty or (policy == "balanced" and now - self._sorted_at > 1.0):
            self._order_dirty = False
            self._left_order = 0
            self._sorted_at = now
            self._sorted = sorted(
                (j for j in self.jobs.values() if j.state is State.PENDING),
                key=lambda j: order_key(j, policy, now),
            )
            self._profile = Profile.of(j.request for j in self._sorted)
            self._presorted = True
            return list(self._sorted)
        # Drop the jobs that left the queue since: those that started are nearly always at
        # its head; a full filter only if some left from elsewhere.
        order = self._sorted
        k = 0
        while k < len(order) and order[k].state is not State.PENDING:
            k += 1
        if k:
            del order[:k]
        if self._left_order != k:  # (more left, or some left uncounted: be exact)
            order[:] = [j for j in order if j.state is State.PENDING]
        self._left_order = 0
        return list(order)

    def _set_reasons(self, decisions: Any) -> None:
        self.reasons = {
            i: p.reason.value + (f": {p.detail}" if p.detail else "")
            for i, p in decisions.pending.items()
        }
        self._reasons_valid = True

    def explain(self) -> None:
        """Bring the pending reasons up to date (for `berth queue`/`show`/`status`): a pass
        that explains but starts nothing (what it would start is `(None)`: starting now)."""
        if self._reasons_valid:
            return
        from berth.core.policy import DEFAULT_POLICY, schedule

        t0 = time.perf_counter()
        pending = [j for j in self.jobs.values() if j.state is State.PENDING]
        if self.queue_paused:
            self.reasons = {j.id: "QueuePaused" for j in pending}
            self._reasons_valid = True
            return
        running = [j for j in self.jobs.values() if j.state in (State.RUNNING, State.COMPLETING)]
        paused = {s.index for u in self.paused if (s := self.res.by_uuid.get(u)) is not None}
        own_leases = self._own_leases()
        lstate = self.res.ledger.scan(bodies=self.res.bodies_needed())
        decisions = schedule(
            pending,
            running,
            self.res.inventory,
            self.res.others(lstate, own_leases, self._job_sids),
            paused,
            time.time(),
            policy=self.opts.policy or DEFAULT_POLICY,
            done=self.finished_states,
            explain=True,
        )
        self._set_reasons(decisions)
        for start in decisions.starts:
            self.reasons[start.job_id] = "None: starting"
        self.last_explain_seconds = time.perf_counter() - t0
        if decisions.starts or decisions.cancels:
            self.kick()

    def _job_sids(self) -> set[int]:
        out = set()
        for r in self.runs.values():
            if r.job_pid is None:
                r.job_pid = runfile.read_run_file(r.path).get("job")
            if r.job_pid is not None:
                out.add(r.job_pid)
        return out

    def _arm_timer(self, wakeup: float | None, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if wakeup is not None:
            self._timer = self.loop.call_later(max(0.0, wakeup - now) + 0.001, self.kick)

    # -- launching ----------------------------------------------------------------------------

    def _launch(self, launches: list[tuple[Job, Any]], now: float) -> None:
        for job, (start, lease) in launches:
            transition(
                job, State.RUNNING, now=now, gpus=tuple(start.gpus), share=start.share,
                mem=start.mem,
            )  # fmt: skip
            job.extra["lease"] = lease.lease_id
            self._left_order += 1
            self.save(job, launched=len(job.attempts))
            self.committing[job.id] = lease
        # Write-ahead: RUNNING + launched is durable before any fork. The forks follow the
        # commit (the loop serves meanwhile); a failed commit releases the claims instead.
        self._after_commit.append(lambda: self._fork(launches))
        self._on_fail.append(lambda: self._not_launched(launches))
        self.flush(force=True)

    def _not_launched(self, launches: list[tuple[Job, Any]]) -> None:
        for job, (_start, lease) in launches:
            self.committing.pop(job.id, None)
            lease.release()
            if self.jobs.get(job.id) is job:  # (a job whose insert failed is gone already)
                self._launch_failed(job, "the state database could not record its start")

    def _fork(self, launches: list[tuple[Job, Any]]) -> None:
        """The write-ahead is durable: hand each attempt to a supervisor of its owner."""
        for job, (start, lease) in launches:
            self.committing.pop(job.id, None)
            attempt = len(job.attempts)
            path = runfile.run_file(self.run_dir, job.id, attempt)
            run_fd = -1
            try:
                spec = self.store.spec(job.id)
                gpus = [(i, self.res.by_index[i].uuid) for i in start.gpus]
                owner = (job.uid, job.gid, job.user)
                ls = launch_spec(spec, job.id, gpus, self._limit(job), self.opts.kill_after)
                run_fd = runfile.open_run_file(path, self.spares.pop() if self.spares else None)
                msg = {"job": job.id, "attempt": attempt, "path": path, "spec": ls}
                slot = self.pool.run(owner, msg, [run_fd, *lease.fds])
            except OSError as e:
                lease.release()
                if run_fd >= 0:
                    _unlink(path)
                self._launch_failed(job, str(e))
                continue
            finally:
                if run_fd >= 0:
                    os.close(run_fd)  # the supervisor holds its lock now
            lease.detach()  # the supervisor and the job hold the claim now
            self.runs[job.id] = Run(path, attempt, lease.lease_id, slot)
            if job.id in self.cancel_on_start:
                self.cancel_on_start.discard(job.id)
                self.pool.order(slot, job.id, attempt, "term")

    def _launch_failed(self, job: Job, why: str) -> None:
        log.error("job %d: cannot start its supervisor: %s", job.id, why)
        self._change(job, State.FAILED, time.time(), reason=why, exit_code=127)

    def _limit(self, job: Job) -> float | None:
        limits = [t for t in (job.time_limit, self.opts.max_job_time) if t]
        return min(limits) if limits else None

    # -- endings ------------------------------------------------------------------------------

    def _on_done(self, job_id: int, attempt: int, result: dict[str, Any]) -> None:
        """A supervisor of our pool says how an attempt ended (its run file says the same)."""
        run = self.runs.get(job_id)
        if run is None or run.attempt != attempt:
            return
        del self.runs[job_id]
        self.record_exit(self.jobs[job_id], result, run.path, leftovers=False)

    def _on_gone(self, job_id: int, attempt: int, why: str, started: bool) -> None:
        """The supervisor running an attempt died, or never came to be."""
        run = self.runs.get(job_id)
        if run is None or run.attempt != attempt:
            return
        del self.runs[job_id]
        job = self.jobs[job_id]
        info = runfile.read_run_file(run.path)
        if "exit" in info:
            self.record_exit(job, info["exit"], run.path)
        elif not started or "sup" not in info:
            # It never reached a supervisor (the run file is as we made it): nothing ran.
            _unlink(run.path)
            self._launch_failed(job, why)
        else:
            log.error("job %d: %s while running attempt %d", job_id, why, attempt)
            self.record_exit(job, None, run.path)

    def _on_adopted_exit(self, job_id: int) -> None:
        run = self.runs.pop(job_id)
        self.loop.remove_reader(run.pidfd)
        os.close(run.pidfd)
        result = runfile.read_run_file(run.path).get("exit")
        self.record_exit(self.jobs[job_id], result, run.path)

    def record_exit(
        self,
        job: Job,
        result: dict[str, Any] | None,
        path: str,
        leftovers: bool = True,
        lost: str = "its supervisor died without a record",
    ) -> None:
        """Record how an attempt ended (``result`` from its run file; None = unknown, and
        ``lost`` says why). ``leftovers``: it may have left a ``.sig`` or ``.pty`` file."""
        end = time.time()
        if result is None:
            self._change(job, State.LOST, end, reason=lost)
        else:
            end = float(result.get("end") or end)
            rc = result.get("rc")
            if result.get("error"):
                self._change(job, State.FAILED, end, reason=result["error"], exit_code=rc)
            elif result.get("timeout"):
                self._change(job, State.TIMEOUT, end, reason="time limit", exit_code=rc)
            elif result.get("cancelled"):
                self._change(job, State.CANCELLED, end, reason="cancelled", exit_code=rc)
            elif rc == 0:
                self._change(job, State.COMPLETED, end, exit_code=0)
            else:
                sig = result.get("signal")
                why = f"killed by signal {sig}" if sig else f"exit code {rc}"
                self._change(job, State.FAILED, end, reason=why, exit_code=rc)
        self._after_commit.append(lambda: self._retire(path, leftovers))

    def _change(
        self,
        job: Job,
        to: State,
        now: float,
        *,
        reason: str = "",
        exit_code: int | None = None,
    ) -> None:
        """Transition + save (committed with this turn's group) + wake waiters + schedule."""
        was_pending = job.state is State.PENDING
        transition(job, to, now=now, reason=reason, exit_code=exit_code)
        if job.state is State.PENDING:
            self._order_dirty = True  # requeued or retried
        elif was_pending:
            self._left_order += 1
        finished = job.state in FINISHED
        self.save(job, ended_at=now if finished else None, launched=0)
        if finished:
            if job.state is not State.COMPLETED:
                self._deps_dirty = True
            del self.jobs[job.id]
            self.settling[job.id] = job
            self.finished_states[job.id] = job.state
            self.reasons.pop(job.id, None)
            waiters = self.waiters.pop(job.id, [])
            if waiters:
                self._after_commit.append(lambda: _wake(waiters))
        self.kick()

    # -- the journal --------------------------------------------------------------------------

    def insert(self, job: Job, spec: dict[str, Any]) -> asyncio.Future[None]:
        """Add a new job; the future completes once it is durable."""
        fut: asyncio.Future[None] = self.loop.create_future()
        self._inserts.append((job, spec, fut))
        self.jobs[job.id] = job
        self._order_dirty = True
        self._arm_flush()
        self.kick()
        return fut

    def save(self, job: Job, **cols: Any) -> None:
        """Queue a job's new state for the next commit (``cols``: ended_at, launched)."""
        old = self._dirty.get(job.id)
        self._dirty[job.id] = (job, {**old[1], **cols} if old else cols)
        self._arm_flush()

    def _arm_flush(self) -> None:
        if not self._flush_armed:
            self._flush_armed = True
            self.loop.call_soon(self.flush)

    def flush(self, force: bool = False) -> None:
        """Commit every queued change in one transaction, then act on it. With a writer the
        commit happens on its thread and this returns at once: the follow-ups run when it is
        durable, and what changes meanwhile waits for the next commit (one in flight)."""
        self._flush_armed = False
        if self._in_flight or (self._pass_soon and not force):
            return  # the commit in flight (or the pass about to run) takes it
        inserts, dirty, after = self._inserts, self._dirty, self._after_commit
        on_fail = self._on_fail
        if not (inserts or dirty or after):
            return
        self._inserts, self._dirty, self._after_commit, self._on_fail = [], {}, [], []
        saved = [job for job, _ in dirty.values()]
        if not (inserts or dirty):
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
        inserts: list[tuple[Job, dict[str, Any], asyncio.Future[None] | None]],
        saved: list[Job],
        after: list[Callable[[], None]],
        on_fail: list[Callable[[], None]],
        was_in_flight: bool = False,
    ) -> None:
        if was_in_flight:
            self._in_flight = False
        for job in saved:
            if self.settling.get(job.id) is job:
                del self.settling[job.id]
        if error is not None:
            log.error("cannot commit to the state database: %s", error)
            for job, _, fut in inserts:
                self.jobs.pop(job.id, None)
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
        self._after_commit.append(lambda: None if fut.done() else fut.set_result(None))
        self._on_fail.append(
            lambda: None if fut.done() else fut.set_exception(OSError("commit failed"))
        )
        self._arm_flush()
        return fut

    async def drain(self) -> None:
        """Wait until nothing is queued or being committed."""
        while self._in_flight or self._inserts or self._dirty or self._after_commit:
            fut = self.durable()
            self.flush(force=True)
            try:
                await fut
            except OSError:
                return

    # -- control ------------------------------------------------------------------------------

    def cancel(self, job: Job, sig: int | None) -> str:
        """Cancel a job (or send it a signal); returns what happened."""
        now = time.time()
        if job.state is State.PENDING:
            if sig is not None:
                return "pending: no process to signal"
            self._change(job, State.CANCELLED, now, reason="cancelled before it started")
            return "cancelled"
        run = self.runs.get(job.id)
        if run is None:
            if sig is None and job.id in self.committing:
                self.cancel_on_start.add(job.id)
                transition(job, State.COMPLETING, now=now, reason="cancel requested")
                self.save(job)
                return "terminating"
            return "starting"
        if sig is None:
            if job.state is State.RUNNING:
                transition(job, State.COMPLETING, now=now, reason="cancel requested")
                self.save(job)
            if run.slot is not None:
                self.pool.order(run.slot, job.id, run.attempt, "term")
            else:
                runfile.terminate(run.pidfd)
            return "terminating"
        if run.slot is not None:
            self.pool.order(run.slot, job.id, run.attempt, "signal", sig)
        else:
            runfile.send_signal(run.path, run.pidfd, sig)
        return f"sent signal {sig}"

    # -- restart ------------------------------------------------------------------------------

    def adopt(self, job_id: int, pid: int, path: str, attempt: int, lease: str | None) -> None:
        """Watch a supervisor left running by a previous daemon."""
        pidfd = os.pidfd_open(pid)
        if not runfile.supervisor_alive(path):  # it ended between reading and opening
            os.close(pidfd)
            raise ProcessLookupError(pid)
        self.runs[job_id] = Run(path, attempt, lease, None, pidfd)
        self.loop.add_reader(pidfd, self._on_adopted_exit, job_id)

    def requeue_unstarted(self, job: Job, now: float, why: str) -> None:
        self._change(job, State.PREEMPTED, now, reason=why)

    def _retire(self, path: str, leftovers: bool = True) -> None:
        """The attempt's end is durable: its run file becomes a spare (or goes)."""
        if leftovers:
            _unlink(path + ".sig", path + ".pty")
        if len(self.spares) < MAX_SPARES:
            self._spare_seq += 1
            name = f"{runfile.SPARE}{self._spare_tag}.{self._spare_seq}"
            spare = os.path.join(self.run_dir, name)
            try:
                os.rename(path, spare)
                self.spares.append(spare)
                return
            except FileNotFoundError:
                return
            except OSError:
                pass
        _unlink(path)


def _unlink(*paths: str) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for fut in waiters:
        if not fut.done():
            fut.set_result(None)
