"""What a reservation would cost the queue: ``berth simulate --what-if --reserve-gpus 2
--reserve-start tomorrow...``. The queue is replayed twice by :func:`berth.sim.whatif.predict`
(the core's ``schedule()``, every job running until its time limit), without and with the
reservation, and each pending job's predicted start compared: which jobs start later, by how
much in all (and in GPU-hours: the delay times the GPUs the job waits for), the longest delay,
and which would not start within the horizon at all.

Pure (no clock, no I/O): the caller gives the jobs, the GPUs, ``now`` and the reservations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from berth.core.inventory import Gpu
from berth.core.job import Job
from berth.core.reservations import Window
from berth.sim.whatif import predict


@dataclass(frozen=True, slots=True)
class Delay:
    """A pending job's predicted start without (``before``) and with (``after``) the
    reservation (None: not within the horizon)."""

    job_id: int
    gpus: float
    before: float | None
    after: float | None

    @property
    def delay(self) -> float | None:
        """How much later it starts (None: it no longer starts within the horizon)."""
        if self.after is None:
            return None if self.before is not None else 0.0
        return 0.0 if self.before is None else max(0.0, self.after - self.before)


def choose(
    inventory: Sequence[Gpu], count: int, start: float, end: float, windows: Sequence[Window]
) -> tuple[int, ...]:
    """``count`` GPUs for a new reservation from ``start`` to ``end``, as the daemon picks
    them: the lowest indices no overlapping reservation holds (fewer if there are not so
    many)."""
    taken = {g for w in windows if w.start < end and start < w.end for g in w.gpus}
    free = sorted(g.index for g in inventory if g.index not in taken)
    return tuple(free[:count])


def cost(
    pending: Sequence[Job],
    running: Sequence[Job],
    inventory: Sequence[Gpu],
    now: float,
    window: Window,
    *,
    reservations: Sequence[Window] = (),
    **kw: Any,
) -> list[Delay]:
    """Each pending job's start without and with ``window`` (``reservations``: those kept
    already; ``kw``: :func:`predict`'s other arguments)."""
    base = predict(pending, running, inventory, now, reservations=reservations, **kw)
    more = predict(pending, running, inventory, now, reservations=[*reservations, window], **kw)
    return [
        Delay(j.id, j.request.gpu_amount, base[j.id].start, more[j.id].start)
        for j in pending
        if j.id in base and j.id in more
    ]


def summary(delays: Sequence[Delay]) -> dict[str, Any]:
    """The cost in numbers: pending jobs, those delayed, total and longest delay (seconds), GPU-hours of
    delay, jobs that would no longer start within the horizon."""
    later = [d for d in delays if (x := d.delay) is not None and x > 1.0]
    never = [d.job_id for d in delays if d.delay is None]
    total = sum(d.delay or 0.0 for d in later)
    return {
        "pending": len(delays),
        "delayed": len(later),
        "total_delay": total,
        "max_delay": max((d.delay or 0.0 for d in later), default=0.0),
        "gpu_hours": sum((d.delay or 0.0) * d.gpus for d in later) / 3600.0,
        "never": never,
    }
