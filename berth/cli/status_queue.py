"""The daemon's part of `berth status`: per GPU, the berth job holding it, and how many jobs
wait. Asks the daemon (2 s at most); without a daemon it adds nothing, with one that does not
answer it says so (the GPUs above are shown all the same).
"""

from __future__ import annotations

import time

from berth.cli.status_section import Section
from berth.client import try_status
from berth.errors import DaemonSilent
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.config import Config
    from berth.devices.model import GpuSnapshot


def status_section(gpus: Sequence[GpuSnapshot], cfg: Config) -> Section | None:
    try:
        reply = try_status()
    except DaemonSilent as e:  # (the GPUs are shown all the same)
        return Section("queue", "", [f"queue: could not ask the daemon on {e.path}: {e}"])
    if reply is None:
        return None
    notes: dict[int, list[str]] = {}
    for index, entry in reply.get("gpus", {}).items():
        lines = []
        for job in entry.get("jobs", []):
            share = job.get("share", 1.0)
            part = "" if share >= 1 else f" ({share:g} of it)"
            label = job.get("label") or job["id"]  # (9_1: task 1 of array 9)
            lines.append(f"berth job {label} ({job['name']}) of {job['user']}{part}")
        if entry.get("paused"):
            lines.append("paused for queued jobs (`berth resume " + index + "`)")
        if lines:
            notes[int(index)] = lines
    _enforcement(reply.get("enforce") or {}, notes)
    _reserved(reply.get("reservations") or [], notes)
    waiting = int(reply.get("pending", 0))
    title = f"queue: {reply.get('running', 0)} running, {waiting} waiting"
    if reply.get("queue_paused"):
        title += " (queue paused after a crash: `berth resume --all`)"
    lines = [title] + [str(n) for n in reply.get("notes") or ()]  # (the dashboard's port...)
    return Section("queue", "", lines, notes, reply)


def _reserved(rows: list[dict[str, Any]], notes: dict[int, list[str]]) -> None:
    """Admin reservations (`berth admin reservations`) as GPU notes: for whom, when."""
    now = time.time()
    for r in rows:
        when = (f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(r['end']))}"
                if r["start"] <= now else
                f"from {time.strftime('%Y-%m-%d %H:%M', time.localtime(r['start']))} for "
                f"{format_duration(r['end'] - r['start'])}")  # fmt: skip
        for g in r.get("gpus", []):
            notes.setdefault(int(g), []).append(
                f"reserved for {r['holders']} {when} (reservation {r['id']})"
            )


_SAYS = {"outside": "outside berth", "intrusion": "INTRUDES", "overrun": "OVER ITS MEMORY"}


def _enforcement(view: dict[str, Any], notes: dict[int, list[str]]) -> None:
    """The daemon's enforcement view (issue 25) as GPU notes: each process not its holder's
    (outside, intrusion, overrun) with user, pid, memory and since when; idle holders."""
    now = time.time()
    for f in view.get("findings", []):
        mem = f"{(f.get('memory') or 0) / (1 << 30):.1f}G"
        on = f" on {f['victim']}" if f.get("victim") else ""
        of = f" ({f['holder']})" if f.get("holder") else ""
        since = format_duration(max(0.0, now - f.get("since", now)))
        notes.setdefault(int(f["gpu"]), []).append(
            f"{_SAYS.get(f['class'], f['class'])}{on}: pid {f['pid']} of {f['user']}{of}, "
            f"{mem}, for {since}"
        )
    for i in view.get("idle", []):
        for g in i.get("gpus", []):
            idle_for = format_duration(i.get("idle_seconds", 0))
            notes.setdefault(int(g), []).append(
                f"{i['holder']} of {i['user']}: idle for {idle_for}"
            )
