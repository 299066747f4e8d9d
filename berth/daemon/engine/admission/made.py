"""What a prepared request's jobs are made of (:func:`.admit.insert`): the ``extra`` its jobs
share, each job's own (an array's tasks after the first: a
:class:`~berth.core.job.TaskExtra`, no dict of their own), the spec fields a job does not
share (its logs; a task's ``array_task``, its command under `berth sweep`), made for one job
when asked (:class:`~berth.daemon.store.tasks.Tasks`: an array holds one spec until its
commit, not one a task), and the request's answer (issue 35: a request's memory)."""

from __future__ import annotations

import os

from berth.core.job import SharedExtra, TaskExtra
from berth.core.runtimes import script_of
from berth.daemon.engine.admission import arrays, fitness, learned
from berth.daemon.engine.admission.userdir import expand_pattern
from berth.wire.jobsize import TASK_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from berth.daemon.engine.admission.prepared import Prepared
    from berth.daemon.engine.engine import Engine
    from berth.wire.jobspec import JobSpec


def name_of(spec: JobSpec) -> str:
    """The jobs' name: ``--job-name``, else the command's."""
    return spec.name or (os.path.basename(spec.argv[0]) if spec.argv else "wrap")


def extras(p: Prepared, base: int, order: list[int]) -> Iterator[dict[str, Any]]:
    """Each job's ``extra``, in order: the request's (what learned run times and `berth queue`
    read without the spec), its bytes in the store; an array's first task its own dict with
    ``array`` and ``array_spec``, the others one :class:`TaskExtra` each."""
    spec = p.spec
    script = None if spec.name else script_of(spec.argv)  # (learned run times' key)
    extra: dict[str, Any] = {"script": script} if script else {}
    if spec.pty:
        extra["pty"] = True  # (`berth queue --pty` lists these without reading specs)
    if spec.notify or spec.mail_user:
        extra["notify"] = True
    if spec.dependency is not None:
        extra["dependency"] = spec.dependency  # (as written, @ resolved: queue --tree, --json)
    extra.update(learned.extra(spec, p.learned))  # (what sized it; --retry-oom)
    first = {**extra, "bytes": p.stored - TASK_BYTES * (len(order) - 1)}
    if p.array:
        first.update(array=[base, order[0]], array_spec=p.array)
    yield first
    common = SharedExtra({**extra, "bytes": TASK_BYTES})  # (an array's tasks after its first)
    for index in order[1:]:
        yield TaskExtra(common, base, index)


def own_fields(
    p: Prepared, user: str, base: int, order: list[int]
) -> Callable[[int], dict[str, Any]]:
    """The spec fields job ``job_id`` of the request does not share with the others."""
    out, err, array, argvs, cwd = p.out, p.err, p.array, p.argvs, p.spec.cwd

    def own(job_id: int) -> dict[str, Any]:
        k = job_id - base
        where = (base, order[k]) if array else None
        path = expand_pattern(out, job_id, cwd, user, where)  # (-e: err's own)
        mine: dict[str, Any] = {"stdout_path": path, "stderr_path": path if err == out else
                                expand_pattern(err, job_id, cwd, user, where)}  # fmt: skip
        if array:
            mine["array_task"] = arrays.task(base, order, k)
            if argvs is not None:
                mine["argv"] = argvs[k]
        return mine

    return own


def reply(
    engine: Engine, p: Prepared, user: str, base: int, order: list[int], single: JobSpec | None
) -> dict[str, Any]:
    """The request's answer: its id (an array's tasks), its limit in force, its logs."""
    spec, out, err = p.spec, p.out, p.err
    said: dict[str, Any] = {"job_id": base, **({"learned": p.learned} if p.learned else {})}
    said.update(fitness.limit_in_force(spec.time_limit, engine.opts.max_job_time))
    if p.array:
        said["array"] = p.array
        said["tasks"] = [f"{base}_{i}" for i in order]
        pattern = (base, "%a")  # (each task's index)
        said["stdout"] = expand_pattern(out, base, spec.cwd, user, pattern)
        said["stderr"] = expand_pattern(err, base, spec.cwd, user, pattern)
    elif single is not None:
        said.update(stdout=single.stdout_path, stderr=single.stderr_path)
    return said
