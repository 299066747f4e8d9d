"""Recording how attempts end, controlling running ones, adopting those a previous daemon
left, and forgetting jobs that ended long ago (:meth:`Control.purge_finished`): the part of
the engine that hears from supervisors (through its process port,
:mod:`berth.daemon.ports`) and changes job states accordingly. :class:`Control` is a
part :class:`berth.daemon.engine.engine.Engine` holds, kept apart to keep each file one idea;
starting attempts is its other part (:mod:`berth.daemon.engine.starts`).

Every state change goes through :func:`berth.core.transition.transition` and is saved with
the current group commit (:mod:`berth.daemon.store.journal`); what acts on a change (reusing a run
file, waking a waiting client, a notification) runs after its commit. Times come from the
engine's clock.
"""

from __future__ import annotations

import logging

from berth.core.states import ACTIVE, FINISHED, State
from berth.core.transition import cancel_pending as cancel_all
from berth.core.transition import transition
from berth.daemon.engine import leftovers, notify
from berth.daemon.engine.exhausted import ALONE_WAIT, is_exhausted, own_limit
from berth.daemon.ports import SUPERVISOR_DIED
from berth.daemon.store import summaries
from berth.daemon.store.store import Store
from berth.daemon.supervisor import runfile
from berth.wire import cjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.claims.claim import Claim
    from berth.core.deps import Finished
    from berth.core.job import Job
    from berth.daemon.engine.accounts import Accounts
    from berth.daemon.engine.diskfull import DiskFull
    from berth.daemon.engine.jobtable import JobTable
    from berth.daemon.engine.queue_order import QueueOrder
    from berth.daemon.engine.resources import Resources
    from berth.daemon.engine.starts import Save
    from berth.daemon.options import Options
    from berth.daemon.ports import Clock, LiveAttempt, Processes
    from berth.daemon.store.journal import Journal

PURGE_BATCH = 20_000  # jobs summarized and purged at most per call (~1 s; the rest: soon after)
PURGE_SOON = 10.0  # seconds to the next batch while a backlog is purged
# pending jobs cancelled at once (Control.cancel_pending): (ended_at, the event's JSON, the
# ids as a JSON list); one statement, each row changed in SQLite
CANCEL_SQL = (
    "UPDATE jobs SET state = 'CANCELLED', ended_at = ?1, "
    "data = json_set(data, '$.state', 'CANCELLED', '$.history[#]', json(?2)) "
    "WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'PENDING'"
)
ESTIMATED_SQL = "UPDATE jobs SET data = json_set(data, '$.extra.estimated', json(?)) WHERE id = ?"

# A supervisor that died before its attempt's start gate ran nothing: requeued, this often.
UNSTARTED_AGAIN = 3
DIED_UNSTARTED = f"{SUPERVISOR_DIED} before it started it; requeued"

log = logging.getLogger("berth.daemon")


