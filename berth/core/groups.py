"""At most K jobs of a group running at once: an array's ``%K`` throttle (``--array 0-9%2``),
as Slurm's ``JobArrayTaskLimit``.

A job with a ``group`` and a ``group_limit`` K > 0 may start only while fewer than K jobs of
its group hold GPUs (running, completing, or started earlier in the same pass). Otherwise it
waits with the reason ``JobArrayTaskLimit``, and it neither takes a reservation nor blocks
the jobs behind it: the group's own running jobs, not a lack of GPUs, hold it back. The group
is any string the caller chooses (the daemon uses ``"array:ID"``); jobs without a group, or
with a limit of 0, are never held by this.
"""

from __future__ import annotations

from collections.abc import Iterable

from berth.core.job import Job


class GroupLimits:
    """How many jobs of each group run, kept up to date through a pass."""

    __slots__ = ("running",)

    def __init__(self, running: Iterable[Job]) -> None:
        self.running: dict[str, int] = {}
        for job in running:
            if job.group:
                self.running[job.group] = self.running.get(job.group, 0) + 1

    def blocked(self, job: Job) -> str | None:
        """Why ``job`` may not start now for its group's limit (a detail for its pending
        reason), or None."""
        limit = job.group_limit
        if not limit or not job.group:
            return None
        n = self.running.get(job.group, 0)
        if n < limit:
            return None
        return f"{n} of {job.group} running, at most {limit} at once"

    def started(self, job: Job) -> None:
        if job.group:
            self.running[job.group] = self.running.get(job.group, 0) + 1
