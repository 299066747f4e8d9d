"""What the engine asks of the world, behind two ports it is given: a clock and its processes.

The engine (:mod:`berth.daemon.engine.engine` and its halves) decides and records; it calls no
``os`` function on processes or run files and reads no clock itself. Everything it does to
the processes that run its jobs goes through a :class:`Processes` port, and every time it
records comes from a :class:`Clock`, as supervisord's engine goes through its ``options``
object. The real ones are the defaults (:class:`SystemClock`, and
:class:`berth.daemon.procs.port.Supervisors`); a test gives fakes and drives whole passes
(starts, time limits, deaths, requeues) without forking anything.

The process port is as coarse as the engine's own view of processes: the engine never forks
or waits for a job; it hands an attempt to a supervisor (which starts it once its start gate
opens, :mod:`berth.daemon.supervisor.gate`), orders it (terminate, signal), hears how it ended (or that
its supervisor died), adopts the supervisors of a previous daemon, reads what their run
files say, and ends what a dead supervisor left. What each of those means on the machine
(channels, run files and their locks, pidfds, ``/proc``) is the port's business.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    Owner = tuple[int | None, int | None, str | None]  # uid, gid, user name
    OnDone = Callable[[int, int, dict[str, Any]], None]  # job, attempt, result
    OnGone = Callable[[int, int, str, bool], None]  # job, attempt, why, started
    OnExit = Callable[[int], None]  # job: its adopted supervisor has exited
else:
    Protocol = object


# Why an attempt ended whose supervisor died (end of file on its channel, no ``fatal`` said
# before): killed, not refused; an attempt it never let pass its gate may run again.
SUPERVISOR_DIED = "its supervisor died"


class LiveAttempt:
    """One attempt (the job's :class:`~berth.core.job.Attempt`) as it lives in the daemon:
    its runtime handles (never persisted): where its run file is, the id of its claim
    (``lease_id``), the port's handle on the supervisor that runs it, and the pids of the
    supervisor and the job once known."""

    __slots__ = ("attempt", "handle", "job_pid", "lease_id", "path", "sup_pid")

    def __init__(
        self,
        path: str,
        attempt: int,
        lease_id: str | None,
        handle: Any,
        sup_pid: int | None = None,
    ) -> None:
        self.path = path
        self.attempt = attempt
        self.lease_id = lease_id
        self.handle = handle  # the port's (a pool slot, an adopted supervisor's pidfd...)
        self.job_pid: int | None = None  # (from the run file, once written)
        self.sup_pid = sup_pid


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch: the time the engine records and decides by."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()


class Processes(Protocol):
    """The processes that run the engine's jobs (see the module)."""

    def listen(self, on_done: OnDone, on_gone: OnGone, on_exit: OnExit) -> None:
        """Tell the engine how attempts end: ``on_done(job, attempt, result)`` (the result
        its supervisor reported), ``on_gone(job, attempt, why, started)`` (its supervisor
        died; ``started``: False if it never existed), ``on_exit(job)`` (an adopted
        supervisor has exited)."""
        ...

    def gate(self) -> tuple[int, int]:
        """A new start gate: (read end, sent with the attempt; write end, for the journal)."""
        ...

    def close(self, fd: int) -> None:
        """Close a gate's end."""
        ...

    def start(
        self,
        owner: Owner,
        job_id: int,
        attempt: int,
        spec: dict[str, Any],
        fds: list[int],
        lease_id: str | None,
        gpus: list[int],
    ) -> LiveAttempt:
        """Hand an attempt (its launch spec; ``fds``: its gate's read end, then its claims;
        ``gpus``: the NVML indices of its GPUs) to a supervisor of ``owner``, which prepares it
        and waits at the gate. The caller closes its copies of ``fds``. Raises OSError if it
        cannot."""
        ...

    def order(self, run: LiveAttempt, job_id: int, op: str, sig: int = 0) -> None:
        """``term`` (SIGTERM to the job's group, SIGKILL after its grace) or ``signal``
        ``sig`` to the job's group, for the attempt ``run``."""
        ...

    def adopt(
        self, job_id: int, attempt: int, pid: int, path: str, lease_id: str | None
    ) -> LiveAttempt:
        """Watch the supervisor ``pid`` a previous daemon left running ``path``'s attempt;
        ``on_exit`` follows its exit. Raises ProcessLookupError if it has gone."""
        ...

    def run_file(self, job_id: int, attempt: int) -> str:
        """Where an attempt's run file is."""
        ...

    def record(self, path: str) -> dict[str, Any]:
        """What a run file says (:func:`berth.daemon.supervisor.runfile.read_run_file`)."""
        ...

    def alive(self, path: str) -> bool:
        """Whether a supervisor is still at the attempt of this run file."""
        ...

    def end_leftovers(
        self, path: str, uid: int, lease_id: str | None, grace: float,
        then: Callable[[], None] | None = None,
    ) -> list[int]:  # fmt: skip
        """End what the attempt of ``path`` left running when its supervisor died (SIGTERM,
        SIGKILL after ``grace``); the pids signalled. ``then``: called once they have all
        ended (never if none was signalled)."""
        ...

    def retire(self, path: str, leftovers: bool) -> None:
        """The attempt's end is durable: its run file (and, if ``leftovers``, its ``.sig``
        and ``.pty`` files) may go."""
        ...

    def discard(self, path: str) -> None:
        """Remove the run file of an attempt that never ran."""
        ...

    def discard_strays(self, keep: set[str]) -> None:
        """Remove the run files of attempts not in ``keep`` (paths) that no supervisor
        holds (start-up: starts that never became durable)."""
        ...

    def notify(self, owner: Owner, msg: dict[str, Any]) -> None:
        """Run a job's notifications as ``owner`` (:mod:`berth.daemon.engine.notify`)."""
        ...
