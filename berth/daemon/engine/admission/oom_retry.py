"""``--retry-oom`` (issue 33.3), as gpusched does: a job that ended FAILED and whose log says it
died of CUDA out of memory (:data:`SIGNS`: PyTorch's, TensorFlow's, the CUDA driver's and
runtime's words) is queued once more, as a new job of its user, with more: a share (``-g
0.5``, ``--mem`` alone, or a share berth learned: :mod:`.learned`) becomes whole GPUs; whole
GPUs asked with ``--mem`` below the largest card's memory ask for the largest card. A job that
had whole GPUs of the largest memory here has nothing more to get: it is not retried, and the
daemon's log says why. The retry goes through submit's own checks as its user
(:func:`~berth.daemon.engine.admission.admit.prepare`: their limits, their project); it keeps
``retry_of`` (and ``retry_why``: the line of the log) for `berth queue` and `berth show`, its
history begins ``retry of job N``, and the job it retries keeps ``oom_retried`` (the new id):
once, and never again after a restart. The retry itself is not retried.

The log is the job's own (``stdout_path``/``stderr_path``), read as its user would see it:
opened without following a symbolic link, only if it is a regular file owned by the job's
user, the last :data:`TAIL` bytes of each (on a thread: a log may be on a slow disk). What the
log says is the user's input: it can only ever get the user's own job queued again, within
their own limits.

Followed as the announcer follows commits (``Journal.on_committed``: :func:`attach`), so it
acts only on an end that is durable; the same hook gives :mod:`.learned` each completed run's
peak.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import stat

from berth.core.job import Event
from berth.core.states import FINISHED, State
from berth.daemon.engine.admission import admit, learned
from berth.daemon.engine.admission.prepared import Owner
from berth.daemon.store.store import UnreadableSpec
from berth.wire.jobspec import DAEMON_FIELDS
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.engine.engine import Engine
    from berth.wire.jobspec import JobSpec

log = logging.getLogger("berth.daemon")

TAIL = 64 << 10  # bytes read from the end of each log
SIGNS = re.compile(
    rb"CUDA out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
    rb"RESOURCE_EXHAUSTED|ResourceExhaustedError|torch\.(?:cuda\.)?OutOfMemoryError|"
    rb"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|out of memory on device"
)
# Not taken from the job it retries (its twin check, its hold and start time; the dependency
# it waited for is met; an array is refused with --retry-oom).
_DROPPED = (*DAEMON_FIELDS, "unique", "once", "hold", "begin", "dependency", "retry_oom")

_tasks: set[asyncio.Task[None]] = set()  # (retries in flight: kept until done)


def attach(engine: Engine) -> None:
    """Follow the engine's commits from now on (after whoever followed them before)."""
    journal = engine.journal
    before = journal.on_committed

    def chained(inserted: list[Job], saved: list[Job], ok: bool) -> None:
        before(inserted, saved, ok)
        if ok:
            try:
                committed(engine, saved)
            except Exception:
                log.exception("--retry-oom: following a commit failed")

    journal.on_committed = chained


def committed(engine: Engine, saved: list[Job]) -> None:
    """Jobs whose change is durable: a completed one's peak is learned; a failed one that
    asked for it is looked at for CUDA out of memory."""
    for job in saved:
        if job.state not in FINISHED:
            continue
        learned.ended(engine, job)
        retried = engine.finished_states.retried
        if job.id in retried and retried[job.id] is None and "oom_retried" not in job.extra:
            job.note("oom_retried", None)  # (looked at: once, whatever it finds)
            task = engine.loop.create_task(_retry(engine, job))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)


async def _retry(engine: Engine, job: Job) -> None:
    """Queue the retry, if the log says CUDA out of memory and there is more to give; then
    the jobs that depend on ``job`` follow the retry, or learn that there is none."""
    try:
        await _look(engine, job)
    finally:
        retried = engine.finished_states.retried
        if retried.get(job.id, 0) is None:  # no retry: they read job's own end
            del retried[job.id]
        engine.control.deps_changed()
        engine.kick()


