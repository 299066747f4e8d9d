"""Per-user and per-project limits the scheduler enforces: at most N GPUs held at once by one
user (Slurm's ``MaxTRESPerUser=gres/gpu=N``), or by the jobs of one project (Slurm's
``GrpTRES=gres/gpu=N`` on an account: ``ProjectGpuLimit``, :class:`ProjectHeld`).

A job whose start would take its user above the limit waits with the reason
``UserGpuLimit`` ("alice holds 4 of 4 GPUs allowed at once"), and, like an array's ``%K``
(:mod:`berth.core.groups`), it neither takes a reservation nor blocks the jobs behind it:
what its own user holds, not a lack of GPUs, holds it back. A job that asks for more than its
user may ever hold waits until the limit is raised (the daemon refuses such a job at submit).

The other limits (jobs queued, time limit; a project's jobs queued) are checked when a job is
submitted, by the daemon: they are not the scheduler's business.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from berth.core.job import Job

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class UserLimits:
    """The most GPUs each user may hold at once: ``max_gpus`` (user -> N, or None for no
    limit), else ``default`` (None: no limit). ``outside``: GPUs each user holds in claims
    made outside the queue (`berth run`), counted with their running jobs. ``projects``: the
    most GPUs each project's jobs may hold at once (project -> N; a project not listed, and
    jobs of no project, have no limit: :class:`ProjectHeld`)."""

    max_gpus: Mapping[str, float | None] = field(default_factory=dict)
    default: float | None = None
    outside: Mapping[str, float] = field(default_factory=dict)
    projects: Mapping[str, float] = field(default_factory=dict)

    def of(self, user: str) -> float | None:
        return self.max_gpus.get(user, self.default) if self.max_gpus else self.default


class Held:
    """What each user holds (running jobs, those started in this pass, and their claims
    outside the queue), against their :class:`UserLimits`."""

    __slots__ = ("held", "limits")

    def __init__(self, limits: UserLimits, running: Iterable[Job]) -> None:
        self.limits = limits
        self.held: dict[str, float] = dict(limits.outside)
        for job in running:
            self.started(job)

    def blocked(self, job: Job) -> str | None:
        """Why ``job`` may not start now for its user's limit (the detail of its pending
        reason), or None."""
        if not self.limits.max_gpus and self.limits.default is None:
            return None  # (only projects have limits)
        most = self.limits.of(job.user)
        if most is None:
            return None
        need = job.request.gpu_amount
        held = self.held.get(job.user, 0.0)
        if held + need <= most + EPS:
            return None
        who = job.user or "this user"
        if need > most + EPS:
            return f"needs {_n(need)} GPUs, more than {who} may hold at once ({_n(most)})"
        return f"{who} holds {_n(held)} of {_n(most)} GPUs allowed at once"

    def full(self, user: str) -> bool:
        """``user`` holds all the GPUs their limit allows: none of their jobs can start."""
        most = self.limits.of(user)
        return most is not None and self.held.get(user, 0.0) >= most - EPS

    def started(self, job: Job) -> None:
        self.held[job.user] = self.held.get(job.user, 0.0) + job.request.gpu_amount


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
