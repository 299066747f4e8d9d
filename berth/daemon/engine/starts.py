"""Starting what a scheduling pass decided: the write-ahead of each start, and its hand-over
to a supervisor while that is being committed. :class:`Launcher` is a part the engine
(:class:`berth.daemon.engine.engine.Engine`) holds, as it holds :class:`~berth.daemon.engine.control.Control`,
kept apart to keep each file one idea.

A start is saved (the job RUNNING, its attempt ``launched``) and its command runs only once
that is committed: the attempt goes to a supervisor at once, through the engine's process port
(:mod:`berth.daemon.ports`), and waits at its start gate (:mod:`berth.daemon.supervisor.gate`), which the
journal's committer opens the moment the commit is in the database's log (its sync to disk
follows: :mod:`berth.daemon.store.writer`). A commit that fails withdraws
the starts (their gates close unopened: nothing runs), and the jobs wait, PENDING again as if
never started (:meth:`Launcher._unstart`; :mod:`berth.daemon.engine.diskfull` says why and
when they are tried again): a full state disk fails no job (issue 41.7).

What a supervisor runs, made from the stored spec at the hand-over (:func:`launch_spec`: the
attempt's argv, environment, CUDA_VISIBLE_DEVICES among it, and logs): below.
"""

from __future__ import annotations

import logging

from berth.core.states import ACTIVE, State
from berth.core.transition import transition, unstart
from berth.daemon.engine.diskfull import is_full
from berth.daemon.engine.exhausted import is_exhausted
from berth.daemon.supervisor import runfile
from berth.devices.visible import cuda_env
from berth.wire import inject
from berth.wire.env import CONDA_HOOK, CONDA_SETUP, SETUP_SCRIPT
from berth.wire.jobspec import JobSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    from berth.claims.claim import Claim
    from berth.core.job import Job
    from berth.daemon.engine.diskfull import DiskFull
    from berth.daemon.engine.jobtable import JobTable
    from berth.daemon.engine.queue_order import QueueOrder
    from berth.daemon.engine.resources import Resources
    from berth.daemon.options import Options
    from berth.daemon.ports import Clock, LiveAttempt, Processes
    from berth.daemon.store.journal import Journal
    from berth.daemon.store.store import Store

    class Save(Protocol):
        def __call__(self, job: Job, **cols: Any) -> None: ...

    class Change(Protocol):
        def __call__(
            self, job: Job, to: State, now: float, *, reason: str = "",
            exit_code: int | None = None,
        ) -> None: ...  # fmt: skip


log = logging.getLogger("berth.daemon")

ELSEWHERE_WAIT = 60.0  # seconds a job waits whose own log's disk (not the state's) is full


class AttemptStart:
    """One attempt's start, from the pass that decided it until its start is durable (or
    withdrawn): the bookkeeping of that one transaction (the attempt itself is the job's
    :class:`~berth.core.job.Attempt`; its handles once handed over, ``run``, a
    :class:`~berth.daemon.ports.LiveAttempt`). ``wait``/``gate``: the read and write ends of
    its start gate (-1 once closed); ``durable``: None until its commit is done, then whether it succeeded."""

    __slots__ = ("claim", "durable", "error", "failed", "gate", "job", "run", "start", "wait")

    def __init__(self, job: Job, start: Any, claim: Claim) -> None:
        self.job = job
        self.start = start
        self.claim = claim
        self.wait = self.gate = -1
        self.error = ""
        self.run: LiveAttempt | None = None  # once handed over
        self.durable: bool | None = None
        self.failed = False  # settled as failed already


