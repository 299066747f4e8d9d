"""The daemon's part of `berth status`: per GPU, the berth job holding it, and how many jobs
wait. Asks the daemon only if one answers quickly; without a daemon it adds nothing.
"""

from __future__ import annotations

from berth.cli.status_section import Section
from berth.client import try_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from berth.config import Config
    from berth.devices.model import GpuSnapshot


def status_section(gpus: Sequence[GpuSnapshot], cfg: Config) -> Section | None:
    reply = try_status(timeout=0.5)
    if reply is None:
        return None
    notes: dict[int, list[str]] = {}
    for index, entry in reply.get("gpus", {}).items():
        lines = []
        for job in entry.get("jobs", []):
            share = job.get("share", 1.0)
            part = "" if share >= 1 else f" ({share:g} of it)"
            lines.append(f"berth job {job['id']} ({job['name']}) of {job['user']}{part}")
        if entry.get("paused"):
            lines.append("paused for queued jobs (`berth resume " + index + "`)")
        if lines:
            notes[int(index)] = lines
    waiting = int(reply.get("pending", 0))
    title = f"queue: {reply.get('running', 0)} running, {waiting} waiting"
    if reply.get("queue_paused"):
        title += " (queue paused after a crash: `berth resume --all`)"
    lines = [title] + [str(n) for n in reply.get("notes") or ()]  # (the dashboard's port...)
    return Section("queue", "", lines, notes, reply)
