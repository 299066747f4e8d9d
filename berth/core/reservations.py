"""Admin reservations (`berth admin reserve`): GPUs kept for a user, a group or a project over a
time window. Pure data and rules; the pass (:mod:`berth.core.schedpass`) applies them.

A :class:`Window` names its GPUs (indices), its window ``[start, end)`` and who holds it: users
(a group's members are expanded by the caller from the user database, never taken from a
client) and projects. For each pending job and GPU of a window:

- a holder's job may use it at any time (during the window the pass tries the window's GPUs
  first, so a holder does not take GPUs others could use);
- during the window, nobody else's job starts there;
- before the window, another job starts there only if its time limit ends by the window's
  start (backfill); a job without a time limit never does, unless the window lets it
  (``unlimited``: the admin's choice).

A job that could start but for reservations waits with ``Reservation`` and a detail in plain
words (:func:`why`); running jobs are never stopped for a window. Each window's start and end
is a ``wakeup`` of the pass, so a caller's timer opens and closes it on time.

A job's project: ``job.project`` where the job model has one (``getattr``: a model without the
field matches no project reservation, and one with it needs no change here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from berth.core.job import Job
from berth.units import format_duration


@dataclass(frozen=True, slots=True)
class Window:
    """GPUs ``gpus`` (indices) kept for ``users`` and ``projects`` from ``start`` to ``end``;
    ``label`` names the holders in reasons ("alice", "group ml"); ``unlimited``: jobs without a
    time limit may start on them before the window opens."""

    id: int
    gpus: tuple[int, ...]
    start: float
    end: float
    users: frozenset[str] = frozenset()
    projects: frozenset[str] = frozenset()
    label: str = ""
    unlimited: bool = False

    def holds(self, job: Job) -> bool:
        """Is ``job`` one of the holders' jobs?"""
        if job.user in self.users:
            return True
        project = project_of(job)
        return bool(project) and project in self.projects

    def open(self, now: float) -> bool:
        return self.start <= now < self.end

    def keeps_off(self, job: Job, now: float) -> bool:
        """Does this window keep ``job`` off its GPUs now?"""
        if now >= self.end or self.holds(job):
            return False
        if now >= self.start:
            return True
        limit = job.time_limit
        if limit is None:
            return not self.unlimited
        return now + limit > self.start


def project_of(job: Job) -> str | None:
    """The job's project, where the job model has one (see the module docstring)."""
    project = getattr(job, "project", None)
    return project if isinstance(project, str) and project else None


def live(windows: Sequence[Window], now: float) -> list[Window]:
    """The windows not over at ``now``."""
    return [w for w in windows if w.end > now]


def next_change(windows: Sequence[Window], now: float) -> float | None:
    """The next start or end of a window after ``now`` (the pass's wakeup), or None."""
    times = [t for w in windows for t in (w.start, w.end) if t > now]
    return min(times) if times else None


def kept_off(
    windows: Sequence[Window], job: Job, now: float, pos: Mapping[int, int]
) -> tuple[frozenset[int], Window | None]:
    """The positions (``pos``: GPU index -> position) ``job`` may not use now, and the first
    window that keeps it off (for the reason)."""
    out: set[int] = set()
    first: Window | None = None
    for w in windows:
        if w.keeps_off(job, now):
            out.update(pos[g] for g in w.gpus if g in pos)
            if first is None:
                first = w
    return frozenset(out), first


def ahead(
    windows: Sequence[Window], job: Job, now: float, pos: Mapping[int, int]
) -> tuple[frozenset[int], list[tuple[float, frozenset[int]]]]:
    """The positions ``job`` may not use now, and from each later start or end of a window
    on: (time, positions) in time order (the head job's reservation counts them)."""
    if not windows:
        return frozenset(), []
    times = sorted({t for w in windows for t in (w.start, w.end) if t > now})
    return kept_off(windows, job, now, pos)[0], [(t, kept_off(windows, job, t, pos)[0]) for t in times]


def holding(
    windows: Sequence[Window], job: Job, now: float, pos: Mapping[int, int]
) -> frozenset[int]:
    """The positions of the open windows ``job`` holds (it tries them first)."""
    return frozenset(
        pos[g] for w in windows if w.open(now) and w.holds(job) for g in w.gpus if g in pos
    )


def gpu_list(gpus: Sequence[int]) -> str:
    return ("GPU " if len(gpus) == 1 else "GPUs ") + ",".join(str(g) for g in gpus)


def why(w: Window, job: Job, now: float) -> str:
    """The ``Reservation`` detail, in plain words: "GPUs 0,1 are reserved for alice for
    another 1:30:00 (reservation 3)"."""
    what = f"{gpu_list(w.gpus)} {'is' if len(w.gpus) == 1 else 'are'} reserved for {w.label}"
    if w.open(now):
        return f"{what} for another {format_duration(w.end - now)} (reservation {w.id})"
    soon = f"{what} in {format_duration(w.start - now)} (reservation {w.id})"
    if job.time_limit is None:
        return f"{soon}; a job without a time limit (-t) may run into it"
    return f"{soon}; its time limit {format_duration(job.time_limit)} would run into it"