class Control:
    """Hear how attempts end, control, adopt and forget them: a part the engine holds
    (``engine.control``), given the engine's books it reads and changes (shared, not copied)
    and what it calls of the rest: ``kick`` (a pass at the next turn), ``save`` (a job's new
    state for the next commit), ``deps_changed`` (a job some job depends on has ended),
    ``last_id`` (the newest job id given), and of :class:`~berth.daemon.engine.starts.Launcher`
    ``unstart`` and ``launch_failed``."""

    def __init__(
        self, opts: Options, store: Store, res: Resources, clock: Clock, procs: Processes,
        journal: Journal, jobs: JobTable, runs: dict[int, LiveAttempt],
        committing: dict[int, Claim],
        cancel_on_start: set[int], reasons: dict[int, str], order: QueueOrder,
        diskfull: DiskFull, accounts: Accounts, settling: dict[int, Job],
        finished_states: Finished, waiters: dict[int, list[asyncio.Future[None]]],
        depended: set[int], purging: set[int], *, kick: Callable[[], None], save: Save,
        deps_changed: Callable[[], None], last_id: Callable[[], int],
        unstart: Callable[..., None], launch_failed: Callable[[Job, str], None],
        learn: Callable[[Job], None],
    ) -> None:  # fmt: skip
        self.opts, self.store, self.res, self.clock, self.procs = opts, store, res, clock, procs
        self.journal, self.jobs, self.runs, self.committing = journal, jobs, runs, committing
        self.cancel_on_start, self.reasons, self.order = cancel_on_start, reasons, order
        self.diskfull, self.accounts, self.settling = diskfull, accounts, settling
        self.finished_states, self.waiters = finished_states, waiters
        self.depended, self.purging = depended, purging
        self.kick, self.save, self.deps_changed, self.last_id = kick, save, deps_changed, last_id
        self._unstart, self._launch_failed = unstart, launch_failed
        self.learn = learn  # a job's run time, for the start estimates (estimates.py)
        self.ending: set[int] = set()  # jobs whose dead supervisor's leftovers are being ended

    def changed(self, job: Job, dependencies: bool = False) -> None:
        """A pending job was changed in place (`berth update`): its place in line is worked
        out again, and with ``dependencies``, every dependency is checked again (one may
        never be met). The caller saves the job and kicks a pass."""
        self.order.joined()  # (its priority or limit may have moved it: re-sorted)
        if dependencies:
            self.depended.update(d.job_id for d in job.dependencies)
            self.deps_changed()

    # -- endings ------------------------------------------------------------------------------

    def _on_done(self, job_id: int, attempt: int, result: dict[str, Any]) -> None:
        """A supervisor of our pool says how an attempt ended (its run file says the same)."""
        run = self.runs.get(job_id)
        if run is None or run.attempt != attempt:
            return
        del self.runs[job_id]
        job = self.jobs[job_id]
        claim = self.committing.pop(job_id, None)  # (it ended before we heard of its commit)
        if claim is not None:
            claim.detach()
        if result.get("nospace"):  # it could not write its start (run file, logs): it waits
            self.procs.discard(run.path)
            self.res.ledger.withdraw(job.extra.get("lease"))
            where = str(result.get("nospace_path") or "")  # (its own -o/-e: only it waits)
            mine = not where or where.startswith(self.opts.state_dir.rstrip("/") + "/")
            if own_limit(result.get("exhausted")):  # (its supervisor's own: it alone waits)
                self._unstart(job, str(result["nospace"]), elsewhere=True, wait=ALONE_WAIT)
            else:
                self._unstart(job, str(result["nospace"]), elsewhere=not mine)
            return
        if result.get("unstarted"):  # its gate closed unopened (not by us: we forgot it then)
            self.procs.discard(run.path)
            self._launch_failed(job, str(result.get("error") or "it was not started"))
            return
        self.diskfull.started()  # (it ran: its start was written in full)
        self.record_exit(job, result, run.path, leftovers=False)

    def _on_gone(self, job_id: int, attempt: int, why: str, started: bool) -> None:
        """The supervisor running an attempt died, or never came to be."""
        run = self.runs.get(job_id)
        if run is None or run.attempt != attempt:
            return
        del self.runs[job_id]
        job = self.jobs[job_id]
        info = self.procs.record(run.path)
        began = runfile.began(info)
        claim = self.committing.pop(job_id, None)  # its start is not durable yet
        if claim is not None:
            if began:
                claim.detach()  # (its claim files find what the job left: see lose)
            else:
                claim.release()
        if "exit" in info:
            self.record_exit(job, info["exit"], run.path)
        elif not started or not began:
            # It never reached a supervisor, or never passed its gate: nothing ran.
            self.procs.discard(run.path)
            if is_exhausted(why):  # (no supervisor could be forked: it waits)
                self.res.ledger.withdraw(job.extra.get("lease"))
                self._unstart(job, why)
            elif started and why == SUPERVISOR_DIED and sum(
                a.reason == DIED_UNSTARTED for a in job.attempts
            ) < UNSTARTED_AGAIN:  # (killed at its gate, or the fork server with it: again)
                self.res.ledger.withdraw(job.extra.get("lease"))
                self.requeue_unstarted(job, self.clock.time(), DIED_UNSTARTED)
            else:
                self._launch_failed(job, why)
        else:
            log.error("job %d: %s while running attempt %d", job_id, why, attempt)
            self.lose(job, run.path, why)

    def lose(self, job: Job, path: str, why: str) -> None:
        """Record LOST the attempt whose supervisor died without a record (``why``), once what
        it left running has ended (:mod:`.leftovers`: its GPUs are its own until then)."""

        def record(lost: str) -> None:
            if self.jobs.get(job.id) is job and job.state in ACTIVE:
                self.record_exit(job, None, path, lost=lost)

        leftovers.lose(self.procs, job, path, why, self.opts.kill_after, record, self.ending)

    def _on_adopted_exit(self, job_id: int) -> None:
        run = self.runs.pop(job_id)
        info = self.procs.record(run.path)
        if "exit" not in info and not runfile.began(info):
            # It waited at the gate of a start that never became durable (or was never
            # opened): nothing ran.
            self.procs.discard(run.path)
            self.requeue_unstarted(self.jobs[job_id], self.clock.time(), runfile.NEVER_STARTED)
            return
        if "exit" in info:
            return self.record_exit(self.jobs[job_id], info["exit"], run.path)
        self.lose(self.jobs[job_id], run.path, SUPERVISOR_DIED)  # (killed: what it ran lives on)

    def record_exit(
        self,
        job: Job,
        result: dict[str, Any] | None,
        path: str,
        leftovers: bool = True,
        lost: str = "its supervisor died without a record",
    ) -> None:
        """Record how an attempt ended (``result`` from its run file; None = unknown, and
        ``lost`` says why). ``leftovers``: it may have left a ``.sig`` or ``.pty`` file.
        The attempt's claim files go now, whoever still holds them (issue 20.6)."""
        self.res.ledger.withdraw(job.extra.get("lease"))
        requeue = job.unnote("requeue")  # (ended by :meth:`requeue`)
        end = self.clock.time()
        if result is None:
            self._change(job, State.LOST, end, reason=lost)
        else:
            end = float(result.get("end") or end)
            rc = result.get("rc")
            if result.get("error"):
                self._change(job, State.FAILED, end, reason=result["error"], exit_code=rc)
            elif result.get("timeout"):
                self._change(job, State.TIMEOUT, end, reason="time limit", exit_code=rc)
            elif result.get("cancelled") and requeue:
                self._change(job, State.PREEMPTED, end, reason=str(requeue), exit_code=rc)
            elif result.get("cancelled"):
                self._change(job, State.CANCELLED, end, reason="cancelled", exit_code=rc)
            elif rc == 0:
                self._change(job, State.COMPLETED, end, exit_code=0)
            else:
                sig = result.get("signal")
                why = f"killed by signal {sig}" if sig else f"exit code {rc}"
                self._change(job, State.FAILED, end, reason=why, exit_code=rc)
        self.journal.after_commit(lambda: self.procs.retire(path, leftovers))

    def _change(
        self,
        job: Job,
        to: State,
        now: float,
        *,
        reason: str = "",
        exit_code: int | None = None,
    ) -> None:
        """Transition + save (committed with this turn's group) + wake waiters + schedule. An
        attempt that ends adds what it used to its tenant's fair-share usage, in the same
        commit as its end."""
        was_pending = job.state is State.PENDING
        holding = job.state in ACTIVE
        transition(job, to, now=now, reason=reason, exit_code=exit_code)
        if job.state is State.PENDING:
            self.order.joined(job)  # requeued or retried
        elif was_pending:
            self.order.left(job)
        finished = job.state in FINISHED
        self.save(job, ended_at=now if finished else None, launched=0)
        if holding:
            rows = self.accounts.ended(job, max(now, self.clock.time()))
            if rows:
                self.journal.execute(Store.USAGE_SQL, rows)
        if finished:
            self._ended(job)
        self.kick()

    def _ended(self, job: Job) -> None:
        """What follows a job's end, in memory (its new state is saved by the caller)."""
        if job.id in self.depended:  # (afterok, afternotok: it may doom another)
            self.deps_changed()  # (only if a job waits on it: else no full pass)
            self.depended.discard(job.id)
        del self.jobs[job.id]
        self.settling[job.id] = job
        self.finished_states[job.id] = job.state
        if job.state is State.FAILED and job.extra.get("retry_oom") and not (
            {"retry_of", "oom_retried"} & job.extra.keys()
        ):  # --retry-oom may queue it again: its dependents wait (admission/oom_retry.py)
            self.finished_states.retried[job.id] = None
        self.learn(job)  # (its run time, for the start estimates)
        self.reasons.pop(job.id, None)
        waiters = self.waiters.pop(job.id, None)
        if waiters:
            self.journal.after_commit(lambda: _wake(waiters))
        if job.extra.get("notify"):  # --notify / --mail-user, once the end is durable
            self.journal.after_commit(lambda: notify.send(self.store, self.procs, job))

    # -- control ------------------------------------------------------------------------------

    def requeue(self, job: Job, why: str) -> str:
        """End a running job's attempt as a cancel does and put the job back at the end of
        the queue (PREEMPTED, then PENDING, as a time limit does with --requeue), the
        attempt's reason ``why``; returns what happened."""
        run = self.runs.get(job.id)
        if job.state is not State.RUNNING or run is None or job.id in self.committing:
            return f"not requeued: {job.state.value.lower()}"
        job.note("requeue", why)
        transition(job, State.COMPLETING, now=self.clock.time(), reason=f"requeue: {why}")
        self.save(job)
        self.procs.order(run, job.id, "term")
        return "requeuing"

    def cancel_pending(self, jobs: list[Job]) -> None:
        """Cancel these pending jobs at once (`cancel --all-mine`, an array): each changes
        as :meth:`cancel` changes it, but the queue drops them in one go and the store takes
        them in one statement (:data:`CANCEL_SQL`: their state and the event, not a row
        each), with the first estimates the engine stamped in memory (a few hundred at most);
        the journal tells that commit's observers they were saved."""
        if not jobs:
            return
        now = self.clock.time()
        event = cancel_all(jobs, now=now, reason="cancelled before it started")
        assert event is not None
        self.order.left_all(jobs)
        bulk = []
        for job in jobs:
            self._ended(job)
            if self.journal.queued(job.id):  # (its row is written from memory: as it is now)
                self.save(job, ended_at=now, launched=0)
            else:
                bulk.append(job)
        ids = cjson.dumps([j.id for j in bulk])
        self.journal.execute(CANCEL_SQL, [(now, cjson.dumps(event.to_dict()), ids)], bulk)
        stamped = [
            (cjson.dumps(j.extra["estimated"]), j.id) for j in bulk if "estimated" in j.extra
        ]
        if stamped:
            self.journal.execute(ESTIMATED_SQL, stamped)
        self.kick()

    def cancel(self, job: Job, sig: int | None) -> str:
        """Cancel a job (or send it a signal); returns what happened."""
        now = self.clock.time()
        if sig is None:
            job.unnote("requeue")  # (a cancel during a requeue: cancelled)
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
            return leftovers.ENDING if job.id in self.ending else "starting"
        if sig is None:
            if job.state is State.RUNNING:
                transition(job, State.COMPLETING, now=now, reason="cancel requested")
                self.save(job)
            self.procs.order(run, job.id, "term")
            return "terminating"
        self.procs.order(run, job.id, "signal", sig)
        return f"sent signal {sig}"

    # -- restart ------------------------------------------------------------------------------

    def adopt(self, job_id: int, pid: int, path: str, attempt: int, lease_id: str | None) -> None:
        """Watch a supervisor left running by a previous daemon (ProcessLookupError if it
        has gone)."""
        self.runs[job_id] = self.procs.adopt(job_id, attempt, pid, path, lease_id)

    def requeue_unstarted(self, job: Job, now: float, why: str) -> None:
        """Its attempt never ran: queued again, unless a cancel of it was recorded."""
        if job.state is State.COMPLETING and not job.unnote("requeue"):
            self._change(job, State.CANCELLED, now, reason="cancelled before it started")
        else:
            self._change(job, State.PREEMPTED, now, reason=why)

    def purge_finished(self) -> int:
        """Forget jobs that ended more than ``--keep-finished`` ago (their logs stay, and
        their ids are never given again), summarized first in the same commit (``summaries``:
        `berth report` reaches back :data:`summaries.KEEP_DAYS` days); summaries older than
        that go. At most :data:`PURGE_BATCH` jobs a call (summarizing reads each record, on
        the loop); committed with the next group; returns how many jobs."""
        keep = self.opts.keep_finished
        now = self.clock.time()
        self.journal.execute(summaries.PRUNE_SQL, [(now - summaries.KEEP_DAYS * 86400.0,)])
        if not keep or keep == float("inf"):
            return 0
        purging = self.purging
        ids = [
            i
            for i in self.store.ended_before(now - keep)
            if i not in self.settling and i not in purging
        ][:PURGE_BATCH]
        if not ids:
            return 0
        purging.update(ids)
        models = {s.index: s.name for s in self.res.snapshots}
        self.journal.execute(summaries.ADD_SQL, summaries.summarize(self.store, ids, models))
        self.journal.execute(Store.LAST_ID_SQL, [(str(self.last_id()),)])
        self.journal.execute(Store.PURGE_SQL, [(i,) for i in ids])

        def forget() -> None:
            for i in ids:
                self.finished_states.pop(i, None)
                self.finished_states.retried.pop(i, None)
            purging.difference_update(ids)

        self.journal.after_commit(forget)
        log.info("purged %d job record(s) that ended over %gs ago", len(ids), keep)
        return len(ids)


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for fut in waiters:
        if not fut.done():
            fut.set_result(None)
