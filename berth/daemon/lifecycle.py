"""Launching attempts and recording how they end: the half of the engine that talks to
supervisors (through :mod:`berth.daemon.pool`, or to adopted ones through their run file and
pidfd) and changes job states accordingly. :class:`Lifecycle` is a part of
:class:`berth.daemon.engine.Engine`, kept apart to keep each file one idea.

Every state change goes through :func:`berth.core.transition.transition` and is saved with
the current group commit (:mod:`berth.daemon.journal`); what acts on a change (handing an
attempt to a supervisor, reusing a run file, waking a waiting client) runs after its commit.
"""

from __future__ import annotations

import logging
import os
import time

from berth.core.states import FINISHED, State
from berth.core.transition import transition
from berth.daemon import gate, runfile
from berth.daemon.launcher import launch_spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any

    from berth.claims.ledger import Lease
    from berth.core.job import Job
    from berth.daemon.journal import Journal
    from berth.daemon.options import Options
    from berth.daemon.pool import Pool, Slot
    from berth.daemon.resources import Resources
    from berth.daemon.store import Store

log = logging.getLogger("berth.daemon")

MAX_SPARES = 256  # used run files kept for reuse


class Run:
    """Runtime handles of one running attempt (never persisted): the supervisor that runs
    it, either from our pool (``slot``) or adopted from a previous daemon (``pidfd``)."""

    __slots__ = ("attempt", "job_pid", "lease", "path", "pidfd", "slot", "sup_pid")

    def __init__(
        self,
        path: str,
        attempt: int,
        lease: str | None,
        slot: Slot | None,
        pidfd: int = -1,
        sup_pid: int | None = None,
    ) -> None:
        self.path = path
        self.attempt = attempt
        self.lease = lease
        self.slot = slot
        self.pidfd = pidfd
        self.job_pid: int | None = None  # (both from the run file, once written)
        self.sup_pid = sup_pid


class Launch:
    """One attempt being started, from the pass that decided it until its start is durable
    (or withdrawn). ``wait``/``gate``: the read and write ends of its start gate (-1 once
    closed); ``durable``: None until its commit is done, then whether it succeeded."""

    __slots__ = ("durable", "error", "failed", "gate", "job", "lease", "run", "start", "wait")

    def __init__(self, job: Job, start: Any, lease: Lease) -> None:
        self.job = job
        self.start = start
        self.lease = lease
        self.wait = self.gate = -1
        self.error = ""
        self.run: Run | None = None  # once handed over
        self.durable: bool | None = None
        self.failed = False  # settled as failed already

    def close_wait(self) -> None:
        if self.wait >= 0:
            os.close(self.wait)
            self.wait = -1

    def close_gate(self) -> None:
        if self.gate >= 0:
            os.close(self.gate)
            self.gate = -1


