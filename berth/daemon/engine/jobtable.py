"""The engine's unfinished jobs by id, with how many each user has (``max_jobs``) and the
bytes their specs keep in the store (``max_user_bytes``: ``Job.extra["bytes"]``, set at
submit and read there again as the job leaves: not kept twice), and one copy of what many
jobs have alike (their name, their request, their ``extra``).

Counting a user's jobs by walking every unfinished job made each submit O(queue): 100,000
pipelined submits took minutes. The table keeps the count as jobs come and go. And 100,000
jobs of one sweep each kept their own equal name and request (~150 bytes a job):
:meth:`JobTable.shared` gives them one; and one ``extra`` (~100 bytes a job: a
:class:`~berth.core.job.SharedExtra`, changed through ``Job.note``) to the jobs whose
``extra`` is equal and of plain values (the CLI's jobs: ``{"bytes": N}``).
"""

from __future__ import annotations

from collections import Counter
from typing import TypeVar

from berth.core.job import Job, SharedExtra

T = TypeVar("T")
K = TypeVar("K")
POOL = 4096  # distinct names and requests kept (a hostile mix of them costs nothing more)
_SCALARS = (str, int, bool, float, type(None))  # an extra of these only is shared


class JobTable(dict[int, Job]):
    """A dict of job id -> unfinished job that also counts the jobs of each uid and of each
    project, and gives
    each job put in it the shared copy of its name and request. Only the mutators the
    engine uses are supported (set, delete, pop); the rest are refused."""

    def __init__(self) -> None:
        super().__init__()
        self._per_uid: Counter[int] = Counter()
        self._per_project: Counter[str] = Counter()
        self._bytes_per_uid: Counter[int] = Counter()
        self._pool: dict[object, object] = {}

    def shared(self, key: object, value: T) -> T:
        """The value kept for ``key`` (a value equal to ``value``, immutable), or ``value``,
        kept from now on. Bounded: the pool starts again past :data:`POOL` keys."""
        found = self._pool.get(key)
        if found is not None:
            return found  # type: ignore[return-value]
        if len(self._pool) >= POOL:
            self._pool.clear()
        self._pool[key] = value
        return value

    def count_of(self, uid: int) -> int:
        """How many unfinished jobs ``uid`` has."""
        return self._per_uid[uid]

    def bytes_of(self, uid: int) -> int:
        """The bytes ``uid``'s unfinished jobs keep in the store (``max_user_bytes``)."""
        return self._bytes_per_uid[uid]

    def projects(self) -> dict[str, int]:
        """How many unfinished jobs each project has (a copy: ``max_queued``)."""
        return dict(self._per_project)

    def __setitem__(self, job_id: int, job: Job) -> None:
        old = self.get(job_id)
        if old is not None:
            self._drop(old)
        r = job.request  # (never changed in place: berth.core.change replaces it)
        key = ("request", r.gpus, r.mem, r.gpu_ids, r.prefer, r.name, r.cpu, r.ram, r.each)
        job.request = self.shared(key, r)
        job.name = self.shared(("name", job.name), job.name)
        extra = job.extra
        if type(extra) is dict and all(type(v) in _SCALARS for v in extra.values()):
            plain: tuple[object, ...] = ("extra", *extra.items())
            found = self._pool.get(plain)  # (found: no SharedExtra made for nothing)
            job.extra = found if found is not None else self.shared(plain, SharedExtra(extra))  # type: ignore[assignment]
        super().__setitem__(job_id, job)
        self._per_uid[job.uid] += 1
        if job.project:
            self._per_project[job.project] += 1
        size = _size(job)
        if size:
            self._bytes_per_uid[job.uid] += size

    def __delitem__(self, job_id: int) -> None:
        job = self[job_id]
        super().__delitem__(job_id)
        self._drop(job)

    def pop(self, job_id: int, *default: Job | None) -> Job | None:  # type: ignore[override]
        if job_id not in self:
            if default:
                return default[0]
            raise KeyError(job_id)
        job = self[job_id]
        del self[job_id]
        return job

    def _drop(self, job: Job) -> None:
        _less(self._per_uid, job.uid)
        size = _size(job)  # (set at submit, never changed: read again, not kept twice)
        if size:
            _less(self._bytes_per_uid, job.uid, size)
        if job.project:
            _less(self._per_project, job.project)

    def _refused(self, *_: object, **__: object) -> None:
        raise TypeError("JobTable: use item assignment, del or pop")

    update = setdefault = popitem = clear = _refused  # type: ignore[assignment]


def _size(job: Job) -> int:
    """The bytes ``job``'s spec keeps in the store (``Job.extra["bytes"]``), or 0."""
    size = job.extra.get("bytes")
    return size if type(size) is int and size > 0 else 0


def _less(counts: Counter[K], key: K, by: int = 1) -> None:
    n = counts[key] - by
    if n > 0:
        counts[key] = n
    else:
        del counts[key]