class Launcher:
    """Launch attempts: a part the engine holds (``engine.launcher``), given the engine's
    books it reads and changes (shared, not copied) and what it calls of the rest:
    ``kick`` (a pass at the next turn), ``save`` (a job's new state for the next commit),
    ``change`` (a state change: :meth:`berth.daemon.engine.control.Control._change`)."""

    def __init__(
        self, opts: Options, store: Store, res: Resources, clock: Clock, procs: Processes,
        journal: Journal, jobs: JobTable, runs: dict[int, LiveAttempt],
        committing: dict[int, Claim],
        cancel_on_start: set[int], reasons: dict[int, str], order: QueueOrder,
        diskfull: DiskFull, *, kick: Callable[[], None], save: Save, change: Change,
    ) -> None:  # fmt: skip
        self.opts, self.store, self.res, self.clock, self.procs = opts, store, res, clock, procs
        self.journal, self.jobs, self.runs, self.committing = journal, jobs, runs, committing
        self.cancel_on_start, self.reasons, self.order = cancel_on_start, reasons, order
        self.diskfull = diskfull
        self.kick, self.save, self._change = kick, save, change

    def flush(self, force: bool = False) -> None:
        self.journal.flush(force)

    def _launch(self, launches: list[tuple[Job, Any]], now: float) -> None:
        """Start what a pass decided (see the module): ``launches`` are (job, (its start, its
        claim))."""
        out: list[AttemptStart] = []
        for job, (start, claim) in launches:
            transition(
                job, State.RUNNING, now=now, gpus=tuple(start.gpus), share=start.share,
                mem=start.mem,
            )  # fmt: skip
            job.note("lease", claim.lease_id)
            self.order.left(job)
            self.save(job, launched=len(job.attempts))
            self.committing[job.id] = claim
            ln = AttemptStart(job, start, claim)
            try:
                ln.wait, ln.gate = self.procs.gate()
                self.journal.open_on_commit(ln.gate)
            except OSError as e:
                ln.error = str(e)  # (out of descriptors: it fails at its hand-over)
            out.append(ln)
        self.journal.after_commit(
            lambda: self._started(out), otherwise=lambda: self._withdrawn(out)
        )
        self.flush(force=True)  # the commit leaves for the writer's thread...
        self._hand_over(out)  # ...while the attempts go to their supervisors

    def _hand_over(self, launches: list[AttemptStart]) -> None:
        """Hand each attempt to a supervisor of its owner, to wait at its gate."""
        for ln in launches:
            if ln.durable is False:
                continue  # withdrawn already (a commit on the loop's thread failed)
            job, claim = ln.job, ln.claim
            attempt = len(job.attempts)
            try:
                if ln.wait < 0:
                    raise OSError(ln.error)
                spec = self._spec(job.id)
                gpus = [(i, self.res.by_index[i].uuid) for i in ln.start.gpus]
                owner = (job.uid, job.gid, job.user)
                ls = launch_spec(
                    spec, job.id, gpus, self._limit(job), self.opts.kill_after, attempt,
                    private=self.opts.private,
                )
                run = self.procs.start(
                    owner, job.id, attempt, ls, [ln.wait, *claim.fds], claim.lease_id,
                    list(ln.start.gpus),
                )  # fmt: skip
            except OSError as e:
                # (No supervisor has its gate. The write end stays open until the commit is
                # done: the journal holds its number until then.)
                ln.failed = True
                self._uncommit(ln)
                claim.release()
                if self.jobs.get(job.id) is job and is_full(e):  # (its run file: it waits)
                    self._unstart(job, f"cannot make its run file: {e}")
                elif self.jobs.get(job.id) is job and is_exhausted(e):  # (a limit met: waits)
                    self._unstart(job, f"cannot start it: {e}")
                elif self.jobs.get(job.id) is job:
                    self._launch_failed(job, str(e))
                continue
            finally:
                self._close(ln, gate=False)  # (the supervisor has its copy)
            ln.run = run
            self.runs[job.id] = run
            if ln.durable:
                self._go(ln)

    def _spec(self, job_id: int) -> JobSpec:
        """The job's spec as stored (store.UnreadableSpec, an OSError, if it no longer reads:
        its launch fails with that reason, the daemon goes on)."""
        lately = self.journal.spec(job_id)  # submitted lately (or in this very commit)
        return lately if lately is not None else self.store.spec(job_id)

    def _started(self, launches: list[AttemptStart]) -> None:
        """Their starts are durable (the committer has opened their gates)."""
        if self.diskfull.full and any(not ln.failed for ln in launches):
            self.diskfull.committed(lambda: self._went(launches))
        for ln in launches:
            ln.durable = True
            self._close(ln, wait=False)
            if ln.run is not None:
                self._go(ln)
            # (else: its hand-over is still to come (a commit on the loop's thread), or failed)

    def _went(self, launches: list[AttemptStart]) -> bool | None:
        """Whether one of these committed starts passed its gate (its run file says ``go``):
        the disk had room for it; None: none is left to ask."""
        runs = [ln.run for ln in launches if not ln.failed and ln.run is not None]
        if not runs:
            return None
        return any(runfile.began(self.procs.record(run.path)) for run in runs)

    def _go(self, ln: AttemptStart) -> None:
        """Started durably and handed over: the supervisor and the job hold the claims now."""
        job = ln.job
        if self._uncommit(ln):
            ln.claim.detach()
        cancel = job.id in self.cancel_on_start
        self.cancel_on_start.discard(job.id)
        run = self.runs.get(job.id)
        if run is None or run is not ln.run:
            return  # it has ended already (or its supervisor died): that was settled
        if cancel:
            self.procs.order(run, job.id, "term")

    def _uncommit(self, ln: AttemptStart) -> bool:
        """Its start no longer awaits its commit; False if that was settled already."""
        if self.committing.get(ln.job.id) is not ln.claim:
            return False
        del self.committing[ln.job.id]
        return True

    def _withdrawn(self, launches: list[AttemptStart]) -> None:
        """The commit of their starts failed: their gates close unopened (nothing runs), the
        claims go, and the jobs wait again (:meth:`_unstart`)."""
        where = f"{self.opts.state_dir}/berth.db"
        why = f"its start could not be recorded in {where} ({self.journal.failing})"
        for ln in launches:
            ln.durable = False
            self._close(ln)
            job = ln.job
            if self._uncommit(ln):
                ln.claim.release()
            if ln.run is not None and self.runs.get(job.id) is ln.run:
                del self.runs[job.id]
                self.procs.discard(ln.run.path)
            if not ln.failed and self.jobs.get(job.id) is job:  # (a failed insert: gone)
                ln.failed = True
                self._unstart(job, why)

    def _close(self, ln: AttemptStart, *, wait: bool = True, gate: bool = True) -> None:
        """Close our ends of its gate: the read end (``wait``), the write end (``gate``)."""
        if wait and ln.wait >= 0:
            self.procs.close(ln.wait)
            ln.wait = -1
        if gate and ln.gate >= 0:
            self.procs.close(ln.gate)
            ln.gate = -1

    def _unstart(
        self, job: Job, why: str, elsewhere: bool = False, wait: float = ELSEWHERE_WAIT
    ) -> None:
        """Take back a start that never ran its command for want of space (``why``, naming
        the path): the job PENDING again, no attempt counted, no retry burned; it starts
        when space returns (:mod:`berth.daemon.engine.diskfull`). ``elsewhere``: the space
        is missing outside the state dir (the job's own ``-o``/``-e``, a user over quota):
        only this job waits, ``wait`` seconds (``BeginTime``; its history says why), so that
        one user's full disk (or their supervisor's own limit met:
        :mod:`berth.daemon.engine.exhausted`) holds back nobody else's jobs. A job cancelled
        while its start was being recorded is cancelled now."""
        if self.jobs.get(job.id) is not job or job.state not in ACTIVE:
            return
        cancel = job.id in self.cancel_on_start or job.state is State.COMPLETING
        self.cancel_on_start.discard(job.id)
        job.unnote("lease")
        now = self.clock.time()
        unstart(job, now=now, reason=why)
        self.order.joined(job)
        if elsewhere:
            job.not_before = now + wait
        self.save(job, launched=0)
        log.warning("job %d: not started, it waits: %s", job.id, why)
        if not elsewhere:
            self.diskfull.stopped_start(job.id, why)
        if cancel:
            self._change(job, State.CANCELLED, now, reason="cancelled before it started")
            return
        self.kick()
        if not elsewhere:
            self.reasons[job.id] = self.diskfull.reason()

    def _launch_failed(self, job: Job, why: str) -> None:
        log.error("job %d: cannot start its supervisor: %s", job.id, why)
        self._change(job, State.FAILED, self.clock.time(), reason=why, exit_code=127)

    def _limit(self, job: Job) -> float | None:
        limits = [t for t in (job.time_limit, self.opts.max_job_time) if t]
        return min(limits) if limits else None


