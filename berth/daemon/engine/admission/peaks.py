"""Each running job's peak GPU memory (issue 33.3, for :mod:`.learned`): at each poll the
enforcer classes every GPU process with its holder, through NVML and /proc
(:mod:`berth.daemon.engine.enforcer`); the memory a job's processes use together on one GPU,
the most seen so far, is kept as ``Job.extra["peak_mem"]`` (bytes), saved with the job, and
with it the job's kind (``Job.extra["learn"]``, :func:`key`: whose later runs it sizes). What
berth measured, never what the job or its user wrote. Only a job seen using GPU memory
carries either (a queue of 100,000 pending jobs carries nothing more). (No engine here: the
enforcer is one of its parts, and this module its helper.)"""

from __future__ import annotations

import hashlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from berth.core.enforce import Finding
    from berth.core.job import Job
    from berth.wire.jobspec import JobSpec


def key(uid: int, spec: JobSpec) -> str:
    """Which job this is for learning: its user and its name, else its command line (any
    string: a name that is not UTF-8 comes as surrogates)."""
    what = f"name:{spec.name}" if spec.name else f"cmd:{spec.command}"
    return hashlib.sha256(f"{uid}\0{what}".encode(errors="surrogatepass")).hexdigest()[:16]


def note(
    jobs: Mapping[int, Job], found: Iterable[Finding], spec: Callable[[int], JobSpec | None]
) -> None:
    """One poll's classed processes: each job's peak so far (``spec``: a job's stored spec,
    read once, when it is first seen using memory; None: unreadable)."""
    used: dict[tuple[str, int], int] = {}
    for f in found:
        if f.holder is not None and f.holder.startswith("job ") and f.memory > 0:
            used[(f.holder, f.gpu)] = used.get((f.holder, f.gpu), 0) + f.memory
    for (holder, _), mem in used.items():
        job = jobs.get(int(holder.split()[1]))
        if job is None or mem <= int(job.extra.get("peak_mem") or 0):
            continue
        if "learn" not in job.extra:
            stored = spec(job.id)
            if stored is None:
                continue
            job.note("learn", key(job.uid, stored))
        job.note("peak_mem", mem)
