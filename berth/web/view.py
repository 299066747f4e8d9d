"""The dashboard's picture of the daemon, built from what the socket's handlers answer.

GPUs come with their latest NVML reading (the daemon's poll) and everyone holding them:
queue jobs (the ``status`` handler), daemonless ``berth run`` / ``acquire()`` claims and the
waiters reserving GPUs (the claim ledger, as ``berth status`` reads it), and processes
outside berth, and the admin reservations that keep it (``reserved``). The queue is the ``queue`` handler's rows (running first, then pending in
order, with their reasons), cut to :data:`MAX_ROWS`, plus the last jobs that finished.
"""

from __future__ import annotations

import os
import time

from berth.claims.ledger import user_name
from berth.core.states import State
from berth.daemon.requests import report
from berth.daemon.requests.handlers import HANDLERS
from berth.web import dcgm, gpuprocs
from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.authority import Peer
    from berth.web.history import History
    from berth.web.observe import Observer

MAX_ROWS = 300  # queue rows sent to the page (the counts are always whole)


def _call(kind: str, engine: Engine, peer: Peer, **fields: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"type": kind, **fields}
    protocol.check_request(req)
    out = HANDLERS[kind](engine, peer, req)
    assert isinstance(out, dict)  # (the read handlers answer at once)
    return out


def gpus(engine: Engine, peer: Peer) -> list[dict[str, Any]]:
    """Every GPU with its reading and its holders."""
    status = _call("status", engine, peer)
    own = engine.own_lease_ids()
    ledger = engine.res.ledger.scan(bodies=True)
    by_uuid = engine.res.by_uuid
    # A private daemon hides others' commands from non-admins: the page is the same for every
    # viewer, so it shows no claim's command at all.
    private = bool(getattr(engine.opts, "private", False)) and not peer.admin
    claims: dict[int, list[dict[str, Any]]] = {}
    for c in ledger.claims:
        s = by_uuid.get(c.uuid)
        if s is None or c.lease in own:
            continue
        claims.setdefault(s.index, []).append(
            {
                "kind": "claim",
                "user": c.user or str(c.uid),
                "pid": c.pids[0] if c.pids else None,
                "share": c.share,
                "mem": c.memory or None,
                "since": c.since,
                "command": None if private else c.command,
            }
        )

    for w in ledger.waiters:
        for uuid, share, _mem in w.reserve:
            s = by_uuid.get(uuid)
            if s is not None:
                claims.setdefault(s.index, []).append(
                    {"kind": "reserved", "user": user_name(w.uid), "pid": w.pid, "share": share,
                     "command": None if private else w.want}
                )  # fmt: skip
    leaders = _leaders(engine)
    holder_pids = {p for c in ledger.claims if c.lease not in own for p in c.pids}
    drained, reserved = engine.pauses.notes, _reserved(status)
    out = []
    for s in engine.res.snapshots:
        entry = status["gpus"].get(str(s.index), {})
        job_mem, outside = gpuprocs.split(s, leaders, holder_pids, private)
        jobs = entry.get("jobs", [])
        holders: list[dict[str, Any]] = [
            {"kind": "job", "id": j["id"], "label": _label(engine, j["id"]), "name": j["name"],
             "user": j["user"], "share": j["share"], "mem": job_mem.get(j["id"]),
             "util": s.utilization if len(jobs) == 1 and not outside else None}
            for j in jobs
        ]  # fmt: skip
        holders += claims.get(s.index, [])
        holders += [{"kind": "outside", **p} for p in outside]
        others = entry.get("others") or {}
        if others.get("busy") and not outside:  # (NVML named none we could place)
            label = "; ".join(p for p in str(others.get("label", "")).split("; ") if "outside" in p)
            holders.append({"kind": "outside", "label": label or "processes outside berth"})
        taken = sum(float(h.get("share") or 0) for h in holders if h["kind"] != "outside")
        paused = bool(entry.get("paused"))
        note = drained.get(s.uuid) if paused else None
        out.append(
            {
                "index": s.index,
                "uuid": (known := dcgm.identity(s))[0],  # (a lost GPU's: as NVML last gave)
                "name": known[1],
                "healthy": s.healthy,
                "error": s.error,
                "logical": s.logical,
                "memory_used": s.memory_used,
                "memory_total": s.memory_total,
                "util": s.utilization,
                "mem_util": s.memory_utilization,
                "power": s.power_draw,
                "power_limit": s.power_limit,
                "temp": s.temperature,
                "paused": paused,
                "pause_note": _pause_note(note) if paused else None,
                "free_share": round(max(0.0, 1.0 - taken), 3) if 0 < taken < 1 else None,
                "holders": holders,
                "reserved": reserved.get(s.index, []),
            }
        )
    return out