# -- the attempt's command: argv, environment, logs -----------------------------------------------
# From a job's stored spec (a :class:`~berth.wire.jobspec.JobSpec`) and its GPUs to what the
# supervisor executes: argv, environment, working directory, log files. Pure apart from reading
# nothing; the daemon calls it.
#
# Nothing the user sent runs through a shell unless they asked: ``--wrap`` is a shell string run
# by ``/bin/sh -c``; ``--env-setup`` / ``--conda`` run their setup in ``bash`` and then ``exec``
# the argv unchanged (passed as positional parameters, never re-parsed).
#
# The job's GPU ids may go into its command (``--inject-arg``, ``{gpus}``/``{cuda}``:
# :mod:`berth.wire.inject`); an array's task (``array_task`` in the spec: the array's id, the
# task's index, the count, the lowest and highest index) sees ``BERTH_ARRAY_JOB_ID``, ``BERTH_ARRAY_TASK_ID``,
# ``BERTH_ARRAY_TASK_COUNT`` / ``_MIN`` / ``_MAX`` and the same ``SLURM_ARRAY_*`` variables (so
# scripts written for Slurm arrays run as they are), and ``BERTH_JOB_ID`` is ``ID_TASK`` as on
# Slurm; ``%A`` / ``%a`` in its log names are the array's id and the task's index
# (:func:`berth.daemon.engine.admission.userdir.expand_pattern`, at submit).


