"""Projects (Slurm's accounts; issue 24.5), the daemon's side: the I/O around the core's
two-level fair share (:mod:`berth.core.fairshare`) and project quotas
(:class:`berth.core.limits.ProjectHeld`).

- Configured by the admin only (:mod:`berth.config.projects`: ``[projects.NAME]`` tables,
  ``[scheduling] require_project`` and ``default_project``); nothing here is set at runtime.
- At submit (:meth:`Projects.check`): a job without ``--project`` gets ``default_project``;
  with ``require_project`` one that still has none is refused; a project that is not
  configured is refused (naming the ones that are); a user who is not a member is refused
  (membership from the user database, :func:`berth.config.projects.member`, never from the
  client); ``max_queued`` counts the project's jobs queued or running.
- Usage: each ended attempt adds its decayed GPU-seconds to its project's (``""`` for the
  jobs of no project: one more project), kept in the store's ``usage`` table as the row
  ``project:NAME`` (a user name never holds ':', the passwd file's separator, so the rows of
  users and projects never meet).
- :meth:`Projects.summary`: each project's line (`berth admin projects`, `berth queue
  --users`, /metrics, the dashboard).
"""

from __future__ import annotations

from berth.config.projects import member
from berth.core.fairshare import Book, FairShare, charged_gpus, factors, usage_at
from berth.core.states import ACTIVE, State
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from berth.config import Config
    from berth.config.projects import Project
    from berth.core.job import Job

PREFIX = "project:"  # a project's row in the store's usage table


class Projects:
    """The configured projects, their usage book and the checks at submit."""

    def __init__(self, cfg: Config, usage: Mapping[str, tuple[float, float]]) -> None:
        self.config: dict[str, Project] = dict(cfg.projects)
        self.require = cfg.require_project
        self.default = cfg.default_project
        self.book = Book(cfg.fairshare_half_life, {
            k.removeprefix(PREFIX): v for k, v in usage.items() if k.startswith(PREFIX)
        })  # fmt: skip

    @property
    def any(self) -> bool:
        """Projects are configured (else jobs have none, and nothing here costs a pass)."""
        return bool(self.config)

    def check(
        self, user: str, asked: str | None, counts: dict[str, int], count: int
    ) -> str | None:
        """The project ``count`` jobs of ``user`` are charged to (``asked``: --project), or a
        refusal naming the value and what to do; ``counts`` (each project's unfinished jobs,
        ``JobTable.projects``) grows by
        ``count`` (a batch's jobs count against the project's ``max_queued`` together)."""
        name = asked or self.default
        if name is None:
            if self.require:
                raise ProtocolError(
                    protocol.BAD_REQUEST,
                    "this daemon requires a project ([scheduling] require_project): submit "
                    f"with --project NAME (projects: {self._names(user)}); nothing was queued",
                )
            return None
        project = self.config.get(name)
        what = f"--project {name!r}" if asked else f"[scheduling] default_project {name!r}"
        if project is None:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"{what}: no such project here (projects: {self._names(user)}); "
                "name one of them, or ask an admin to add it; nothing was queued",
            )
        if not member(project, user):
            raise ProtocolError(
                protocol.NOT_OWNER,
                f"{what}: {user} is not a member of it (its users and groups: "
                f"{_members(project)}); name a project of yours ({self._names(user)}), or "
                "ask an admin to add you; nothing was queued",
            )
        most, n = project.max_queued, counts.get(name, 0)
        if most is not None and n + count > most:
            more = f" and this would add {count}" if count > 1 else ""
            raise ProtocolError(
                protocol.INVALID_STATE,
                f"project {name} has {n} jobs queued or running{more}; the most allowed is "
                f"{most} ([projects.{name}] max_queued): wait for some to end, or cancel some",
            )
        counts[name] = n + count
        return name

    def _names(self, user: str) -> str:
        mine = [p for p, project in sorted(self.config.items()) if member(project, user)]
        return ", ".join(mine) or "none of them yours"

    def limits(self) -> dict[str, float]:
        """Each project's ``max_gpus``, for ``schedule(...)`` (``UserLimits.projects``)."""
        return {p: c.max_gpus for p, c in self.config.items() if c.max_gpus is not None}

    def ended(self, job: Job, now: float) -> tuple[str, float, float] | None:
        """Add the attempt ``job`` just ended to its project's usage; the store row. Jobs of
        no project count together as one more project (``""``, the row ``project:``), as
        running ones do in :meth:`fair`; nothing without projects."""
        a = job.attempt
        if not self.any or a is None or a.end is None:
            return None
        value = self.book.add(job.project, charged_gpus(job.request), a.start, a.end, now)
        return (PREFIX + job.project, value, now)

    def fair(self, fair: FairShare, running: Iterable[Job], now: float) -> FairShare:
        """``fair`` (the users' level) with the projects' level added."""
        if not self.any:
            return fair
        usage = usage_at(self.book, running, now, by="project")
        shares = {p: c.shares for p, c in self.config.items()}
        return FairShare(fair.usage, fair.shares, usage, shares)

    def summary(self, jobs: Iterable[Job], now: float) -> list[dict[str, Any]]:
        """One row per configured project (and any other a job names): running jobs and GPUs,
        pending jobs, decayed usage (GPU-hours), its part of all usage, shares, the
        fair-share factor between projects, its quotas and members."""
        per: dict[str, dict[str, Any]] = {p: empty_row(p) for p in sorted(self.config)}
        running = tally(per, (j for j in jobs if j.project), lambda j: j.project, "project")
        usage = usage_at(self.book, running, now, by="project")
        shares = {p: (c.shares if (c := self.config.get(p)) else 1.0) for p in per}
        factor = factors(FairShare(usage, shares), per)
        total = sum(usage.get(p, 0.0) for p in per)
        for p, row in per.items():
            c = self.config.get(p)
            row["queued"] = row["running"] + row["pending"]
            row["usage_gpu_hours"] = usage.get(p, 0.0) / 3600.0
            row["usage_fraction"] = usage.get(p, 0.0) / total if total > 0 else 0.0
            row["shares"] = shares[p]
            row["factor"] = factor[p]
            row["max_gpus"] = c.max_gpus if c else None
            row["max_queued"] = c.max_queued if c else None
            row["users"] = list(c.users) if c else []
            row["groups"] = list(c.groups) if c else []
        return list(per.values())


def empty_row(name: str, what: str = "project") -> dict[str, Any]:
    """A row of `tally` with nothing counted yet."""
    return {what: name, "running": 0, "gpus": 0.0, "pending": 0}


def tally(
    per: dict[str, dict[str, Any]], jobs: Iterable[Job], key: Callable[[Job], str], what: str
) -> list[Job]:
    """Count ``jobs`` into ``per`` (a row for each ``key(job)``, ``what`` naming it): running
    jobs and their GPUs, pending jobs. Returns the running ones (for their usage so far)."""
    running: list[Job] = []
    for job in jobs:
        k = key(job)
        row = per.get(k)
        if row is None:
            row = per[k] = empty_row(k, what)
        if job.state in ACTIVE:
            running.append(job)
            row["running"] += 1
            row["gpus"] += job.request.gpu_amount
        elif job.state is State.PENDING:
            row["pending"] += 1
    return running


def _members(project: Project) -> str:
    return ", ".join([*project.users, *(f"group {g}" for g in project.groups)])
