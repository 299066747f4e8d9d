"""End what an attempt left running when its supervisor died without a record.

A job's processes must never outlive the record of them: a job recorded ``LOST`` while its
processes run on (holding its GPU claims) is a job nobody can see, cancel or limit. When a
supervisor dies (``kill -9``, a crash) with its attempt started and no exit recorded, the
daemon ends the attempt's processes before it records the job:

- every process that holds one of the job's claim files open: the job inherits its claims'
  descriptors, so this finds its processes even if they left the job's session (``setsid``,
  daemonised children); an open descriptor of that very file cannot be a reused pid;
- every process of the job's session (its id is the job leader's pid, in the run file) that
  belongs to the job's user.

They get SIGTERM, then SIGKILL after the daemon's ``kill_after`` grace, through pidfds taken
before the first signal, so a pid reused meanwhile is never hit.
"""

from __future__ import annotations

import os
import signal

from berth.claims import files as claim_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable


def claim_paths(ledger_dir: str, lease: str | None) -> list[str]:
    """The claim files of ``lease`` in the ledger directory."""
    if not lease:
        return []
    try:
        names = os.listdir(ledger_dir)
    except OSError:
        return []
    out = []
    for name in names:
        parsed = claim_files.parse_claim_name(name)
        if parsed is not None and parsed[1] == lease:
            out.append(os.path.join(ledger_dir, name))
    return out


def leftovers(job_pid: int | None, uid: int, claims: list[str]) -> list[int]:
    """Pids of the attempt's processes still alive (see the module)."""
    pids: set[int] = set()
    for path in claims:
        pids.update(claim_files.holders(path))
    if job_pid:
        pids.update(_session(job_pid, uid))
    pids.discard(os.getpid())
    return sorted(pids)


def _session(sid: int, uid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.getsid(pid) == sid and os.stat(f"/proc/{entry}").st_uid == uid:
                out.append(pid)
        except OSError:
            continue
    return out


def end(
    pids: list[int],
    grace: float,
    loop: asyncio.AbstractEventLoop,
    where: Callable[[int, int], str | None] | None = None,
) -> list[int]:
    """SIGTERM ``pids`` now and SIGKILL those left after ``grace`` seconds; those that were
    signalled (the others had gone). ``where``: for pids read from a cgroup's list, the
    cgroup a process is in (given its pidfd, then its pid); one that is no longer in a
    cgroup of ours (it ended, and its pid was reused) is left alone."""
    fds = []
    ended = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue  # gone already
        if where is not None and where(fd, pid) is None:
            os.close(fd)
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
            fds.append(fd)
            ended.append(pid)
        except OSError:
            os.close(fd)
    if fds:
        loop.call_later(grace, _kill, fds)
    return ended


def _kill(fds: list[int]) -> None:
    for fd in fds:
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass  # it has ended
        finally:
            os.close(fd)