def pty_path(spec: JobSpec, job_id: int, attempt: int) -> str | None:
    """Where the terminal of a ``--pty`` attempt listens, under a root daemon: in its user's
    own directory (the supervisor makes it as that user). None: beside the run file."""
    base = spec.pty_dir
    return f"{base}/{job_id}.{attempt}.pty" if base else None


def build_argv(spec: JobSpec, gpus: list[int] | None = None) -> list[str]:
    """What the supervisor executes; with the attempt's ``gpus`` (machine indices), its
    command gets their ids (:mod:`berth.wire.inject`)."""
    ids = gpus or []
    if spec.wrap:
        argv = ["/bin/sh", "-c", inject.fill(spec.wrap, ids)]
    else:
        argv = [inject.fill(a, ids) for a in spec.argv or ()]
        if spec.inject_arg:
            flag, form = inject.parse(spec.inject_arg)
            argv = inject.rewrite(argv, flag, inject.ids(ids, form))
    setup = spec.env_setup
    if spec.conda:
        setup = CONDA_SETUP + ("\n" + setup if setup else "")
    elif setup and "conda" in setup:  # e.g. mgpu_srun's --env-setup-cmd "conda activate myenv"
        setup = CONDA_HOOK + "\n" + setup
    if setup:
        argv = ["/bin/bash", "-c", SETUP_SCRIPT.format(setup=setup), "berth-job", *argv]
    return argv


def build_env(
    spec: JobSpec, job_id: int, gpus: list[tuple[int, str]], attempt: int = 1
) -> dict[str, str]:
    """The job's environment: the captured one, plus its GPUs and who it is. ``BERTH_ATTEMPT``
    (1, 2, ...) tells a job that was requeued or retried that it runs again (resume from a
    checkpoint), as Slurm's SLURM_RESTART_COUNT."""
    env = dict(spec.env)
    indices = ",".join(str(i) for i, _ in gpus)
    env.update(cuda_env([i for i, _ in gpus] if spec.gpus else []))  # (-g 0: "-1", none)
    env.update(
        BERTH_JOB_ID=str(job_id),
        BERTH_GPUS=indices,
        BERTH_GPU_UUIDS=",".join(u for _, u in gpus),
        BERTH_ATTEMPT=str(attempt),
    )
    if spec.conda:
        env["BERTH_CONDA_ENV"] = spec.conda
    array = spec.array_task
    if array:
        head, task, count, low, high = (str(v) for v in array)
        env["BERTH_JOB_ID"] = f"{head}_{task}"
        for prefix in ("BERTH_ARRAY_", "SLURM_ARRAY_"):
            env.update({prefix + "JOB_ID": head, prefix + "TASK_ID": task,
                        prefix + "TASK_COUNT": count, prefix + "TASK_MIN": low,
                        prefix + "TASK_MAX": high})  # fmt: skip
    return env


PRIVATE = "(private)"  # what a claim file says of a job's command under --private


def launch_spec(
    spec: JobSpec,
    job_id: int,
    gpus: list[tuple[int, str]],
    time_limit: float | None,
    kill_after: float,
    attempt: int = 1,
    private: bool = False,
) -> dict[str, Any]:
    """What the supervisor needs to run one attempt (whom it runs as is the supervisor's);
    ``umask``: the submitter's, applied to the job and to the logs it opens (a job from a
    client that did not say gets 077); ``claim_command``: what the job's claim files, which
    every user reads, say it runs (``private``: nothing, as `berth show` tells others)."""
    return {
        "argv": build_argv(spec, [i for i, _ in gpus]),
        "command": spec.command,  # as the user gave it
        "claim_command": PRIVATE if private else None,
        "env": build_env(spec, job_id, gpus, attempt),
        "cwd": spec.cwd,
        "stdout": spec.stdout_path,
        "stderr": spec.stderr_path,
        "time_limit": time_limit,
        "kill_after": kill_after,
        "pty": spec.pty,
        "pty_path": pty_path(spec, job_id, attempt),
        "umask": 0o077 if spec.umask is None else spec.umask,
    }
