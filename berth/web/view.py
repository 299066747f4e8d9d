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
from berth.daemon.requests.server import HANDLERS
from berth.web import dcgm, gpuprocs
from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer
    from berth.web.history import History
    from berth.web.observe import Observer

MAX_ROWS = 300  # queue rows sent to the page (the counts are always whole)


def _call(kind: str, front: Front, peer: Peer, **fields: Any) -> dict[str, Any]:
    req: dict[str, Any] = {"type": kind, **fields}
    protocol.check_request(req)
    out = HANDLERS[kind](front, peer, req)
    assert isinstance(out, dict)  # (the read handlers answer at once)
    return out


def gpus(front: Front, peer: Peer, status: Any = None, seen: Any = None) -> list[dict[str, Any]]:
    """Every GPU with its reading and its holders (``status``, ``seen``: the ``status``
    handler's answer and the front's GPUs, if read already)."""
    status = _call("status", front, peer) if status is None else status
    seen = front.view("gpus") if seen is None else seen
    by_uuid = seen["by_uuid"]
    # A private daemon hides others' commands from non-admins: the page is the same for every
    # viewer, so it shows no claim's command at all.
    private = bool(seen["private"]) and not peer.admin
    claims: dict[int, list[dict[str, Any]]] = {}
    for c in seen["claims"]:  # (the daemon's own are its jobs')
        s = by_uuid.get(c.uuid)
        if s is None:
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

    for w in seen["waiters"]:
        for uuid, share, _mem in w.reserve:
            s = by_uuid.get(uuid)
            if s is not None:
                claims.setdefault(s.index, []).append(
                    {"kind": "reserved", "user": user_name(w.uid), "pid": w.pid, "share": share,
                     "command": None if private else w.want}
                )  # fmt: skip
    leaders, labels = seen["leaders"], seen["labels"]
    holder_pids = {p for c in seen["claims"] for p in c.pids}
    drained, reserved = seen["drained"], _reserved(status)
    out = []
    for s in seen["snapshots"]:
        entry = status["gpus"].get(str(s.index), {})
        job_mem, outside = gpuprocs.split(s, leaders, holder_pids, private)
        jobs = entry.get("jobs", [])
        holders: list[dict[str, Any]] = [
            {"kind": "job", "id": j["id"], "label": labels.get(j["id"], str(j["id"])), "name": j["name"],
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


def queue(front: Front, peer: Peer, observer: Observer) -> dict[str, Any]:
    reply = _call("queue", front, peer)
    rows = reply["jobs"]
    return {
        "counts": observer.queue_counts(),
        "total": len(rows),
        "rows": rows[:MAX_ROWS],
        "recent": list(observer.recent),
        "estimates": reply.get("estimates"),  # (how good the last week's estimates were)
    }


def users(
    front: Front, gpu_list: list[dict[str, Any]], history: History, now: float
) -> list[dict[str, Any]]:
    held = held_by_user(gpu_list)
    hours = history.gpu_hours(now)
    table: dict[str, dict[str, Any]] = {}

    def entry(user: str) -> dict[str, Any]:
        return table.setdefault(
            user, {"user": user, "gpus": 0.0, "running": 0, "pending": 0, "gpu_hours": 0.0}
        )

    for job in front.view("unfinished"):
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


def projects(front: Front) -> list[dict[str, Any]]:
    """Each project's line (usage, quotas: `berth admin projects`); none configured: []."""
    out: list[dict[str, Any]] = front.view("projects")["projects"]
    return out


def snapshot(front: Front, peer: Peer, observer: Observer, history: History) -> dict[str, Any]:
    """Everything the page shows (the same for every viewer: who may act is the page's
    business to show, and the server's to enforce)."""
    now = time.time()
    status, seen = _call("status", front, peer), front.view("gpus")
    gpu_list = gpus(front, peer, status, seen)
    return {
        "now": now,
        "host": os.uname().nodename,
        "daemon": {
            "pid": os.getpid(),
            "started": observer.started_at,
            "queue_paused": status["queue_paused"],
            "gpu_error": seen["error"],
            "policy": seen["policy"],
        },
        "gpus": gpu_list,
        "queue": queue(front, peer, observer),
        "users": users(front, gpu_list, history, now),
        "projects": projects(front),
        # issue 25: findings (outside/intrusion/overrun) and idle holders, as `status` has them
        "enforce": status["enforce"],
        # admin reservations (`berth admin reservations`): each GPU's are on its card
        "reservations": status["reservations"],
    }


USAGE_DAYS = 30  # the Usage tab's window


async def usage(front: Front, peer: Peer, now: float) -> dict[str, Any]:
    """The Usage tab: GPU-hours per user, per project and per day and user over the last
    :data:`USAGE_DAYS` days, as `berth report` gives them to ``peer`` (their own rows and
    the totals; an admin's: everyone's), in one pass over the records on the report thread."""
    out = await front.view(
        "report", peer, now - USAGE_DAYS * 86400.0, now,
        {"users": ["user"], "projects": ["project"], "daily": ["day", "user"]}, ["user"],
    )  # fmt: skip
    out["days"] = USAGE_DAYS
    return out
