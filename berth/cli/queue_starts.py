"""``berth queue --start``: when each pending job is expected to start (as ``squeue --start``).

The daemon computes the estimates (``berth.daemon.engine.estimates``: the queue replayed
forward with the scheduler, every job running for its learned run time within its time
limit), once per change of the queue, and hands the same ones to ``berth queue --json``,
``berth show``, the dashboard and MCP's why_pending.
This module only prints them.
"""

from __future__ import annotations

import json
import sys
import time

from berth.cli.escape import shown
from berth.client import call
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def text(est: dict[str, Any] | None, now: float) -> str:
    """One estimate in words: "now", "in <= 1:46:56 (at 20:08)" (by time limits: at the
    latest), "in ~5:00 (at 18:26, p90 8:00)" (by learned run times), "not before 18:00",
    "after job 12, in <= 2:00:00 (at 19:00)", "unknown: ...", "never: ..."."""
    if not est:
        return "unknown"
    start = est.get("start")
    after = est.get("after") or []
    head = "after job " + ", ".join(str(i) for i in after) + ", " if after else ""
    begin = est.get("begin")
    if start is None:
        note = str(est.get("note") or "")
        if begin:
            head += f"not before {_at(begin, now)}, "
        return head + (note if note.startswith("unknown") or not note else f"never ({note})")
    if start <= now + 1:
        return "now"
    if begin and start <= begin + 1:
        return head + f"not before {_at(begin, now)} (in {format_duration(begin - now)})"
    if est.get("exact", True):
        return head + f"in <= {format_duration(start - now)} (at {_at(start, now)})"
    latest = est.get("latest")
    late = (f", p90 {format_duration(latest - now)}" if latest and latest > start + 1 else "")
    return head + f"in ~{format_duration(start - now)} (at {_at(start, now)}{late})"


def runtime_text(est: dict[str, Any] | None) -> str | None:
    """The job's own learned run time in words, or None."""
    rt = (est or {}).get("runtime")
    return str(rt["text"]) if rt else None


def _at(t: float, now: float) -> str:
    return time.strftime("%H:%M" if t - now < 86400 else "%Y-%m-%d %H:%M", time.localtime(t))


def run(as_json: bool) -> int:
    reply = call("queue")
    now = time.time()
    rows = [r for r in reply["jobs"] if r["state"] == "PENDING"]
    ests = {r["id"]: r.get("start_estimate") or {} for r in rows}
    rows.sort(key=lambda r: (ests[r["id"]].get("start") or float("inf"), r["id"]))
    if as_json:
        jobs = [{"id": r["id"], "start": ests[r["id"]].get("start"),
                 "end": ests[r["id"]].get("end"), "gpus": ests[r["id"]].get("gpus") or [],
                 "exact": bool(ests[r["id"]].get("exact", True)),
                 "note": ests[r["id"]].get("note") or "",
                 **{k: ests[r["id"]].get(k) for k in ("latest", "runtime", "begin", "after")},
                 } for r in rows]  # fmt: skip
        policy = (reply.get("daemon") or {}).get("policy")
        sys.stdout.write(json.dumps({"now": now, "policy": policy, "jobs": jobs}) + "\n")
        return 0
    lines = [("JOBID", "NAME", "USER", "GPUS", "START", "ON")]
    for r in rows:
        e = ests[r["id"]]
        on = "gpu:" + ",".join(str(g) for g in e["gpus"]) if e.get("gpus") else "-"
        jid = (
            f"{r['array_job']}_{r['array_task']}"
            if r.get("array_job") is not None
            else str(r["id"])
        )
        lines.append((jid, shown(r["name"])[:20], shown(r["user"]), f"{r['gpus']:g}",
                      text(e, now), on))  # fmt: skip
    widths = [max(len(x[k]) for x in lines) for k in range(len(lines[0]))]
    for x in lines:
        sys.stdout.write(
            "  ".join(c.ljust(w) for c, w in zip(x, widths, strict=True)).rstrip() + "\n"
        )
    sys.stdout.write("# '<=': by time limits; '~': by run times learned from finished jobs; "
                     "'unknown': a job ahead has neither\n")
    return 0