async def _look(engine: Engine, job: Job) -> None:
    try:
        spec = engine.store.spec(job.id)
    except UnreadableSpec as e:
        log.warning("--retry-oom: job %s: %s", job.id, e)
        return
    paths = [p for p in dict.fromkeys((spec.stdout_path, spec.stderr_path)) if p]
    sign = await engine.loop.run_in_executor(None, _died_of_oom, paths, job.uid)
    if sign is None:
        log.info("--retry-oom: job %s failed, and the end of its log does not say CUDA out of "
                 "memory: not retried", job.id)  # fmt: skip
        return
    raw, how = bigger(engine, spec, job)
    if raw is None:
        log.info("--retry-oom: job %s died of CUDA out of memory (%s) but %s", job.id, sign, how)
        return
    owner = Owner(job.uid, job.gid, False)
    try:
        p = await admit.prepare(engine, owner, raw, 0, engine.jobs.count_of(job.uid))
    except ProtocolError as e:
        log.warning("--retry-oom: job %s died of CUDA out of memory; its retry was refused: %s",
                    job.id, e.message)  # fmt: skip
        return
    reply, futures = admit.insert(engine, owner, p)
    new = engine.jobs[reply["job_id"]]
    new.note("retry_of", job.id)
    new.note("retry_why", f"CUDA out of memory ({sign}); now {how}")
    now = engine.clock.time()
    new.history = [Event(
        now, None, State.PENDING, f"retry of job {job.id}: CUDA out of memory ({sign}); now {how}"
    )]
    job.note("oom_retried", new.id)
    engine.finished_states.retried[job.id] = new.id  # (its dependents now wait on the retry)
    engine.depended.add(new.id)
    engine.save(job, ended_at=job.attempts[-1].end if job.attempts else now, launched=0)
    engine.kick()
    await asyncio.gather(*futures)
    log.info("--retry-oom: job %s died of CUDA out of memory: job %s retries it with %s",
             job.id, new.id, how)  # fmt: skip


def bigger(engine: Engine, spec: JobSpec, job: Job) -> tuple[dict[str, Any] | None, str]:
    """What to submit for the retry (None: nothing more to give) and what it gets, in words."""
    raw = {k: v for k, v in spec.to_dict().items() if k not in _DROPPED}
    raw["name"], raw["priority"] = job.name, job.priority
    raw.pop("learn_mem", None)
    req = job.request
    if req.gpus < 1 or req.each < 1:  # a share (asked, or sized by memory): whole GPUs
        n = max(1, math.ceil(req.gpus))
        raw["gpus"] = n
        raw.pop("mem", None)
        raw.pop("by_memory", None)
        return raw, f"{n} whole GPU{'s' if n > 1 else ''}"
    cards = [g.memory_total for g in engine.res.inventory if g.memory_total]
    if req.mem is not None and cards and max(cards) > req.mem:
        raw["mem"] = max(cards)
        raw.pop("by_memory", None)
        raw["gpus"] = int(req.gpus)
        return raw, f"the largest GPUs here ({max(cards) >> 30} GiB)"
    return None, "it had whole GPUs of the largest memory here: nothing more to give"


def _died_of_oom(paths: list[str], uid: int) -> str | None:
    """The words of :data:`SIGNS` the end of the logs ``paths`` (the user ``uid``'s) shows."""
    for path in paths:
        try:  # (a device is never opened: a user may not make one, nor link root's)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
                continue  # (not the job's log: another's file, a device, a FIFO)
            os.lseek(fd, max(0, st.st_size - TAIL), os.SEEK_SET)
            found = SIGNS.search(os.read(fd, TAIL))
        except OSError:
            continue
        finally:
            os.close(fd)
        if found is not None:
            return found.group().decode()
    return None
