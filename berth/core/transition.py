"""The one function that changes a job's state, plus hold/release (a flag, not a state).

``transition`` mutates the job in place (and returns it), after checking that the move is
legal; an illegal move raises :class:`IllegalTransition` and changes nothing. Every change
appends an :class:`~berth.core.job.Event` to ``job.history``.

Outcomes that bring a job back to the queue:

- ``FAILED`` with retries left: the attempt ends FAILED, the job goes back to PENDING with
  ``not_before = now + retry_delay * 2**(failed attempts - 1)`` (capped at 1 hour); it keeps its
  place in the queue.
- ``TIMEOUT`` of a job submitted with ``requeue=True``: recorded as ``PREEMPTED`` (the attempt's
  outcome), and the job is requeued at the end of the queue (mgpu_srun's "context switch"), at
  most ``max_requeues`` times; the time limit after that ends it ``TIMEOUT``.
- ``PREEMPTED``: always requeued at the end of the queue.
"""

from __future__ import annotations

from berth.core.job import Attempt, Event, Job
from berth.core.states import ACTIVE, ALLOWED, OUTCOMES, State
from berth.errors import UsageError

MAX_BACKOFF = 3600.0
TIME_LIMIT = "time limit"  # the reason of an attempt its time limit ended


class IllegalTransition(UsageError):
    """A state change that the job model does not allow (e.g. COMPLETED -> RUNNING)."""


def _refuse(job: Job, to: State, why: str) -> IllegalTransition:
    return IllegalTransition(f"job {job.id}: cannot go from {job.state.value} to {to.value}: {why}")


def transition(
    job: Job,
    to: State,
    *,
    now: float,
    reason: str = "",
    gpus: tuple[int, ...] = (),
    share: float = 1.0,
    mem: int | None = None,
    node: str = "",
    exit_code: int | None = None,
) -> Job:
    """Move ``job`` to ``to`` at time ``now``; return the job (changed in place).

    - PENDING -> RUNNING starts a new attempt on ``gpus`` (``share``, ``mem`` per GPU, ``node``);
      refused for a held job or before ``not_before``.
    - RUNNING -> COMPLETING: the job was told to stop (cancel, time limit); it still holds GPUs.
    - RUNNING/COMPLETING -> an outcome ends the attempt (``exit_code`` for COMPLETED/FAILED);
      FAILED with retries left, PREEMPTED, and TIMEOUT with ``requeue`` land in PENDING.
    - PENDING -> CANCELLED.
    """
    to = State(to)
    src = job.state
    if to not in ALLOWED[src]:
        allowed = ", ".join(sorted(s.value for s in ALLOWED[src])) or "nothing (it is finished)"
        raise _refuse(job, to, f"from {src.value} it may go to {allowed}")
    if to is State.RUNNING:
        if job.held:
            raise _refuse(job, to, "it is held; release it first")
        if job.not_before is not None and now < job.not_before:
            raise _refuse(job, to, f"its retry backoff lasts until t={job.not_before:.3f}")
        if job.request.count != len(gpus):
            raise _refuse(job, to, f"it needs {job.request.count} GPU(s), given {list(gpus)}")
        attempt = Attempt(len(job.attempts) + 1, now, tuple(gpus), share, mem, node)
        job.attempts = [*job.attempts, attempt]  # (a pending job's may be shared: core.job)
        job.not_before = None
        return _record(job, src, to, now, reason or f"on GPU {_ids(gpus)}")
    if to is State.COMPLETING:
        return _record(job, src, to, now, reason)
    if src is State.PENDING:  # -> CANCELLED
        return _record(job, src, to, now, reason)
    # src is active: the attempt ends.
    assert src in ACTIVE and to in OUTCOMES
    attempt = job.attempts[-1]
    outcome = to
    if to is State.TIMEOUT and job.requeue and requeues_left(job) != 0:
        outcome = State.PREEMPTED
        reason = reason or TIME_LIMIT
    attempt.end = now
    attempt.outcome = outcome
    attempt.exit_code = exit_code
    attempt.reason = reason
    detail = reason or (f"exit {exit_code}" if exit_code is not None else "")
    failed = sum(1 for a in job.attempts if a.outcome is State.FAILED)
    if outcome is State.FAILED and failed <= job.retries:
        _record(job, src, State.FAILED, now, detail)
        delay = min(MAX_BACKOFF, job.retry_delay * 2 ** (failed - 1))
        job.not_before = now + delay
        return _record(
            job, State.FAILED, State.PENDING, now,
            f"retry {failed}/{job.retries} after {delay:g}s",
        )  # fmt: skip
    if outcome is State.PREEMPTED:
        _record(job, src, State.PREEMPTED, now, detail)
        job.queue_time = now
        return _record(job, State.PREEMPTED, State.PENDING, now, "requeued")
    return _record(job, src, outcome, now, detail)


def cancel_pending(jobs: list[Job], *, now: float, reason: str = "") -> Event | None:
    """Cancel pending ``jobs`` at once, each as ``transition(job, CANCELLED)`` does, their
    history sharing one event (returned; None if there are none); a job not pending raises
    before any is changed."""
    for job in jobs:
        if job.state is not State.PENDING:
            raise _refuse(job, State.CANCELLED, "only pending jobs are cancelled at once")
    if not jobs:
        return None
    event = Event(now, State.PENDING, State.CANCELLED, reason)
    for job in jobs:
        job.state = State.CANCELLED
        job.history = [*job.history, event]
    return event


def requeues_left(job: Job) -> int | None:
    """How many more times the time limit may requeue ``job`` (None: no end; 0: none)."""
    if not job.requeue:
        return 0
    if job.max_requeues is None:
        return None
    done = sum(
        1 for a in job.attempts if a.outcome is State.PREEMPTED and a.reason.startswith(TIME_LIMIT)
    )
    return max(job.max_requeues - done, 0)


def hold(job: Job, *, now: float, reason: str = "held by user") -> Job:
    """Keep a pending job from starting until :func:`release`."""
    if job.state is not State.PENDING:
        raise _refuse(job, State.PENDING, f"only a pending job can be held (it is {job.state})")
    if not job.held:
        job.held = True
        _record(job, State.PENDING, State.PENDING, now, reason)
    return job


def release(job: Job, *, now: float, reason: str = "released") -> Job:
    """Let a held job start again."""
    if job.state is not State.PENDING:
        raise _refuse(job, State.PENDING, f"only a pending job can be released (it is {job.state})")
    if job.held:
        job.held = False
        _record(job, State.PENDING, State.PENDING, now, reason)
    return job


def unstart(job: Job, *, now: float, reason: str) -> Job:
    """Take back a start that never ran its command (its write-ahead could not be made
    durable, or its supervisor could not record it: a full disk): the job is PENDING again as
    if the start had not been decided, its attempt dropped (it burns no retry and counts as
    no attempt), and its history says why."""
    if job.state not in ACTIVE or not job.attempts or job.attempts[-1].end is not None:
        why = f"only a start not yet run can be taken back (it is {job.state})"
        raise _refuse(job, State.PENDING, why)
    job.attempts = job.attempts[:-1]
    return _record(job, job.state, State.PENDING, now, f"not started: {reason}")


def _record(job: Job, prev: State, state: State, now: float, detail: str) -> Job:
    job.state = state
    job.history = [*job.history, Event(now, prev, state, detail)]  # (maybe shared: core.job)
    return job


def _ids(gpus: tuple[int, ...]) -> str:
    return ",".join(str(g) for g in gpus) if gpus else "none"
