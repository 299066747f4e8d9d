"""Per-user and per-project limits the scheduler enforces: at most N GPUs held at once by one
user (Slurm's ``MaxTRESPerUser=gres/gpu=N``), or by the jobs of one project (Slurm's
``GrpTRES=gres/gpu=N`` on an account: ``ProjectGpuLimit``, :class:`ProjectHeld`).

A job whose start would take its user above the limit waits with the reason
``UserGpuLimit`` ("alice holds 4 of 4 GPUs allowed at once"), and, like an array's ``%K``
(:mod:`berth.core.groups`), it neither takes a reservation nor blocks the jobs behind it:
what its own user holds, not a lack of GPUs, holds it back. A job that asks for more than its
user may ever hold waits until the limit is raised (the daemon refuses such a job at submit).

A user's GPUs are the GPUs they hold any part of (issue 41.3): a share, however small, keeps
the whole GPU from every exclusive job, so each GPU a user holds a share of counts 1 against
their limit, whatever its share, and however many of their jobs and claims share it. A share
job of a user at their limit may still start on a GPU they already hold part of (it adds no
GPU): :meth:`Held.within`. So one user can never keep more GPUs from others than their limit,
one percent at a time (``UserLimits.outside``: the GPUs of their claims outside the queue).

The other limits (jobs queued, time limit; a project's jobs queued) are checked when a job is
submitted, by the daemon: they are not the scheduler's business.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from berth.core.capacity import Capacity
from berth.core.job import Job

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class UserLimits:
    """The most GPUs each user may hold at once: ``max_gpus`` (user -> N, or None for no
    limit), else ``default`` (None: no limit). ``outside``: the GPUs (indices) each user holds
    any part of in claims made outside the queue (`berth run`), counted with their running
    jobs. ``projects``: the
    most GPUs each project's jobs may hold at once (project -> N; a project not listed, and
    jobs of no project, have no limit: :class:`ProjectHeld`)."""

    max_gpus: Mapping[str, float | None] = field(default_factory=dict)
    default: float | None = None
    outside: Mapping[str, Collection[int]] = field(default_factory=dict)
    projects: Mapping[str, float] = field(default_factory=dict)

    def of(self, user: str) -> float | None:
        return self.max_gpus.get(user, self.default) if self.max_gpus else self.default


class Held:
    """The GPUs each user holds any part of (running jobs, those started in this pass, and
    their claims outside the queue), against their :class:`UserLimits`."""

    __slots__ = ("held", "limits")

    def __init__(self, limits: UserLimits, running: Iterable[Job]) -> None:
        self.limits = limits
        self.held: dict[str, set[int]] = {u: set(g) for u, g in limits.outside.items()}
        for job in running:
            a = job.attempt
            if a is not None:
                self.took(job.user, a.gpus)

    def count(self, user: str) -> int:
        """How many GPUs ``user`` holds any part of."""
        mine = self.held.get(user)
        return len(mine) if mine is not None else 0

    def blocked(self, job: Job) -> str | None:
        """Why ``job`` may not start now for its user's limit (the detail of its pending
        reason), or None. A share job of a user at their limit is not blocked here when they
        hold part of a GPU already: it may start there (:meth:`within`)."""
        if not self.limits.max_gpus and self.limits.default is None:
            return None  # (only projects have limits)
        most = self.limits.of(job.user)
        if most is None:
            return None
        need = job.request.count
        held = self.count(job.user)
        if held + need <= most + EPS:
            return None
        who = job.user or "this user"
        if need > most + EPS:
            return f"needs {_n(need)} GPUs, more than {who} may hold at once ({_n(most)})"
        if job.request.gpus < 1 and held:
            return None  # (on a GPU it holds part of already: within())
        return f"{who} holds {_n(held)} of {_n(most)} GPUs allowed at once"

    def within(self, job: Job) -> frozenset[int] | None:
        """The GPUs ``job`` may start on without taking its user above their limit (those
        they hold part of already), or None: any GPU."""
        most = self.limits.of(job.user)
        if most is None or not (self.limits.max_gpus or self.limits.default is not None):
            return None
        held = self.count(job.user)
        if held + job.request.count <= most + EPS:
            return None
        return frozenset(self.held.get(job.user, ()))

    def no_room(self, user: str) -> str:
        """The reason a share job of ``user`` at their limit waits: no room on their GPUs."""
        most = self.limits.of(user)
        return (f"{user or 'this user'} holds {_n(self.count(user))} of {_n(most or 0)} GPUs "
                "allowed at once, and no room on the GPUs they hold part of")  # fmt: skip

    def stuck(self, user: str, cap: Capacity) -> bool:
        """None of ``user``'s jobs can start: at their limit, no room on the GPUs they hold."""
        if not self.full(user):
            return False
        pos = cap.pos
        return not any(g in pos and cap.free[pos[g]] > EPS for g in self.held.get(user, ()))

    def full(self, user: str) -> bool:
        """``user`` holds all the GPUs their limit allows: none of their jobs that needs a
        GPU they do not hold yet can start."""
        most = self.limits.of(user)
        return most is not None and self.count(user) >= most - EPS

    def started(self, job: Job, gpus: Iterable[int]) -> None:
        """``job`` started in this pass on ``gpus``."""
        self.took(job.user, gpus)

    def took(self, user: str, gpus: Iterable[int]) -> None:
        mine = self.held.get(user)
        if mine is None:
            mine = self.held[user] = set()
        mine.update(gpus)


class ProjectHeld:
    """What each project's jobs hold (running, and started in this pass), against
    ``max_gpus`` (project -> the most; a project not listed has no limit)."""

    __slots__ = ("held", "max_gpus")

    def __init__(self, max_gpus: Mapping[str, float], running: Iterable[Job]) -> None:
        self.max_gpus = max_gpus
        self.held: dict[str, float] = {}
        for job in running:
            self.started(job)

    def blocked(self, job: Job) -> str | None:
        """Why ``job`` may not start now for its project's limit, or None."""
        most = self.max_gpus.get(job.project) if job.project else None
        if most is None:
            return None
        need = job.request.gpu_amount
        held = self.held.get(job.project, 0.0)
        if held + need <= most + EPS:
            return None
        who = f"project {job.project}"
        if need > most + EPS:
            return f"needs {_n(need)} GPUs, more than {who} may hold at once ({_n(most)})"
        return f"{who} holds {_n(held)} of {_n(most)} GPUs allowed at once"

    def full(self, project: str) -> bool:
        """The project holds all the GPUs its limit allows: none of its jobs can start."""
        most = self.max_gpus.get(project) if project else None
        return most is not None and self.held.get(project, 0.0) >= most - EPS

    def started(self, job: Job) -> None:
        if job.project:
            self.held[job.project] = self.held.get(job.project, 0.0) + job.request.gpu_amount


def _n(x: float) -> str:
    return f"{x:g}"
