"""How good the start estimates were: each job's first estimate (kept in the job as
``extra["estimated"]``: ``[made at, start, latest, exact]``, stamped by
:mod:`berth.daemon.engine.estimates` the first time it estimates the job) against when its
first attempt really started, over the jobs that ended in the last :data:`WINDOW` seconds.

Fed by the history when the daemon starts (:mod:`berth.daemon.engine.history`) and by each job
as it ends; read by the queue's head frame (``estimates``), which the dashboard shows.
"""

from __future__ import annotations

import json
from collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WINDOW = 7 * 86400.0  # a week
SLACK = 60.0  # seconds a start may pass its estimate's upper bound and still be within it


class Accuracy:
    """The errors of the last week's first estimates, oldest first."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        # (ended at, |error| or None: it was "unknown", started within the estimate's bound)
        self._seen: deque[tuple[float, float | None, bool]] = deque()

    def add(self, ended: float, estimated: Any, first: float | None) -> None:
        """A job that ended: its first estimate (the stored list, or its JSON text) and its
        first start (None: it never started: nothing to compare)."""
        if isinstance(estimated, str):
            try:
                estimated = json.loads(estimated)
            except ValueError:
                return
        if first is None or not isinstance(estimated, list) or len(estimated) != 4:
            return
        _, start, latest, exact = estimated
        if not isinstance(start, (int, float)):
            self._seen.append((ended, None, False))
            return
        bound = start if exact or not isinstance(latest, (int, float)) else max(start, latest)
        self._seen.append((ended, abs(first - start), first <= bound + SLACK))

    def summary(self, now: float) -> dict[str, Any]:
        """The last week: how many jobs, the median and p90 of |estimated - actual start| (s),
        how many were "unknown", what part started within the estimate's bound."""
        seen = self._seen
        while seen and seen[0][0] < now - WINDOW:
            seen.popleft()
        errors = sorted(e for _, e, _ in seen if e is not None)
        n = len(errors)
        return {
            "days": WINDOW / 86400.0,
            "jobs": len(seen),
            "unknown": len(seen) - n,
            "median": errors[n // 2] if n else None,
            "p90": errors[-(-9 * n // 10) - 1] if n else None,
            "within": (sum(1 for _, e, w in seen if e is not None and w) / n) if n else None,
        }
