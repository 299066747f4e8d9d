"""Job arrays in the daemon (``berth submit --array 0-9%2``): one job per task, their ids
consecutive, the first task's id being the array's id (as Slurm numbers them).

Task ``k`` (in increasing index order) of array ``A`` is job ``A + k``; it keeps its array
id and index in ``Job.extra["array"] = [A, index]``, and the array's head (job ``A``) also
keeps the whole spec (``extra["array_spec"]``: ``0-9%2``), so ``A_7`` is found without a scan.
All tasks are inserted in one turn of the loop, hence one commit: all durable, or none.
A throttle ``%K`` becomes the core's group limit (:mod:`berth.core.groups`), group
``array:A``.

Ids: ``A`` names the whole array where a request acts on jobs (``cancel``, ``hold``,
``release``, dependencies: ``afterok:A`` waits for every task), as ``scancel A`` does; ``A_7``
names one task, anywhere a job id is taken (:func:`resolve`).
"""

from __future__ import annotations

from berth.core.job import Job
from berth.wire import protocol
from berth.wire.arrays import ArraySpec
from berth.wire.checks import MAX_ID, integer
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine


def indices(text: str) -> tuple[list[int], int | None]:
    """(task indices, throttle) of a validated spec."""
    spec = ArraySpec.parse(text)
    return list(spec.indices), spec.throttle


def group(array_id: int) -> str:
    return f"array:{array_id}"


def of(job: Job) -> tuple[int, int] | None:
    """(array id, task index) of a task, or None."""
    a = job.extra.get("array")
    return (int(a[0]), int(a[1])) if isinstance(a, list) and len(a) == 2 else None


def members(engine: Engine, array_id: int) -> list[int] | None:
    """The job ids of array ``array_id``'s tasks still on record (None if it is no array)."""
    head = engine.find(array_id)
    if head is None or head.extra.get("array_spec") is None:
        return None
    n = len(indices(str(head.extra["array_spec"]))[0])
    out = []
    for job_id in range(array_id, array_id + n):
        if engine.state_of(job_id) is not None:
            out.append(job_id)
        elif engine.store.job(job_id) is not None:
            out.append(job_id)
    return out


def expand(engine: Engine, ids: list[int]) -> list[int]:
    """``ids`` with each array's id replaced by all its tasks (order kept, no repeats)."""
    out: dict[int, None] = {}
    for job_id in ids:
        tasks = members(engine, job_id)
        for t in tasks if tasks else [job_id]:
            out[t] = None
    return list(out)


def resolve(engine: Engine, ref: Any, field: str = "job_id") -> int:
    """A job id as a client sent it: an integer, or ``"A_T"`` (task T of array A); any
    other string is refused (``"1"`` is not a job id: the checks are by exact type)."""
    if type(ref) is not str:
        return integer(field, ref, 1, MAX_ID)
    head, us, task = ref.partition("_")
    if not (ref.isascii() and us and head.isdigit() and task.isdigit()) or len(ref) > 40:
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"{field} = {ref!r}: expected a job id (an integer: 12) or a task ('12_3')",
        )
    array_id = integer(field, int(head), 1, MAX_ID)
    job = engine.find(array_id)
    spec = None if job is None else job.extra.get("array_spec")
    if spec is None:
        raise ProtocolError(protocol.NO_SUCH_JOB, f"no array {array_id}: see `berth queue --all`")
    order = indices(str(spec))[0]
    want = int(task)
    if want not in order:
        shown = str(spec).partition("%")[0]
        raise ProtocolError(
            protocol.NO_SUCH_JOB, f"array {array_id} has no task {want} (its tasks: {shown})"
        )
    return array_id + order.index(want)


def resolve_all(engine: Engine, refs: Any) -> list[int]:
    """``job_ids`` of a request acting on jobs: integers (an array's id: all its tasks) and
    ``"A_T"`` tasks."""
    if refs is None:
        return []
    if type(refs) is not list:
        raise ProtocolError(protocol.BAD_REQUEST, "job_ids must be a list of job ids")
    out: list[int] = []
    for ref in refs:
        if type(ref) is str:
            out.append(resolve(engine, ref, "job_ids"))
        else:
            out += expand(engine, [resolve(engine, ref, "job_ids")])
    return list(dict.fromkeys(out))


def task(array_id: int, order: list[int], k: int) -> tuple[int, int, int, int, int]:
    """Task ``k`` of the array, as its spec's ``array_task`` (what the launcher gives the job):
    (array id, task index, count, lowest index, highest index)."""
    return (array_id, order[k], len(order), order[0], order[-1])
