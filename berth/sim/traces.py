"""Readers: public GPU-cluster traces and berth's own job records -> :class:`SimJob` lists.

Formats (``read(path, fmt)``; ``fmt="auto"`` guesses from the header):

- ``philly``: Microsoft Philly, one row per job (``timestamp,duration,num_gpus,gpu_time,
  cluster``); the VC (``cluster``) is the tenant. Rows are sorted by time here.
- ``itp``: Microsoft ITP 2021 (``job_id,submission_time,duration,num_gpu`` and the
  ElasticFlow-generated variant); the tenant is the file's name (``cluster05``).
- ``openb``: Alibaba openb pod lists (``num_gpu``, ``gpu_milli``, ``cpu_milli``,
  ``memory_mib``, ``creation_time``, ``deletion_time``); GPU demand is ``num_gpu`` or, for
  one-GPU pods, ``gpu_milli / 1000``; duration is the pod's lifetime; tenant is ``qos``.
  ``gpu_spec`` (``V100M16|V100M32``: the GPU models the pod may run on, empty = any) becomes
  :attr:`SimJob.gpu_models`; :mod:`berth.sim.gpuspec` turns it into the allowed GPUs of an
  inventory. As in FGD's simulator, it is read for GPU pods only.
- ``berth``: JSON lines of ``Job.to_dict()``, or the daemon's SQLite store itself
  (``berth.db`` in its state directory, opened read-only); a job's duration is what its
  attempts ran, so an admin can replay last month's real queue.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from berth.errors import UsageError

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

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.duration


def read(path: str, fmt: str = "auto", *, shift: bool = True) -> list[SimJob]:
    """Jobs of a trace file, sorted by submit time, ids from 1, submit times from 0 (unless
    ``shift=False``: keep the trace's own origin, to merge traces whose origins line up)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}: use one of {', '.join(FORMATS)}")
    if path.endswith(".db") and fmt in ("auto", "berth"):
        return normalise(_berth(_store_rows(path)), shift)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            first = f.readline()
            f.seek(0)
            if fmt == "auto":
                fmt = _guess(path, first)
            if fmt == "berth":
                jobs = _berth(f)
            else:
                rows = list(csv.DictReader(f))
                jobs = {"philly": _philly, "itp": _itp, "openb": _openb}[fmt](rows, path)
    except OSError as e:
        raise UsageError(f"cannot read trace {path!r}: {e.strerror}") from None
    except (KeyError, ValueError) as e:
        raise UsageError(f"trace {path!r} is not valid {fmt} data: {e}") from None
    return normalise(jobs, shift)


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


def _philly(rows: list[dict[str, str]], path: str) -> list[SimJob]:
    out = []
    for r in rows:
        t = datetime.strptime(r["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        out.append(
            SimJob(0, t.timestamp(), float(r["duration"]), float(int(r["num_gpus"])), r["cluster"])
        )
    return out


def _itp(rows: list[dict[str, str]], path: str) -> list[SimJob]:
    tenant = os.path.splitext(os.path.basename(path))[0]
    return [
        SimJob(
            0,
            float(r["submission_time"]),
            float(r["duration"]),
            float(int(r["num_gpu"])),
            tenant,
            name=r.get("job_id", ""),
        )
        for r in rows
    ]


def _openb(rows: list[dict[str, str]], path: str) -> list[SimJob]:
    out = []
    for r in rows:
        if not r.get("deletion_time"):
            continue
        n = int(r["num_gpu"])
        gpus = n if n != 1 else int(r["gpu_milli"]) / 1000.0
        created = float(r["creation_time"])
        models = parse_gpu_spec(r.get("gpu_spec") or "") if n != 0 else ()
        out.append(SimJob(
            0, created, max(0.0, float(r["deletion_time"]) - created), float(gpus),
            r.get("qos") or "", cpu=float(r["cpu_milli"]),
            ram=int(float(r["memory_mib"]) * MIB), name=r["name"], gpu_models=models,
        ))  # fmt: skip
    return out


def parse_gpu_spec(text: str) -> tuple[str, ...]:
    """``"V100M16|V100M32"`` -> ``("V100M16", "V100M32")``: alternatives split on ``|``,
    empty parts dropped, duplicates once; ``""`` (no constraint) -> ``()``."""
    out: list[str] = []
    for part in text.split("|"):
        part = part.strip()
        if part and part not in out:
            out.append(part)
    return tuple(out)


def _berth(f: Iterable[str]) -> list[SimJob]:
    from berth.core.job import Job

    out = []
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            job = Job.from_dict(json.loads(line))
        except (json.JSONDecodeError, UsageError) as e:
            raise ValueError(f"line {n}: {e}") from None
        ran = [a for a in job.attempts if a.end is not None]
        if not ran:
            continue  # never ran (cancelled while pending, or still running)
        r = job.request
        out.append(SimJob(
            job.id, job.submit_time, sum(a.end - a.start for a in ran if a.end is not None),
            float(r.gpus), job.tenant, job.priority, job.time_limit, r.mem, r.cpu, r.ram,
            job.name,
        ))  # fmt: skip
    return out


def _store_rows(path: str) -> list[str]:
    """The job JSON of every row of a daemon's store (read-only; the daemon may be running)."""
    import sqlite3

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [row[0] for row in db.execute("SELECT data FROM jobs ORDER BY id")]
        finally:
            db.close()
    except sqlite3.Error as e:
        raise UsageError(f"cannot read berth's job store {path!r}: {e}") from None
