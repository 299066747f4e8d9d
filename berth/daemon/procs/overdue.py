"""The daemon's own watch over time limits and cancels, for supervisors that do not keep them.

A supervisor runs as its job's user, who may stop it (``kill -STOP``) or starve it: its job
would then sit running past its time limit, or past an admin's cancel, holding its GPUs. The
supervisor's deadline is the daemon's too: an attempt still running :data:`GRACE` seconds
after its time limit and kill grace (counted from its hand-over, a little before its start),
or after a cancel and its grace, is *overdue*:

1. its supervisor gets SIGCONT (through its pidfd), and a cancel's order again (a second
   ``term`` kills the job at once);
2. still running :data:`LAST_CHANCE` seconds later, the daemon kills the supervisor and every
   process of the attempt: their cgroup (:mod:`berth.daemon.procs.cgroup`) where there is
   one; else the supervisor (pidfd), and what :mod:`berth.daemon.procs.reap` finds (the job's
   session, the holders of its claims). The attempt is recorded as timed out (or cancelled)
   once the supervisor's death is heard, with the verdict given here (its supervisor wrote
   none).

So a stopped supervisor delays a time limit or a cancel by at most ``GRACE + LAST_CHANCE``
(``[daemon] supervisor_grace`` and ``supervisor_last_chance`` set other bounds).
"""

from __future__ import annotations

import logging
import math
import signal
import time

from berth.units import KILL_AFTER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any, Protocol

    from berth.daemon.ports import LiveAttempt

    class Supervisors(Protocol):
        """What the watches ask of :class:`berth.daemon.procs.port.Supervisors` (named so,
        this module would import the one that imports it)."""

        loop: asyncio.AbstractEventLoop

        def order(self, run: LiveAttempt, job_id: int, op: str, sig: int = 0) -> None: ...

        def signal_supervisor(self, run: LiveAttempt, sig: int) -> None: ...

        def kill_attempt(self, job_id: int, run: LiveAttempt, verdict: dict[str, Any]) -> None: ...

log = logging.getLogger("berth.daemon")

GRACE = 5.0  # seconds a supervisor may be late with a time limit or a cancel
LAST_CHANCE = 3.0  # seconds between SIGCONT and the kill


class Overdue:
    """The watches of the running attempts (see the module)."""

    def __init__(
        self, procs: Supervisors, grace: float = GRACE, last_chance: float = LAST_CHANCE
    ) -> None:
        self.procs = procs
        self.grace = grace  # ([daemon] supervisor_grace)
        self.last_chance = last_chance  # ([daemon] supervisor_last_chance)
        self.loop: asyncio.AbstractEventLoop = procs.loop
        self.timers: dict[int, list[asyncio.TimerHandle]] = {}  # job -> its watches
        self.graces: dict[int, float] = {}  # job -> its kill grace
        self.cancelled: set[int] = set()  # jobs whose cancel is watched

    def started(self, job: int, run: LiveAttempt, limit: float | None, grace: float) -> None:
        """``run`` was handed over now, with time limit ``limit`` (seconds, or None) and
        kill grace ``grace``."""
        self.graces[job] = grace
        if limit and math.isfinite(limit):
            self._at(job, limit + grace + self.grace, self._late, job, run, "timeout")

    def cancel(self, job: int, run: LiveAttempt) -> None:
        """``run`` (of ``job``) was ordered to end now (the first order counts)."""
        if job not in self.cancelled:
            self.cancelled.add(job)
            grace = self.graces.get(job, KILL_AFTER)  # (adopted: its own is not known)
            self._at(job, grace + self.grace, self._late, job, run, "cancel")

    def forget(self, job: int) -> None:
        """The attempt of ``job`` has ended (or its supervisor has gone)."""
        for handle in self.timers.pop(job, ()):
            handle.cancel()
        self.graces.pop(job, None)
        self.cancelled.discard(job)

    def _at(self, job: int, delay: float, *call: Any) -> None:
        self.timers.setdefault(job, []).append(self.loop.call_later(delay, *call))

    def _late(self, job: int, run: LiveAttempt, why: str) -> None:
        log.warning(
            "job %d: its supervisor has not carried out its %s in time: continuing it "
            "(SIGCONT)", job, _WHAT[why],
        )  # fmt: skip
        self.procs.signal_supervisor(run, signal.SIGCONT)
        if why == "cancel":  # (a time limit it sees itself once continued)
            self.procs.order(run, job, "term")
        self._at(job, self.last_chance, self._kill, job, run, why)

    def _kill(self, job: int, run: LiveAttempt, why: str) -> None:
        log.error(
            "job %d: its supervisor still has not carried out its %s: killing it and every "
            "process of the job", job, _WHAT[why],
        )  # fmt: skip
        verdict = {
            "rc": 128 + signal.SIGKILL, "signal": int(signal.SIGKILL),
            "timeout": why == "timeout", "cancelled": why == "cancel", "start": None,
            "end": time.time(), "error": None,
        }  # fmt: skip
        self.procs.kill_attempt(job, run, verdict)


_WHAT = {"timeout": "time limit", "cancel": "cancel"}