class Lifecycle:
    """Launch, end, control and adopt attempts (state lives in the engine)."""

    opts: Options
    store: Store
    res: Resources
    loop: asyncio.AbstractEventLoop
    run_dir: str
    spares: list[str]
    _spare_seq: int
    _spare_tag: str
    jobs: dict[int, Job]
    runs: dict[int, Run]
    reasons: dict[int, str]
    finished_states: dict[int, State]
    waiters: dict[int, list[asyncio.Future[None]]]
    journal: Journal
    pool: Pool
    committing: dict[int, Lease]
    settling: dict[int, Job]
    cancel_on_start: set[int]
    _order_dirty: bool
    _left_order: int
    _deps_dirty: bool

    if TYPE_CHECKING:

        def kick(self) -> None: ...

        def save(self, job: Job, **cols: Any) -> None: ...

        def flush(self, force: bool = False) -> None: ...

    # -- launching ----------------------------------------------------------------------------

    def _launch(self, launches: list[tuple[Job, Any]], now: float) -> None:
        """Start what a pass decided. Write-ahead: each job is saved RUNNING (with its attempt
        launched) and its command runs only once that is durable; meanwhile the attempt goes
        to a supervisor, which prepares it and waits at its gate (:mod:`berth.daemon.gate`),
        opened by the commit. A failed commit withdraws them instead."""
        out: list[Launch] = []
        for job, (start, lease) in launches:
            transition(
                job, State.RUNNING, now=now, gpus=tuple(start.gpus), share=start.share,
                mem=start.mem,
            )  # fmt: skip
            job.extra["lease"] = lease.lease_id
            self._left_order += 1
            self.save(job, launched=len(job.attempts))
            self.committing[job.id] = lease
            ln = Launch(job, start, lease)
            try:
                ln.wait, ln.gate = gate.make()
                self.journal.open_on_commit(ln.gate)
            except OSError as e:
                ln.error = str(e)  # (out of descriptors: it fails at its hand-over)
            out.append(ln)
        self.journal.after_commit(
            lambda: self._started(out), otherwise=lambda: self._withdrawn(out)
        )
        self.flush(force=True)  # the commit leaves for the writer's thread...
        self._hand_over(out)  # ...while the attempts go to their supervisors

    def _hand_over(self, launches: list[Launch]) -> None:
        """Hand each attempt to a supervisor of its owner, to wait at its gate."""
        for ln in launches:
            if ln.durable is False:
                continue  # withdrawn already (a commit on the loop's thread failed)
            job, lease = ln.job, ln.lease
            attempt = len(job.attempts)
            path = runfile.run_file(self.run_dir, job.id, attempt)
            run_fd = -1
            try:
                if ln.wait < 0:
                    raise OSError(ln.error)
                unsaved = self.journal.unsaved.get(job.id)  # submitted in this very commit
                if unsaved is not None:
                    from berth.wire.jobspec import JobSpec

                    spec = JobSpec.from_dict(unsaved, stored=True)
                else:
                    spec = self.store.spec(job.id)
                gpus = [(i, self.res.by_index[i].uuid) for i in ln.start.gpus]
                owner = (job.uid, job.gid, job.user)
                ls = launch_spec(
                    spec, job.id, gpus, self._limit(job), self.opts.kill_after, attempt
                )
                run_fd = runfile.open_run_file(path, self.spares.pop() if self.spares else None)
                msg = {"job": job.id, "attempt": attempt, "path": path, "spec": ls, "gate": 1}
                slot = self.pool.run(owner, msg, [run_fd, ln.wait, *lease.fds])
            except OSError as e:
                ln.close_gate()  # its supervisor (if any) reads the gate's end: never runs it
                ln.failed = True
                self._uncommit(ln)
                lease.release()
                if run_fd >= 0:
                    _unlink(path)
                if self.jobs.get(job.id) is job:
                    self._launch_failed(job, str(e))
                continue
            finally:
                if run_fd >= 0:
                    os.close(run_fd)  # the supervisor holds its lock now
                ln.close_wait()  # (the supervisor has its copy)
            ln.run = Run(path, attempt, lease.lease_id, slot)
            self.runs[job.id] = ln.run
            if ln.durable:
                self._go(ln)

    def _started(self, launches: list[Launch]) -> None:
        """Their starts are durable (the committer has opened their gates)."""
        for ln in launches:
            ln.durable = True
            ln.close_gate()
            if ln.run is not None:
                self._go(ln)
            # (else: its hand-over is still to come (a commit on the loop's thread), or failed)

    def _go(self, ln: Launch) -> None:
        """Started durably and handed over: the supervisor and the job hold the claims now."""
        job = ln.job
        if self._uncommit(ln):
            ln.lease.detach()
        cancel = job.id in self.cancel_on_start
        self.cancel_on_start.discard(job.id)
        run = self.runs.get(job.id)
        if run is None or run is not ln.run:
            return  # it has ended already (or its supervisor died): that was settled
        if cancel and run.slot is not None:
            self.pool.order(run.slot, job.id, run.attempt, "term")

    def _uncommit(self, ln: Launch) -> bool:
        """Its start no longer awaits its commit; False if that was settled already."""
        if self.committing.get(ln.job.id) is not ln.lease:
            return False
        del self.committing[ln.job.id]
        return True

    def _withdrawn(self, launches: list[Launch]) -> None:
        """The commit of their starts failed: their gates close unopened (nothing runs), the
        claims go, and the jobs fail."""
        for ln in launches:
            ln.durable = False
            ln.close_gate()
            ln.close_wait()
            job = ln.job
            if self._uncommit(ln):
                ln.lease.release()
            if ln.run is not None and self.runs.get(job.id) is ln.run:
                del self.runs[job.id]
                _unlink(ln.run.path)
            if not ln.failed and self.jobs.get(job.id) is job:  # (a failed insert: gone)
                ln.failed = True
                self._launch_failed(job, "the state database could not record its start")

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
        job = self.jobs[job_id]
        lease = self.committing.pop(job_id, None)  # (it ended before we heard of its commit)
        if lease is not None:
            lease.detach()
        if result.get("unstarted"):  # its gate closed unopened (not by us: we forgot it then)
            _unlink(run.path)
            self._launch_failed(job, str(result.get("error") or "it was not started"))
            return
        self.record_exit(job, result, run.path, leftovers=False)

    def _on_gone(self, job_id: int, attempt: int, why: str, started: bool) -> None:
        """The supervisor running an attempt died, or never came to be."""
        run = self.runs.get(job_id)
        if run is None or run.attempt != attempt:
            return
        del self.runs[job_id]
        job = self.jobs[job_id]
        info = runfile.read_run_file(run.path)
        began = runfile.began(info)
        lease = self.committing.pop(job_id, None)  # its start is not durable yet
        if lease is not None:
            if began:
                lease.detach()  # (its claim files find what the job left: see end_leftovers)
            else:
                lease.release()
        if "exit" in info:
            self.record_exit(job, info["exit"], run.path)
        elif not started or not began:
            # It never reached a supervisor, or never passed its gate: nothing ran.
            _unlink(run.path)
            self._launch_failed(job, why)
        else:
            log.error("job %d: %s while running attempt %d", job_id, why, attempt)
            self.record_exit(job, None, run.path, lost=self.end_leftovers(job, run.path, why))

    def end_leftovers(self, job: Job, path: str, why: str) -> str:
        """End what the attempt whose supervisor died left running (:mod:`reap`); the reason
        to record."""
        from berth.daemon import reap

        info = runfile.read_run_file(path)
        claims = reap.claim_paths(self.res.ledger.path, job.extra.get("lease"))
        job_pid = info.get("job")
        pids = reap.leftovers(job_pid if isinstance(job_pid, int) else None, job.uid, claims)
        n = reap.end(pids, self.opts.kill_after, self.loop)
        if n:
            log.warning("job %d: ended %d process(es) its supervisor left: %s", job.id, n, pids)
            return f"{why} without a record; its {n} process(es) were ended"
        return f"{why} without a record"

    def _on_adopted_exit(self, job_id: int) -> None:
        run = self.runs.pop(job_id)
        self.loop.remove_reader(run.pidfd)
        os.close(run.pidfd)
        info = runfile.read_run_file(run.path)
        if "exit" not in info and not runfile.began(info):
            # It waited at the gate of a start that never became durable (or was never
            # opened): nothing ran.
            _unlink(run.path)
            self.requeue_unstarted(self.jobs[job_id], time.time(), runfile.NEVER_STARTED)
            return
        self.record_exit(self.jobs[job_id], info.get("exit"), run.path)

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
        self.journal.after_commit(lambda: self._retire(path, leftovers))

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
                self.journal.after_commit(lambda: _wake(waiters))
            if job.extra.get("notify"):  # --notify / --mail-user, once the end is durable
                from berth.daemon import notify

                self.journal.after_commit(lambda: notify.send(self.store, self.pool, job))
        self.kick()

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
        if run is None or job.id in self.committing:  # (its start is not durable yet)
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
        self.runs[job_id] = Run(path, attempt, lease, None, pidfd, sup_pid=pid)
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
