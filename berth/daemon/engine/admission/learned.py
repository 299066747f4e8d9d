"""Learned GPU memory (issue 33.3): a job submitted without ``-g`` and without ``--mem``
(the client says so: ``learn_mem``) gets, when the same job of the same user ran before and
completed, a share of one GPU sized by the peak GPU memory those runs used, as if it had
asked ``--mem X`` alone (:func:`berth.daemon.engine.admission.fitness.memory_share`).

The same job: the same user (uid, as the socket vouches) and the same name (``-J``), else the
same command line (:func:`.peaks.key`, kept as ``Job.extra["learn"]`` with its peak). The peak: the
most GPU memory the job's processes used together on one of its GPUs, as the enforcer's
polls measure it through NVML (:mod:`.peaks`, ``Job.extra["peak_mem"]``): what berth
measured, never anything the job or its user wrote. Only runs that ended COMPLETED count,
the newest :data:`RUNS` of them, and none older than a run that FAILED (out of memory on a
learned share, or anything else: the history may be wrong, and the next run gets a whole
GPU; its peak starts the history again).

The size: the highest of those peaks plus :data:`HEADROOM` (15 %, at least 1 GiB), rounded
up to a whole GiB (peak 11.2 GiB -> ``--mem 13G``). Where that is most of the card, the job
keeps a whole GPU. A learned size is a placement, not a promise the job made: the enforcer
never kills a job for outgrowing it (it is told), and a job that dies of CUDA out of memory
is retried with a whole GPU if it asked for it (``--retry-oom``,
:mod:`berth.daemon.engine.admission.oom_retry`). ``--mem``, ``-g`` (``-g 1``: a whole GPU)
and ``--no-learned-mem`` keep a job off it.

Each user's peaks are read from the store once (their newest :data:`SCAN` jobs, one query)
and kept (:class:`Memo`, bounded) and added to as such jobs complete (:func:`ended`), so a
submit costs no query after the user's first (bench/learned_mem.py).
"""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict

from berth.core.states import State
from berth.daemon.engine.admission.fitness import memory_share
from berth.daemon.engine.admission.peaks import key
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.inventory import Gpu
    from berth.core.job import Job
    from berth.daemon.engine.admission.prepared import Prepared
    from berth.daemon.engine.engine import Engine
    from berth.daemon.store.store import Store
    from berth.wire.jobspec import JobSpec

GIB = 1 << 30
HEADROOM = 0.15  # above the highest peak (and at least MIN_MARGIN), then up to a whole GiB
MIN_MARGIN = GIB
RUNS = 5  # the newest completed runs that count
SCAN = 2000  # the user's newest jobs the store is asked about, once per user
MEMO = 256  # users whose peaks are kept in memory


def label(spec: JobSpec) -> str:
    """How the job is named to its user: its name, else its script (the command's first
    word that is not an interpreter), else the command."""
    if spec.name:
        return spec.name
    words = list(spec.argv or ())
    if not words:
        return (spec.wrap or "")[:60]
    first = words[0].rsplit("/", 1)[-1]
    if first.startswith(("python", "bash", "sh", "torchrun", "perl", "ruby", "node")):
        rest = [w for w in words[1:] if not w.startswith("-")]
        if rest:
            return rest[0].rsplit("/", 1)[-1]
    return first


def headroom(peak: int) -> int:
    """The memory asked for a job whose runs peaked at ``peak`` bytes."""
    return math.ceil(max(peak * (1 + HEADROOM), peak + MIN_MARGIN) / GIB) * GIB


class Memo:
    """uid -> (job key -> the peaks of its newest completed runs, newest first): each user's
    read from the store once (one query, whatever the job), then kept up to date."""

    def __init__(self) -> None:
        self.users: OrderedDict[int, dict[str, list[int]]] = OrderedDict()

    def get(self, store: Store, uid: int, k: str) -> list[int]:
        known = self.users.get(uid)
        if known is None:
            known = self.users[uid] = _read(store, uid)
            if len(self.users) > MEMO:
                self.users.popitem(last=False)
        else:
            self.users.move_to_end(uid)
        return known.get(k, [])

    def add(self, uid: int, k: str, peak: int | None) -> None:
        """A run of job ``k`` completed with ``peak``, or (None) failed: the runs before it
        are not trusted any more."""
        known = self.users.get(uid)
        if known is not None:  # (not kept: read from the store when next asked)
            runs = known.setdefault(k, [])
            if peak is None:
                runs.clear()
            else:
                runs.insert(0, peak)
                del runs[RUNS:]


