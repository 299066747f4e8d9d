"""``berth queue --start``: when each pending job is expected to start (as ``squeue --start``).

The daemon computes the estimates (``berth.daemon.engine.estimates``: the queue replayed
forward with the scheduler, every job running until its time limit), once per change of the
queue, and hands the same ones to ``berth queue --json``, ``berth show`` and the dashboard.
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
    """One estimate in words: "now", "in 1:46:56 (at 20:08)", "unknown: ...", "never: ..."."""
    if not est:
        return "unknown"
    start = est.get("start")
    if start is None:
        note = str(est.get("note") or "")
        return note if note.startswith("unknown") else "never" + (f" ({note})" if note else "")
    if start <= now + 1:
        return "now"
    at = time.strftime("%H:%M" if start - now < 86400 else "%Y-%m-%d %H:%M", time.localtime(start))
    return f"in {format_duration(start - now)} (at {at})"


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
                 "note": ests[r["id"]].get("note") or ""} for r in rows]  # fmt: skip
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
    sys.stdout.write("# jobs run until their time limit; 'unknown': a job ahead has none\n")
    return 0
