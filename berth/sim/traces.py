"""Readers: public GPU-cluster traces and berth's own job records -> :class:`SimJob` lists.

Formats (``read(path, fmt)``; ``fmt="auto"`` guesses from the header):

- ``philly``: Microsoft Philly, one row per job (``timestamp,duration,num_gpus,gpu_time,
  cluster``); the VC (``cluster``) is the tenant (the trace names no users, so a VC is not
  made a project: it would hold one tenant). Rows are sorted by time here.
- ``itp``: Microsoft ITP 2021 (``job_id,submission_time,duration,num_gpu`` and the
  ElasticFlow-generated variant); the tenant is the file's name (``cluster05``).
- ``openb``: Alibaba openb pod lists (``num_gpu``, ``gpu_milli``, ``cpu_milli``,
  ``memory_mib``, ``creation_time``, ``deletion_time``); GPU demand is ``num_gpu`` or, for
  one-GPU pods, ``gpu_milli / 1000``; duration is the pod's lifetime; tenant is ``qos``.
  ``gpu_spec`` (``V100M16|V100M32``: the GPU models the pod may run on, empty = any) becomes
  :attr:`SimJob.gpu_models`; :mod:`berth.sim.gpuspec` turns it into the allowed GPUs of an
  inventory. As in FGD's simulator, it is read for GPU pods only. Some pod lists (openb's
  ``multigpu*``) have no time columns: they are pod *shapes*, read with every pod arriving at 0
  and no duration, for the fill experiment (:mod:`berth.sim.fill`); a replay
  (``need_times=True``) refuses them.
- ``berth``: JSON lines of ``Job.to_dict()``, or the daemon's SQLite store itself
  (``berth.db`` in its state directory, opened read-only); a job's duration is what its
  attempts ran, so an admin can replay last month's real queue (with its projects: fair
  share then compares projects first, then users within one, as the daemon does).

Malformed input (a missing column, a truncated row, a value that is not a number, a NaN, a
negative duration or submit time, a pod deleted before it was created) is an error naming the
file, the line and the field (:mod:`berth.sim.csvrows`); nothing is dropped or clamped
silently.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from berth.core.job import Job
from berth.errors import UsageError
from berth.sim.csvrows import Row, rows

FORMATS = ("auto", "philly", "itp", "openb", "berth")
MIB = 1024**2


@dataclass(slots=True)
class SimJob:
    """One job to replay: submitted at ``submit`` (s), runs ``duration`` s on ``gpus``."""

    id: int
    submit: float
    duration: float
    gpus: float
    tenant: str = ""
    priority: int = 0
    time_limit: float | None = None
    mem: int | None = None
    cpu: float | None = None
    ram: int | None = None
    name: str = ""
    gpu_ids: tuple[int, ...] | None = None
    gpu_models: tuple[str, ...] = ()  # GPU models allowed (exact names); () = any
    project: str = ""  # the job's project (berth's records: --project), "" for none
    requeue: bool = False  # opted in to preemption (--requeue; berth.core.preempt)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.duration


def read(
    path: str,
    fmt: str = "auto",
    *,
    shift: bool = True,
    need_times: bool = False,
    notes: list[str] | None = None,
) -> list[SimJob]:
    """Jobs of a trace file, sorted by submit time, ids from 1, submit times from 0 (unless
    ``shift=False``: keep the trace's own origin, to merge traces whose origins line up).

    ``need_times`` (a replay): refuse a pod list without times (shapes only), and leave out
    the pods that have no ``deletion_time`` (their lifetime is unknown), saying so in
    ``notes``. Without it such pods are shapes that arrive at their creation with no duration.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}: use one of {', '.join(FORMATS)}")
    if path.endswith(".db") and fmt in ("auto", "berth"):
        return _some(normalise(_berth(_store_rows(path), path, "row"), shift), path)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            first = f.readline()
            f.seek(0)
            if fmt == "auto":
                fmt = _guess(path, first)
            if fmt == "berth":
                jobs = _berth(f, path)
            elif fmt == "openb":
                jobs = _openb(f, path, need_times, notes)
            else:
                jobs = {"philly": _philly, "itp": _itp}[fmt](f, path)
    except OSError as e:
        raise UsageError(f"cannot read trace {path!r}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"trace {path!r} is not text (UTF-8): {e.reason}") from None
    return _some(normalise(jobs, shift), path)


def _some(jobs: list[SimJob], path: str) -> list[SimJob]:
    if not jobs:
        raise UsageError(f"trace {path!r} has no job to replay")
    return jobs


def normalise(jobs: list[SimJob], shift: bool = True) -> list[SimJob]:
    """Sort by submit time (stable), shift the first submit to 0, renumber from 1."""
    jobs.sort(key=lambda j: j.submit)
    t0 = jobs[0].submit if jobs and shift else 0.0
    for i, j in enumerate(jobs, 1):
        j.id = i
        j.submit -= t0
    return jobs


def _guess(path: str, header: str) -> str:
    if header.lstrip().startswith("{"):
        return "berth"
    h = header.lower()
    if "gpu_milli" in h:
        return "openb"
    if "timestamp" in h and "num_gpus" in h:
        return "philly"
    if "submission_time" in h:
        return "itp"
    raise UsageError(
        f"cannot tell the format of {path!r} from its header {header.strip()[:60]!r}: "
        "pass --format philly|itp|openb|berth"
    )


def _philly(f: Iterable[str], path: str) -> list[SimJob]:
    out = []
    for r in rows(f, path, ("timestamp", "duration", "num_gpus", "cluster")):
        raw = r.text("timestamp")
        try:
            t = datetime.strptime(raw, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        except ValueError:
            raise r.error("timestamp", f"{raw!r} is not a time like 2017-10-03 12:00:00; "
                          "fix or remove that row") from None  # fmt: skip
        out.append(SimJob(0, t.timestamp(), r.number("duration"),
                          r.number("num_gpus", whole=True), r.text("cluster", "")))  # fmt: skip
    return out


def _itp(f: Iterable[str], path: str) -> list[SimJob]:
    tenant = os.path.splitext(os.path.basename(path))[0]
    return [
        SimJob(
            0,
            r.number("submission_time"),
            r.number("duration"),
            r.number("num_gpu", whole=True),
            tenant,
            name=r.text("job_id", ""),
        )
        for r in rows(f, path, ("submission_time", "duration", "num_gpu"))
    ]


OPENB = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
OPENB_TIMES = ("creation_time", "deletion_time")


def _openb(f: Iterable[str], path: str, need_times: bool, notes: list[str] | None) -> list[SimJob]:
    out = []
    timed: bool | None = None
    unknown = 0
    for r in rows(f, path, OPENB):
        if timed is None:
            timed = all(c in r.data for c in OPENB_TIMES)
            if need_times and not timed:
                raise _untimed(path)
        if need_times and not r.has("deletion_time"):
            unknown += 1
            continue
        out.append(_pod(r, timed))
    if unknown and notes is not None:
        notes.append(f"left out {unknown} pods without a deletion_time (lifetime unknown)")
    return out


def _pod(r: Row, timed: bool) -> SimJob:
    n = int(r.number("num_gpu", whole=True))
    milli = r.number("gpu_milli")
    if n == 1 and not 0 < milli <= 1000:
        raise r.error("gpu_milli", f"{milli:g} is not a share of one GPU (1 to 1000 "
                      "thousandths); fix or remove that row")  # fmt: skip
    created = duration = 0.0
    if timed:
        created = r.number("creation_time")
        if r.has("deletion_time"):
            deleted = r.number("deletion_time")
            if deleted < created:
                raise r.error("deletion_time", f"{deleted:g} is before creation_time "
                              f"{created:g}; fix or remove that row")  # fmt: skip
            duration = deleted - created
    models = parse_gpu_spec(r.text("gpu_spec", "")) if n != 0 else ()
    return SimJob(
        0, created, duration, n if n != 1 else milli / 1000.0, r.text("qos", ""),
        cpu=r.number("cpu_milli"), ram=int(r.number("memory_mib") * MIB), name=r.text("name"),
        gpu_models=models,
    )  # fmt: skip


def _untimed(path: str) -> UsageError:
    return UsageError(
        f"{path!r} has no {' or '.join(OPENB_TIMES)} column: it lists pod shapes only (like "
        "openb's multigpu lists), so it cannot be replayed in time; use it with --fill (the "
        "FGD experiment), or replay a pod list with times (e.g. openb_pod_list_default.csv)"
    )


def parse_gpu_spec(text: str) -> tuple[str, ...]:
    """``"V100M16|V100M32"`` -> ``("V100M16", "V100M32")``: alternatives split on ``|``,
    empty parts dropped, duplicates once; ``""`` (no constraint) -> ``()``."""
    out: list[str] = []
    for part in text.split("|"):
        part = part.strip()
        if part and part not in out:
            out.append(part)
    return tuple(out)


def _berth(f: Iterable[str], path: str, unit: str = "line") -> list[SimJob]:
    out = []
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        where = f"{path!r}, {unit} {n}"
        try:
            d = json.loads(line)
            job = Job.from_dict(d)
        except json.JSONDecodeError as e:
            raise UsageError(
                f"{where}: not a JSON job record ({e.msg}); fix or remove it"
            ) from None
        except KeyError as e:
            raise UsageError(f"{where}: field {e.args[0]!r} is missing; fix or remove it") from None
        except (TypeError, ValueError, AttributeError, UsageError) as e:
            raise UsageError(f"{where}: not a valid job record: {e}; fix or remove it") from None
        if not math.isfinite(job.submit_time) or job.submit_time < 0:
            raise UsageError(f"{where}, field 'submit_time': {job.submit_time!r} is not a time "
                             "(seconds since 1970, 0 or more); fix or remove it")  # fmt: skip
        ran = [a for a in job.attempts if a.end is not None]
        if not ran:
            continue  # never ran (cancelled while pending, or still running)
        for a in ran:
            assert a.end is not None
            if not (math.isfinite(a.start) and math.isfinite(a.end) and a.end >= a.start):
                raise UsageError(f"{where}, field 'attempts': attempt {a.number} runs from "
                                 f"{a.start!r} to {a.end!r}; fix or remove it")  # fmt: skip
        r = job.request
        out.append(SimJob(
            job.id, job.submit_time, sum(a.end - a.start for a in ran if a.end is not None),
            float(r.gpus), job.tenant, job.priority, job.time_limit, r.mem, r.cpu, r.ram,
            job.name, project=job.project,
        ))  # fmt: skip
    return out


def _store_rows(path: str) -> list[str]:
    """The job JSON of every row of a daemon's store (read-only; the daemon may be running)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [row[0] for row in db.execute("SELECT data FROM jobs ORDER BY id")]
        finally:
            db.close()
    except sqlite3.Error as e:
        raise UsageError(f"cannot read berth's job store {path!r}: {e}") from None
