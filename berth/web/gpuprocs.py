"""Who really uses a GPU, as nvitop and gpustat show it: NVML's process list, each process
told apart as a queue job's (its session, or an ancestor, is the job's leader or supervisor)
or outside berth, with its user, pid, GPU memory and command read from ``/proc``.

What is read here is shown, never acted on: a pid is no identity (a process is signalled only
by the daemon's own proofs, elsewhere), so a pid reused between the NVML read and ``/proc``
at worst mislabels a line for one update.
"""

from __future__ import annotations

import os

from berth.claims.ledger import user_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from berth.devices.model import GpuSnapshot

COMMAND_CHARS = 200  # of a command line shown
DEPTH = 32  # parents followed to find a process's job


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent, session) of a process; None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[3])
    except (IndexError, ValueError):
        return None


def job_of(pid: int, leaders: Mapping[int, int]) -> int | None:
    """The job whose leader or supervisor (``leaders``: pid -> job id) is ``pid``'s session or
    one of its ancestors."""
    for _ in range(DEPTH):
        if pid in leaders:
            return leaders[pid]
        st = _stat(pid)
        if st is None:
            return None
        parent, session = st
        if session in leaders:
            return leaders[session]
        if parent <= 1:
            return None
        pid = parent
    return None


def owner(pid: int) -> str | None:
    try:
        return user_name(os.stat(f"/proc/{pid}").st_uid)
    except OSError:
        return None


def command(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4 * COMMAND_CHARS)
    except OSError:
        return None
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return text[:COMMAND_CHARS] or None


def split(
    snap: GpuSnapshot, leaders: Mapping[int, int], holders: set[int], private: bool
) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """(job id -> GPU memory of its processes here, the processes outside berth). A process
    of a claim's holder (``holders``: their pids) is neither: the claim is shown already."""
    mem: dict[int, int] = {}
    outside: list[dict[str, Any]] = []
    for p in snap.processes or ():
        if p.pid in holders:
            continue
        job = job_of(p.pid, leaders)
        if job is not None:
            mem[job] = mem.get(job, 0) + (p.used_memory or 0)
            continue
        if _stat(p.pid) is None and not os.path.exists(f"/proc/{p.pid}"):
            continue  # gone since the read
        outside.append(
            {
                "pid": p.pid,
                "user": owner(p.pid),
                "mem": p.used_memory,
                "command": None if private else command(p.pid),
            }
        )
    return mem, outside
