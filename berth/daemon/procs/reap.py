"""End what an attempt left running when its supervisor died without a record.

A job's processes must never outlive the record of them: a job recorded ``LOST`` while its
processes run on (holding its GPU claims) is a job nobody can see, cancel or limit. When a
supervisor dies (``kill -9``, a crash) with its attempt started and no exit recorded, the
daemon ends the attempt's processes before it records the job:

- every process of the job's user that holds one of the job's claim files open: the job
  inherits its claims' descriptors, so this finds its processes even if they left the job's
  session (``setsid``, daemonised children); an open descriptor of that very file cannot be
  a reused pid. (/proc/locks only suggests whom to look at: it names the pid that took a
  lock, which may have handed the lock on and died, and its number gone to another user's
  process. Another user holding the file open is not the job's: it is not signalled, and
  the claim files go anyway when the job's end is recorded.)
- every process of the job's session (its id is the job leader's pid, in the run file) that
  belongs to the job's user.

Each is proven so through a pidfd taken before the proof
(:func:`berth.claims.procs.open_proven`); they get SIGTERM, then SIGKILL after the daemon's
``kill_after`` grace, through those pidfds, so a pid reused meanwhile is never hit.
"""

from __future__ import annotations

import os
import signal

from berth.claims import files as claim_files
from berth.claims.procs import holds_file, open_proven, owner

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


def leftovers(job_pid: int | None, uid: int, claims: list[str]) -> list[tuple[int, int]]:
    """(pid, pidfd) of the attempt's processes still alive, each proven to be the job's
    (see the module): the pids /proc/locks names are hints, the pidfd is taken before the
    proof (:func:`berth.claims.procs.open_proven`)."""
    idents: set[tuple[int, int]] = set()
    hints: set[int] = set()
    for path in claims:
        try:
            st = os.stat(path)
        except OSError:
            continue
        idents.add((st.st_dev, st.st_ino))
        hints.update(claim_files.holders(path))
    hints.discard(os.getpid())
    out: dict[int, int] = {}
    holding = holds_file(idents, uid)
    for pid in sorted(hints):
        fd = open_proven(pid, holding)
        if fd is not None:
            out[pid] = fd
    if job_pid:
        member = _member(job_pid, uid)
        for pid in _session(job_pid):
            if pid not in out and pid != os.getpid():
                fd = open_proven(pid, member)
                if fd is not None:
                    out[pid] = fd
    return sorted(out.items())


def _session(sid: int) -> list[int]:
    """Pids that may be in session ``sid`` (a hint: see :func:`_member`)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    out.append(int(entry))
            except OSError:
                continue
    return out


def _member(sid: int, uid: int) -> Callable[[int], bool]:
    """A proof: the process is in session ``sid`` (a session's id is not reused while any
    process is in it) and belongs to ``uid``."""

    def proof(pid: int) -> bool:
        try:
            return os.getsid(pid) == sid and owner(pid) == uid
        except OSError:
            return False

    return proof


def end(
    procs: list[tuple[int, int]], grace: float, loop: asyncio.AbstractEventLoop,
    then: Callable[[], None] | None = None,
) -> list[int]:  # fmt: skip
    """SIGTERM ``procs`` ((pid, pidfd), from :func:`leftovers`) now and SIGKILL those left
    after ``grace`` seconds; the pids that were signalled (the others had gone). ``then``:
    called once every one signalled has ended (each pidfd reads as ended), never if none was."""
    fds = []
    ended = []
    for pid, fd in procs:
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
            fds.append(fd)
            ended.append(pid)
        except OSError:
            os.close(fd)
    if fds:
        _Ending(fds, grace, loop, then)
    return ended


class _Ending:
    """Processes sent SIGTERM (their pidfds): SIGKILL to those left after the grace; each
    pidfd closed once its process has ended, and ``then`` called when the last has."""

    def __init__(
        self, fds: list[int], grace: float, loop: asyncio.AbstractEventLoop,
        then: Callable[[], None] | None,
    ) -> None:  # fmt: skip
        self.left, self.loop, self.then = set(fds), loop, then
        for fd in fds:
            loop.add_reader(fd, self._ended, fd)
        loop.call_later(grace, self._kill)

    def _ended(self, fd: int) -> None:
        self.loop.remove_reader(fd)
        os.close(fd)
        self.left.discard(fd)
        if not self.left and self.then is not None:
            then, self.then = self.then, None
            then()

    def _kill(self) -> None:
        for fd in self.left:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass  # it has ended: its pidfd reads so
