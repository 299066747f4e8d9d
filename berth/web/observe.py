"""What the dashboard and /metrics count about jobs: starts and ends as they are committed.

The :class:`Observer` follows the engine's journal: after each commit it is handed the jobs
whose new state is durable (the front's ``follow``: chained to ``Journal.on_committed``, after
the engine's own callback), and reads their attempts. From them:

- **wait time**: an attempt's start minus the time the job (last) joined the queue;
- **dispatch gap**: on a GPU freed by an ending attempt, the time until the next attempt
  started on it, counted only when that job was already waiting when the GPU was freed (so
  it measures how long a free GPU and a waiting job stay apart, not how long the queue was
  empty);
- **outcomes**: jobs that finished, by final state; the last few finished jobs for the page.

Counts start when the daemon starts (Prometheus counters reset with the process). The
observer never changes a job, and a failure in it is logged, never raised into the journal.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from berth.core.states import FINISHED, State
from berth.daemon.engine import views

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from berth.core.job import Attempt, Job
    from berth.daemon.engine.front import Front

log = logging.getLogger("berth.daemon")

WAIT_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)
GAP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RECENT = 25  # finished jobs kept for the page


class Histogram:
    """A Prometheus histogram: per-bucket counts (not cumulative), sum, count."""

    __slots__ = ("buckets", "count", "counts", "sum")

    def __init__(self, buckets: Iterable[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        k = 0
        while k < len(self.buckets) and value > self.buckets[k]:
            k += 1
        self.counts[k] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) per bucket, ending with +Inf."""
        out, total = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else f"{bound:g}", total))
        return out


class Observer:
    def __init__(self, front: Front) -> None:
        self.front = front
        self.started_at = time.time()
        self.wait = Histogram(WAIT_BUCKETS)
        self.gap = Histogram(GAP_BUCKETS)
        self.finished: dict[str, int] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.listeners: list[Callable[[], None]] = []  # told after every commit
        self._started: dict[int, int] = {}  # job id -> highest attempt seen started
        self._ended: dict[int, int] = {}  # job id -> highest attempt seen ended
        self._live: set[int] = set()  # unfinished jobs known
        self._freed: dict[int, float] = {}  # GPU index -> when an attempt last left it
        for job in front.view("unfinished"):  # what ran before we looked is not counted
            self._seen(job)

    def attach(self) -> None:
        """Follow the engine's commits from now on."""

        def observe(inserted: list[Job], saved: list[Job], ok: bool) -> None:
            try:
                self.committed(inserted, saved, ok)
            except Exception:
                log.exception("web: observing a commit failed")

        self.front.follow(observe)

    def load_recent(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.recent.appendleft(row)

    def _seen(self, job: Job) -> None:
        self._live.add(job.id)
        if job.attempts:
            last = job.attempts[-1]
            self._started[job.id] = last.number
            if last.end is not None:
                self._ended[job.id] = last.number

    def committed(self, inserted: list[Job], saved: list[Job], ok: bool) -> None:
        if not ok:
            return
        for job in inserted:
            self._live.add(job.id)
        events: list[tuple[float, int, Job, Attempt]] = []
        for job in saved:
            if job.state in FINISHED and job.id not in self._live:
                continue  # (a finished job saved again, a note after its end: seen already)
            for a in job.attempts:
                if a.number > self._started.get(job.id, 0):
                    events.append((a.start, 1, job, a))
                if a.end is not None and a.number > self._ended.get(job.id, 0):
                    events.append((a.end, 0, job, a))  # (an end frees before a start takes)
        events.sort(key=lambda e: (e[0], e[1]))
        for when, kind, job, a in events:
            if kind == 0:
                self._ended[job.id] = a.number
                for g in a.gpus:
                    self._freed[g] = when
            else:
                self._started[job.id] = a.number
                self._on_start(job, a)
        for job in saved:
            if job.state in FINISHED and job.id in self._live:
                self._live.discard(job.id)
                self._started.pop(job.id, None)
                self._ended.pop(job.id, None)
                self.finished[job.state.value] = self.finished.get(job.state.value, 0) + 1
                self.recent.appendleft(views.row(job, None))
        if inserted or saved:
            for listener in self.listeners:
                listener()

    def _on_start(self, job: Job, a: Attempt) -> None:
        self.wait.observe(a.start - _queued_at(job, a))
        for g in a.gpus:
            freed = self._freed.pop(g, None)
            if freed is not None and _queued_at(job, a) <= freed <= a.start:
                self.gap.observe(a.start - freed)

    def queue_counts(self) -> dict[str, int]:
        """Unfinished jobs by state (every state named, 0 included)."""
        counts = {s.value: 0 for s in (State.PENDING, State.RUNNING, State.COMPLETING)}
        for job in self.front.view("unfinished"):
            counts[job.state.value] = counts.get(job.state.value, 0) + 1
        counts["HELD"] = sum(
            1 for j in self.front.view("unfinished") if j.state is State.PENDING and j.held
        )
        return counts


def _queued_at(job: Job, a: Attempt) -> float:
    """When the job joined the queue for this attempt: its submission for the first, else the
    end of the attempt before (a requeue or retry)."""
    if a.number <= 1 or len(job.attempts) < 2:
        return job.submit_time
    before = [p for p in job.attempts if p.number == a.number - 1]
    if before and before[0].end is not None:
        return float(before[0].end)
    return job.queue_time
