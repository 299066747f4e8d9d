"""``berth submit --unique``: the GPU Job Scheduler's job deduplication, for jobs files submitted again.

A job submitted with ``--unique`` is not queued if a job with the same identity, of the same
user, submitted with ``--unique`` or not (every job keeps its identity), is pending or
running, or has completed (and is still on record: ``--keep-finished``);
the answer names that job instead (``duplicate``). A twin that failed, timed out or was
cancelled does not count: the job is queued again, as the GPU Job Scheduler retries failed jobs.

Identity: the user, the command (argv or ``--wrap``), the working directory,
``--env-setup``, ``--conda``, and the GPU request (count or share, memory, allowed GPUs, GPU
name filter). Not the priority, name, time limit, logs, or the captured environment (which
differs from one shell to the next).
"""

from __future__ import annotations

import hashlib
from array import array

from berth.wire import cjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.wire.jobspec import JobSpec

FIELDS = ("argv", "wrap", "cwd", "env_setup", "conda", "mem", "name_filter")
# A twin in one of these states means: already done, or on its way.
BLOCKING = ("PENDING", "RUNNING", "COMPLETING", "COMPLETED")


def key(uid: int, spec: JobSpec) -> str:
    """The identity of ``spec`` submitted by ``uid`` (kept as the job's ``unique_key``; the
    same for the same job whatever daemon version computed it)."""
    ident: dict[str, Any] = {f: getattr(spec, f) for f in FIELDS}  # (tuples as JSON lists)
    ident["uid"] = uid
    ident["gpus"] = float(spec.gpus)
    ids = spec.gpu_ids
    ident["gpu_ids"] = None if ids is None else sorted(ids)
    return hashlib.sha256(cjson.dumps_sorted(ident).encode()).hexdigest()[:32]


def note_until_durable(engine: Engine, k: str, job_id: int) -> None:
    """Job ``job_id`` has the identity ``k`` (its ``unique_key``): kept in memory until the
    job is durable, then found by the store's index (:func:`newest`). Kept for good, every
    job's identity cost the daemon ~130 bytes for its life (13 MB for 100,000 lines of a jobs
    file, more with every one)."""
    noted = Noted(engine)
    noted.add(k, job_id)
    noted.until_durable()


class Noted:
    """The identities of one request's jobs (a jobs file's), each kept in memory until the
    request is durable (:func:`note_until_durable`), then forgotten together: one action a
    request, not one closure (its function and cells: ~340 bytes) a job, held until the
    commit (issue 35: what a request's burst leaves in the daemon's memory)."""

    __slots__ = ("engine", "ids", "keys")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.keys: list[str] = []
        self.ids = array("q")

    def add(self, k: str, job_id: int) -> None:
        self.engine.note_unique(k, job_id)
        self.keys.append(k)
        self.ids.append(job_id)

    def until_durable(self) -> None:
        """Forget them once everything queued so far is durable (called in the turn of the
        loop that queued the request's last job: its commit)."""
        if self.keys:
            self.engine.journal.after_commit(self._forget)

    def _forget(self) -> None:
        unique = self.engine.unique
        for k, job_id in zip(self.keys, self.ids, strict=True):
            if unique.get(k) == job_id:
                del unique[k]


def newest(engine: Engine, k: str) -> tuple[int, str] | None:
    """(id, state) of the newest job with the identity ``k``: from memory (a job not durable
    yet, or a watched line's), else the store; its state as the engine has it where it can."""
    job_id = engine.unique_job(k)
    if job_id is not None:
        state = engine.state_of(job_id)
        if state is not None:
            return job_id, state.value
    found = engine.store.twin(k)
    if found is not None:
        state = engine.state_of(found[0])
        if state is not None:  # (a change not durable yet: the engine's is the newer)
            return found[0], state.value
    return found


async def twin(engine: Engine, k: str) -> dict[str, Any] | None:
    """The reply for a duplicate of a job submitted with ``unique`` whose identity is ``k``
    (:func:`key`), or None if it is new."""
    found = newest(engine, k)
    if found is None or found[1] not in BLOCKING:
        return None
    job_id, state = found
    await engine.durable()  # (a twin submitted in this very turn is not written yet)
    other = engine.store.spec(job_id)
    return {
        "job_id": job_id,
        "duplicate": True,
        "state": state,
        "stdout": other.stdout_path,
        "stderr": other.stderr_path,
    }
