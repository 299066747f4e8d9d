"""An attempt whose supervisor died without a record (``kill -9``, a crash) is recorded
``LOST``, but only once what it left running has ended (the processes :mod:`reap
<berth.daemon.procs.reap>` finds, through the engine's process port: SIGTERM, SIGKILL after
the daemon's ``kill_after``). Until then the job stays as it was, RUNNING on its GPUs, so no
pass gives them to another job while its processes still use them (a job that ignores
SIGTERM to save a checkpoint lives on for the whole grace)."""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from berth.core.job import Job
    from berth.daemon.ports import Processes

log = logging.getLogger("berth.daemon")

# A cancel's answer while :func:`lose` ends a job's leftovers (it is RUNNING until LOST).
ENDING = ("being ended: its supervisor died; what it left gets SIGTERM, then SIGKILL after "
          "--kill-after, then it is LOST")  # fmt: skip


def lose(
    procs: Processes, job: Job, path: str, why: str, grace: float, record: Callable[[str], None],
    ending: set[int],
) -> None:  # fmt: skip
    """End what the attempt of run file ``path`` left, then ``record(reason)`` (at once if
    nothing was left; else once the last process signalled has ended). Meanwhile the job is
    in ``ending`` (a cancel of it answers :data:`ENDING`)."""
    ended: list[int] = []
    ending.add(job.id)

    def lost() -> None:
        ending.discard(job.id)
        n = f"; its {len(ended)} process(es) were ended" if ended else ""
        record(f"{why} without a record{n}")

    ended += procs.end_leftovers(path, job.uid, job.extra.get("lease"), grace, lost)
    if not ended:
        return lost()
    log.warning("job %d: ending %d process(es) its supervisor left: %s", job.id, len(ended), ended)
    return None