def _reserved(status: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """GPU index -> the admin reservations that keep it (for its card)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r in status.get("reservations") or ():
        for g in r["gpus"]:
            out.setdefault(g, []).append(
                {k: r[k] for k in ("id", "holders", "start", "end", "open", "note")}
            )
    return out


def _leaders(engine: Engine) -> dict[int, int]:
    """pid -> job id: each running job's leader and the supervisor running it."""
    out: dict[int, int] = {}
    for job_id, run in engine.runs.items():
        if run.job_pid is None or run.sup_pid is None:  # (as the engine learns them)
            info = engine.procs.record(run.path)
            run.job_pid = run.job_pid or info.get("job")
            run.sup_pid = run.sup_pid or info.get("sup")
        for pid in (run.job_pid, run.sup_pid):
            if pid is not None:
                out[pid] = job_id
    return out


def _label(engine: Engine, job_id: int) -> str:
    """A job's id as the CLI writes it (17_1 for task 1 of array 17)."""
    job = engine.jobs.get(job_id)
    array = job.extra.get("array") if job is not None else None
    return f"{array[0]}_{array[1]}" if array else str(job_id)


def _pause_note(note: Any) -> str:
    if not note:
        return "paused"
    by, why, _since = note
    return f"drained by {by}" + (f": {why}" if why else "")


def held_by_user(gpu_list: list[dict[str, Any]]) -> dict[str, float]:
    """user -> GPUs held now (jobs and claims; a share counts as its fraction)."""
    out: dict[str, float] = {}
    for g in gpu_list:
        for h in g["holders"]:
            if h["kind"] in ("job", "claim"):
                out[h["user"]] = out.get(h["user"], 0.0) + float(h.get("share") or 1.0)
    return out


def queue(engine: Engine, peer: Peer, observer: Observer) -> dict[str, Any]:
    rows = _call("queue", engine, peer)["jobs"]
    return {
        "counts": observer.queue_counts(),
        "total": len(rows),
        "rows": rows[:MAX_ROWS],
        "recent": list(observer.recent),
    }


def users(
    engine: Engine, gpu_list: list[dict[str, Any]], history: History, now: float
) -> list[dict[str, Any]]:
    held = held_by_user(gpu_list)
    hours = history.gpu_hours(now)
    table: dict[str, dict[str, Any]] = {}

    def entry(user: str) -> dict[str, Any]:
        return table.setdefault(
            user, {"user": user, "gpus": 0.0, "running": 0, "pending": 0, "gpu_hours": 0.0}
        )

    for job in engine.unfinished():
        e = entry(job.user)
        if job.state is State.PENDING:
            e["pending"] += 1
        else:
            e["running"] += 1
    for user, n in held.items():
        entry(user)["gpus"] = round(n, 3)
    for user, h in hours.items():
        entry(user)["gpu_hours"] = round(h, 3)
    return sorted(table.values(), key=lambda e: (-e["gpus"], -e["running"], e["user"]))


def projects(engine: Engine) -> list[dict[str, Any]]:
    """Each project's line (usage, quotas: `berth admin projects`); none configured: []."""
    return engine.accounts.projects.summary(engine.unfinished(), time.time())


def snapshot(engine: Engine, peer: Peer, observer: Observer, history: History) -> dict[str, Any]:
    """Everything the page shows (the same for every viewer: who may act is the page's
    business to show, and the server's to enforce)."""
    now = time.time()
    gpu_list = gpus(engine, peer)
    return {
        "now": now,
        "host": os.uname().nodename,
        "daemon": {
            "pid": os.getpid(),
            "started": observer.started_at,
            "queue_paused": engine.pauses.queue,
            "gpu_error": engine.res.error,
            "policy": engine.opts.policy or "balanced",
        },
        "gpus": gpu_list,
        "queue": queue(engine, peer, observer),
        "users": users(engine, gpu_list, history, now),
        "projects": projects(engine),
        # issue 25: findings (outside/intrusion/overrun) and idle holders, as `status` has them
        "enforce": engine.enforcer.view() if engine.enforcer is not None else None,
        # admin reservations (`berth admin reservations`): each GPU's are on its card
        "reservations": engine.reservations.view(now),
    }


USAGE_DAYS = 30  # the Usage tab's window


async def usage(engine: Engine, peer: Peer, now: float) -> dict[str, Any]:
    """The Usage tab: GPU-hours per user, per project and per day and user over the last
    :data:`USAGE_DAYS` days, as `berth report` gives them to ``peer`` (their own rows and
    the totals; an admin's: everyone's), in one pass over the records on the report thread."""
    q = report.ask(engine, peer, now - USAGE_DAYS * 86400.0, now, ["user"])
    out = await report.run(
        q, {"users": ["user"], "projects": ["project"], "daily": ["day", "user"]}
    )
    out["days"] = USAGE_DAYS
    return out
