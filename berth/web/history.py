"""The last day of the GPUs and the queue, for the dashboard's charts and per-user usage.

Every tick (the daemon's poll interval, clamped to 0.5..5 s) the server adds a sample: each
GPU's utilisation and memory in use, how many jobs run and wait, and the GPUs each user holds
(queue jobs and daemonless claims alike). Samples of the last hour stay in memory at full
rate; each minute's averages go to the daemon's store (``samples`` table, one row a minute,
rows older than 24 h pruned), through the journal like every other write, so a restart keeps
the day. The charts read both: minutes for the older part, ticks for the last hour.

A user's GPU-hours are held GPUs integrated over time: over the minutes of the last 24 h for
the page, and since the daemon started for the Prometheus counter.
"""

from __future__ import annotations

import json
import math
from collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

DAY = 86400.0
FINE_SPAN = 3600.0  # seconds of full-rate samples kept in memory
MINUTE = 60.0
MAX_POINTS = 720  # points per series sent to the page (older samples are averaged)


class Sample:
    __slots__ = ("mem", "pending", "running", "t", "users", "util")

    def __init__(
        self,
        t: float,
        util: dict[int, float],
        mem: dict[int, float],
        running: float,
        pending: float,
        users: dict[str, float],
    ) -> None:
        self.t = t
        self.util = util  # GPU index -> percent (GPUs that report it)
        self.mem = mem  # GPU index -> fraction of memory in use
        self.running = running
        self.pending = pending
        self.users = users  # user -> GPUs held (shares count as fractions)

    def to_json(self) -> str:
        return json.dumps(
            {
                "u": {str(k): round(v, 1) for k, v in self.util.items()},
                "m": {str(k): round(v, 4) for k, v in self.mem.items()},
                "r": round(self.running, 2),
                "p": round(self.pending, 2),
                "users": {k: round(v, 4) for k, v in self.users.items()},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_row(cls, t: float, data: str) -> Sample | None:
        try:
            d = json.loads(data)
            return cls(
                float(t),
                {int(k): float(v) for k, v in d.get("u", {}).items()},
                {int(k): float(v) for k, v in d.get("m", {}).items()},
                float(d.get("r", 0)),
                float(d.get("p", 0)),
                {str(k): float(v) for k, v in d.get("users", {}).items()},
            )
        except (ValueError, TypeError, AttributeError):
            return None  # a damaged row is skipped, not fatal


def _mean(samples: list[Sample], t: float) -> Sample:
    """The average of several samples, stamped ``t``."""
    n = len(samples)

    def avg(maps: Iterable[dict[Any, float]]) -> dict[Any, float]:
        sums: dict[Any, float] = {}
        for m in maps:
            for k, v in m.items():
                sums[k] = sums.get(k, 0.0) + v
        return {k: v / n for k, v in sums.items()}

    return Sample(
        t,
        avg(s.util for s in samples),
        avg(s.mem for s in samples),
        sum(s.running for s in samples) / n,
        sum(s.pending for s in samples) / n,
        avg(s.users for s in samples),
    )


class History:
    def __init__(self, tick: float, rows: Iterable[tuple[float, str]] = ()) -> None:
        self.tick = tick
        self.fine: deque[Sample] = deque(maxlen=math.ceil(FINE_SPAN / tick) + 1)
        self.minutes: deque[Sample] = deque(maxlen=int(DAY / MINUTE) + 2)
        for t, data in rows:
            s = Sample.from_row(t, data)
            if s is not None:
                self.minutes.append(s)
        self._minute: float | None = None  # start of the minute being gathered
        self._gathered: list[Sample] = []
        self.gpu_seconds: dict[str, float] = {}  # user -> held GPU-seconds since start
        self._last: float | None = None

    def add(self, s: Sample) -> tuple[float, str] | None:
        """Add a tick's sample; returns the row of a minute that has just closed (to store)."""
        if self._last is not None:
            dt = min(s.t - self._last, 3 * self.tick)  # a stalled loop is not counted as use
            if dt > 0:
                for user, gpus in s.users.items():
                    self.gpu_seconds[user] = self.gpu_seconds.get(user, 0.0) + gpus * dt
        self._last = s.t
        self.fine.append(s)
        minute = math.floor(s.t / MINUTE) * MINUTE
        row = None
        if self._minute is not None and minute != self._minute and self._gathered:
            closed = _mean(self._gathered, self._minute)
            self.minutes.append(closed)
            row = (closed.t, closed.to_json())
            self._gathered = []
        self._minute = minute
        self._gathered.append(s)
        while self.minutes and self.minutes[0].t < s.t - DAY:
            self.minutes.popleft()
        return row

    def points(self, now: float, span: float = DAY) -> list[Sample]:
        """The samples of the last ``span`` seconds, oldest first: minutes where no tick is
        kept, then ticks; averaged down to at most :data:`MAX_POINTS`."""
        first_fine = self.fine[0].t if self.fine else now
        out = [m for m in self.minutes if now - span <= m.t < first_fine - MINUTE / 2]
        out += [s for s in self.fine if s.t >= now - span]
        if len(out) <= MAX_POINTS:
            return out
        lo, width = out[0].t, (out[-1].t - out[0].t) / MAX_POINTS or 1.0
        bins: dict[int, list[Sample]] = {}
        for s in out:
            bins.setdefault(min(MAX_POINTS - 1, int((s.t - lo) / width)), []).append(s)
        return [_mean(b, b[-1].t) for _, b in sorted(bins.items())]

    def series(self, now: float, span: float = DAY) -> dict[str, Any]:
        """The charts' data: per point [t, mean util %, running, pending] and per-GPU util."""
        pts = self.points(now, span)
        gpus = sorted({k for s in pts for k in s.util})
        return {
            "now": now,
            "span": span,
            "gpus": gpus,
            "points": [
                [
                    round(s.t, 1),
                    round(sum(s.util.values()) / len(s.util), 1) if s.util else None,
                    round(s.running, 2),
                    round(s.pending, 2),
                    [round(s.util[g], 1) if g in s.util else None for g in gpus],
                ]
                for s in pts
            ],
        }

    def gpu_hours(self, now: float) -> dict[str, float]:
        """GPU-hours each user held over the last 24 h (stored minutes, then the minute being
        gathered)."""
        out: dict[str, float] = {}
        for m in self.minutes:
            if m.t >= now - DAY:
                for user, gpus in m.users.items():
                    out[user] = out.get(user, 0.0) + gpus * MINUTE / 3600
        if self._gathered:
            part = _mean(self._gathered, self._gathered[0].t)
            span = max(0.0, self._gathered[-1].t - (self._minute or now)) + self.tick
            for user, gpus in part.users.items():
                out[user] = out.get(user, 0.0) + gpus * min(span, MINUTE) / 3600
        return out