_MEMOS: weakref.WeakKeyDictionary[Any, Memo] = weakref.WeakKeyDictionary()


def memo(engine: Engine) -> Memo:
    """The engine's memo (kept beside its store: one per daemon, gone with it)."""
    found = _MEMOS.get(engine.store)
    if found is None:
        found = _MEMOS[engine.store] = Memo()
    return found


def _read(store: Store, uid: int) -> dict[str, list[int]]:
    """Job key -> the peaks of its newest completed runs, of ``uid``'s newest jobs in the
    store (at most :data:`SCAN`)."""
    cur = store.db.execute(
        "SELECT state, json_extract(data, '$.extra.learn'), "
        "json_extract(data, '$.extra.peak_mem') FROM (SELECT data, state FROM jobs WHERE "
        "uid = ? ORDER BY id DESC LIMIT ?) WHERE state IN ('COMPLETED', 'FAILED') AND "
        "json_extract(data, '$.extra.peak_mem') IS NOT NULL",
        (uid, SCAN),
    )
    out: dict[str, list[int]] = {}
    failed: set[str] = set()  # (a run failed after those older: they are not trusted)
    for state, k, peak in cur:
        if not isinstance(k, str) or not isinstance(peak, int) or peak <= 0 or k in failed:
            continue
        runs = out.setdefault(k, [])
        if state != "COMPLETED":
            failed.add(k)
        elif len(runs) < RUNS:
            runs.append(peak)
    return out


def size(engine: Engine, uid: int, p: Prepared, inventory: list[Gpu]) -> JobSpec:
    """``p``'s spec sized from the history of the same job (``p.learned``: what it was sized
    from, for the reply, `berth show` and the dry run), or as it came."""
    p.spec, p.learned = _sized(engine, uid, p.spec, inventory)
    return p.spec


def _sized(
    engine: Engine, uid: int, spec: JobSpec, inventory: list[Gpu]
) -> tuple[JobSpec, dict[str, Any] | None]:
    if not spec.learn_mem or spec.mem is not None or spec.gpus != 1 or spec.by_memory:
        return spec, None
    peaks = memo(engine).get(engine.store, uid, key(uid, spec))
    if not peaks:
        return spec, None
    peak = max(peaks)
    mem = headroom(peak)
    sized = spec.replace(mem=mem, by_memory=True)
    try:
        whole = memory_share(inventory, sized) >= 1.0 if inventory else True
    except ProtocolError:  # (a declared GPU of unknown memory: no share to size)
        return spec, None
    info: dict[str, Any] = {"runs": len(peaks), "peak": peak, "mem": mem, "of": label(spec),
                            "whole": whole}  # fmt: skip
    info["said"] = words(info)
    return (spec if whole else sized), info


def extra(spec: JobSpec, info: dict[str, Any] | None) -> dict[str, Any]:
    """What a new job keeps for learning and retrying (``Job.extra``): what sized it
    (``learned``), ``retry_oom`` (its kind and peak come once it uses memory: peaks.py)."""
    out: dict[str, Any] = {}
    if info is not None:
        out["learned"] = info
    if spec.retry_oom:
        out["retry_oom"] = True  # (oom_retry.py, when it ends FAILED)
    return out


def words(info: dict[str, Any]) -> str:
    """``sized from 3 earlier runs of train.sh: peak 11.2 GiB -> --mem 13G``."""
    runs = info["runs"]
    what = f"{runs} earlier run{'s' if runs != 1 else ''} of {info['of']}"
    peak = f"peak {info['peak'] / GIB:.1f} GiB"
    if info.get("whole"):
        return f"sized from {what}: {peak} -> a whole GPU ({info['mem'] // GIB}G is most of one)"
    return f"sized from {what}: {peak} -> --mem {info['mem'] // GIB}G"


def ended(engine: Engine, job: Job) -> None:
    """A job ended: a completed one's peak joins its kind's history; a failed one (that used
    GPU memory) starts it again."""
    k, peak = job.extra.get("learn"), job.extra.get("peak_mem")
    if k and peak and job.state in (State.COMPLETED, State.FAILED):
        memo(engine).add(job.uid, str(k), int(peak) if job.state is State.COMPLETED else None)
