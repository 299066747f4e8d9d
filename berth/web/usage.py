"""What the dashboard's ticks leave for `berth report` (schema 9,
:mod:`berth.daemon.store.summaries`): each job's sampled utilisation and memory, and the
GPU-seconds of outside use (processes not under berth), per user and GPU model. (Claims
outside the queue the engine follows itself, dashboard or not: ``Accounts.claims_ended``.)

Every tick adds, for each GPU that reports it, per job holding it: the GPU-seconds sampled
(the tick's length times the job's share), its utilisation weighed by them, the memory its
processes use (else the GPU's, as a fraction) weighed alike, and the peaks; per outside
user the GPU-seconds held, per hour (the hour's start in the summaries' ``day``
column). Each minute (``[daemon] usage_flush``: at the ticks that start a new period of that
length) the sums go to the store through the journal (:meth:`Usage.flush`) and start again,
so a job's totals are exact across restarts but for the period in hand. Samples exist only
while the daemon serves --http: a report says how much of the held time was sampled.
"""

from __future__ import annotations

from berth.daemon.store import summaries

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Usage:
    def __init__(self, tick: float, every: float = 60.0) -> None:
        self.tick = tick
        self.every = every  # seconds between flushes ([daemon] usage_flush)
        self._period: float | None = None  # the period the last tick was in
        self.jobs: dict[int, list[float]] = {}  # id -> [sampled, util, mem, peak util, peak mem]
        self.held: dict[tuple[float, str, str, str], float] = {}  # (hour, kind, user, model) -> s
        self._last: float | None = None

    def add(self, t: float, gpus: list[dict[str, Any]]) -> None:
        """A tick's GPUs (:func:`berth.web.view.gpus`) at time ``t``."""
        last, self._last = self._last, t
        if last is None:
            return
        dt = min(t - last, 3 * self.tick)  # a stalled loop is not counted as use
        if dt <= 0:
            return
        hour = (t // 3600) * 3600  # (claims and outside use: per hour)
        for g in gpus:
            util, total = g.get("util"), g.get("memory_total")
            gpu_mem = (g.get("memory_used") or 0) / total if total else None
            outside: set[str] = set()  # (a user's processes on one GPU count once)
            for h in g["holders"]:
                kind = h["kind"]
                if kind == "job" and util is not None:
                    share = float(h.get("share") or 1.0)
                    mem = h["mem"] / total if h.get("mem") and total else gpu_mem or 0.0
                    acc = self.jobs.setdefault(int(h["id"]), [0.0, 0.0, 0.0, 0.0, 0.0])
                    acc[0] += dt * share
                    acc[1] += float(util) * dt * share
                    acc[2] += min(1.0, mem) * dt * share
                    acc[3] = max(acc[3], float(util))
                    acc[4] = max(acc[4], min(1.0, mem))
                elif kind == "outside":
                    outside.add(str(h.get("user") or "?"))
            for user in outside:
                self._hold(hour, "outside", user, g, dt)

    def due(self, t: float) -> bool:
        """Whether the tick at ``t`` starts a new period (``every`` seconds, from the epoch:
        with the default minute, the tick that closes the dashboard's history minute): then
        what was gathered goes to the store (:meth:`flush`)."""
        period, last = t // self.every, self._period
        self._period = period
        return last is not None and period != last

    def _hold(self, hour: float, kind: str, user: Any, g: dict[str, Any], secs: float) -> None:
        key = (hour, kind, str(user or "?"), str(g.get("name") or "?"))
        self.held[key] = self.held.get(key, 0.0) + secs

    def flush(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The statements that add what was gathered since the last flush; starts again."""
        out: list[tuple[str, list[tuple[Any, ...]]]] = []
        if self.jobs:
            out.append((summaries.USAGE_SQL, [(i, *v) for i, v in self.jobs.items()]))
        if self.held:
            pieces = [
                {"day": day, "kind": kind, "user": user, "project": "", "model": model,
                 "state": "", "jobs": 0, "gpu_seconds": secs, "queued_seconds": 0.0,
                 "sampled": 0.0, "util": 0.0, "mem": 0.0}
                for (day, kind, user, model), secs in self.held.items()
            ]  # fmt: skip
            out.append((summaries.ADD_SQL, summaries.rows(pieces)))
        self.jobs, self.held = {}, {}
        return out
