"""Preemption of opted-in jobs (issue 32.5, measured in the simulator; not in the daemon).

The rule, as a user reads it: *a running job submitted with* ``--requeue`` *is stopped to let
a waiting job through when what it has left of its time limit is at least* ``ratio`` *(8)
times the waiting job's limit* -- and only once it has run ``min_run`` (10 min), at most
``cap`` (1) times in its life, never for a job of lower priority. It is told to stop (SIGUSR1
on Slurm), ends ``grace`` later as PREEMPTED and goes back to the queue keeping its place by
queue time (a start undone, not a requeue to the end). Its run is lost: it starts again from
the beginning (Slurm's requeue; no checkpointing is modelled), and that lost work is counted.

Which waiting jobs: the pending jobs the pass did not start, in the pass's order (the
``guarded`` head first). One held, not yet at its begin time, or whose dependencies are not
met takes no GPU and is passed over; one whose dependencies are met waits for GPUs alone and
is served like any other (as ``guarded``'s overdue job may be one: :mod:`berth.core.guard`). Freed GPUs go to the first jobs in that order, so the rule walks
it and stops at the first job that may start but that it cannot serve (a job ahead that
would take the freed GPUs): preempting for a job behind it would hand the GPUs to the job
ahead. Each waiting job gets one victim at most (the one whose lost work is least), each
victim serves one waiting job; only whole GPUs (a fractional job is never a victim nor
served) and a victim holding at least the GPUs the waiting job asks, on one node.

Pure: no clock, no I/O; the caller (the simulator) applies the :class:`Preempt` decisions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from berth.core.guard import UNKNOWN_LIMIT, Met, may_start
from berth.core.job import Job
from berth.core.states import State
from berth.errors import UsageError

#: The reason of an attempt this rule ended (``Attempt.reason``): how :func:`preempted` counts.
PREEMPTED_FOR = "preempted for job"


@dataclass(frozen=True, slots=True)
class Rule:
    """When a job may be preempted: time left >= ``ratio`` x the waiting job's limit, after
    ``min_run`` seconds of its attempt, at most ``cap`` times; it stops ``grace`` seconds
    after being told; the first ``scan`` jobs of the pass's order are considered."""

    ratio: float = 8.0
    min_run: float = 600.0
    cap: int = 1
    grace: float = 60.0
    scan: int = 64

    def __post_init__(self) -> None:
        for name in ("ratio", "min_run", "grace"):
            v = getattr(self, name)
            if not v >= 0:
                raise UsageError(f"preemption {name} {v!r}: must be 0 or more")
        if self.ratio < 1:
            raise UsageError(f"preemption ratio {self.ratio!r}: must be 1 or more")
        if self.cap < 0 or self.scan < 1:
            raise UsageError(f"preemption cap {self.cap!r} / scan {self.scan!r}: 0+ / 1+")


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop running ``job_id`` (it opted in) so that pending ``for_job`` can start."""

    job_id: int
    for_job: int

    @property
    def reason(self) -> str:
        return f"{PREEMPTED_FOR} {self.for_job}"


def preempted(job: Job) -> int:
    """How many of the job's attempts this rule ended."""
    return sum(
        1 for a in job.attempts
        if a.outcome is State.PREEMPTED and a.reason.startswith(PREEMPTED_FOR)
    )  # fmt: skip


def _limit(job: Job) -> float:
    return job.time_limit if job.time_limit is not None else UNKNOWN_LIMIT


def victims(running: Iterable[Job], rule: Rule) -> list[Job]:
    """The running jobs the rule may stop (once past ``min_run``): opted in (``requeue``),
    RUNNING (not already told to stop), on whole GPUs, preempted fewer than ``cap`` times."""
    out = []
    for job in running:
        a = job.attempt
        if (
            job.requeue and job.state is State.RUNNING and a is not None and a.share >= 1.0
            and a.gpus and preempted(job) < rule.cap
        ):  # fmt: skip
            out.append(job)
    return out


def preemptions(
    waiting: Iterable[Job], running: Iterable[Job], now: float, rule: Rule,
    met: Met | None = None,
) -> tuple[list[Preempt], float | None]:  # fmt: skip
    """What to preempt at ``now``, and when a preemption held back only by ``min_run`` could
    be made (a pass is worth running then; None: none): ``waiting`` are the pending jobs the
    pass did not start, in its order; ``running`` the jobs holding GPUs; ``met``: whether a
    job's dependencies are met (:class:`berth.core.deps.Lazy`; none given: a job with
    dependencies is passed over, as one whose dependencies are not). See the module's rule."""
    free = victims(running, rule)
    out: list[Preempt] = []
    if not free:
        return out, None
    for k, w in enumerate(waiting):
        if k >= rule.scan or not free:
            break
        if not may_start(w, now, met):
            continue  # (it takes no GPU: the jobs behind it may be served)
        need = w.request.count
        if w.request.gpu_amount != need or need < 1:
            break  # (fractional or no GPU: served by the packer, not by a victim)
        want = rule.ratio * _limit(w)
        best: tuple[float, int, Job] | None = None
        soon: float | None = None  # the earliest a victim too young now may serve it
        for v in free:
            a = v.attempt
            assert a is not None
            if len(a.gpus) < need or v.priority > w.priority:
                continue
            if a.start + _limit(v) - now < want:
                continue
            if now - a.start < rule.min_run:
                ready = a.start + rule.min_run
                soon = ready if soon is None else min(soon, ready)
                continue
            lost = (now - a.start) * len(a.gpus)
            if best is None or (lost, v.id) < best[:2]:
                best = (lost, v.id, v)
        if best is None:
            return out, soon  # (the freed GPUs would go to this job first)
        free.remove(best[2])
        out.append(Preempt(best[2].id, w.id))
    return out, None
