"""A job's ``--dependency`` on Slurm (:mod:`berth.dependency`): the ids are Slurm's own
(berth's Slurm backend shows and takes Slurm's ids, ``12`` and ``12_3``), so they, ``?`` and
``singleton`` go to sbatch as written; ``@`` (your last submitted job) becomes the newest job
berth submitted for you to Slurm, by the record each submission leaves in berth's Slurm log
dir (:mod:`berth.backends.slurm`). sbatch gets ``--kill-on-invalid-dep=yes``: a dependency
that can never be met cancels the job, as on the local queue."""

from __future__ import annotations

import os

from berth.dependency import LAST, parse_dependency
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.wire.jobspec import JobSpec


def last_submitted(log_dir: str) -> str | None:
    """The Slurm id of the newest job berth submitted from this log dir, or None."""
    newest: tuple[float, int, str] | None = None
    try:
        entries = list(os.scandir(log_dir))
    except OSError:
        return None
    for e in entries:
        stem = e.name.removesuffix(".json")
        if stem == e.name or not stem.isdigit():
            continue
        try:
            key = (e.stat().st_mtime, int(stem), stem)
        except OSError:
            continue
        if newest is None or key > newest:
            newest = key
    return None if newest is None else newest[2]


def resolved(job: JobSpec, log_dir: str) -> JobSpec:
    """``job`` with the ``@`` of its dependency made the Slurm id it stands for."""
    if job.dependency is None:
        return job
    text = resolved_text(job.dependency, log_dir)
    return job if text == job.dependency else job.replace(dependency=text)


def resolved_text(text: str, log_dir: str) -> str:
    """The dependency ``text`` with its ``@`` made the Slurm id it stands for."""
    dep = parse_dependency(text)
    if LAST not in dep.jobs():
        return text
    last = last_submitted(log_dir)
    if last is None:
        raise UsageError(
            f"dependency {text}: @ is your last job submitted with berth, and "
            f"{log_dir} records none; name the job by its Slurm id"
        )
    return str(dep.with_jobs(lambda j: last if j == LAST else j))


def named(job: JobSpec) -> list[str]:
    """The Slurm ids the job's dependency names (``@`` resolved first: :func:`resolved`)."""
    return [] if job.dependency is None else parse_dependency(job.dependency).jobs()
