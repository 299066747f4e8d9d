"""Each running job's peak GPU memory (issue 33.3, for :mod:`.learned`): at each poll the
enforcer classes every GPU process with its holder, through NVML and /proc
(:mod:`berth.daemon.engine.enforcer`); the memory a job's processes use together on one GPU,
the most seen so far, is kept as ``Job.extra["peak_mem"]`` (bytes), saved with the job. What
berth measured, never what the job or its user wrote. (No engine here: the enforcer is one of
its parts, and this module its helper.)"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from berth.core.enforce import Finding
    from berth.core.job import Job


def note(jobs: Mapping[int, Job], found: Iterable[Finding]) -> None:
    """One poll's classed processes: each job's peak so far."""
    used: dict[tuple[str, int], int] = {}
    for f in found:
        if f.holder is not None and f.holder.startswith("job "):
            used[(f.holder, f.gpu)] = used.get((f.holder, f.gpu), 0) + f.memory
    for (holder, _), mem in used.items():
        job = jobs.get(int(holder.split()[1]))
        if job is not None and mem > int(job.extra.get("peak_mem") or 0):
            job.extra["peak_mem"] = mem
