"""Which claim a process is of, as the kernel vouches (issue 41.1; DESIGN.md invariant 9).

A claim body's ``pids`` and /proc/locks are hints, never facts: a user may write any pid in
a body of their own (another user's job, to get it killed as theirs; a process of their own
that uses another's GPU, to have it pass as the claim's). A process is a claim's only if
its uid is the claim file's owner (fstat, as the scan read it) and it holds the claim file
open now (its /proc/PID/fd, read through :func:`berth.claims.procs.open_proven`, as `berth
release` proves the holders it signals); the enforcer then counts its descendants of the
same uid as the claim's too. Everything else is judged by NVML alone.

The candidates proven are the hints (a body's first pids, the lock's owners from one read of
/proc/locks) and the GPU
processes of users who hold claims; a proof found is kept for that process (pid and start
time) while its claim lives, so a poll lists the descriptors only of new candidates and of
those that proved nothing before.
"""

from __future__ import annotations

import os

from berth.claims import files
from berth.claims.procs import open_proven
from berth.daemon.engine.enforce_io import identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from berth.claims.state import ClaimInfo

HINTS = 16  # a body's pids looked at per claim file (each a hint, proven or dropped)

Ident = tuple[int, int]  # (device, inode) of a claim file


class Proven:
    """A process proven to hold claim files: which claims (keys), and the proof in words."""

    __slots__ = ("keys", "pid", "proof", "start", "uid")

    def __init__(self, pid: int, uid: int, start: int, keys: list[str], proof: str) -> None:
        self.pid, self.uid, self.start, self.keys, self.proof = pid, uid, start, keys, proof


class ClaimProofs:
    def __init__(self) -> None:
        self._held: dict[tuple[int, int], frozenset[Ident]] = {}  # (pid, start) -> files held

    def prove(
        self, claims: Mapping[str, list[ClaimInfo]], gpu_pids: Iterable[int]
    ) -> dict[int, Proven]:
        """pid -> what it is proven to hold, of the claims (claim key -> its files, as a
        scan read them): for the hints of each claim and the processes NVML listed."""
        owner: dict[Ident, tuple[str, int, str]] = {}  # file -> (claim key, uid, name)
        wanted: dict[int, set[Ident]] = {}  # uid -> the files of its claims
        hints: set[int] = set()
        lockers = _lockers() if claims else {}
        for key, infos in claims.items():
            for c in infos:
                if c.uid < 0:
                    continue
                owner[c.ident] = (key, c.uid, c.name)
                wanted.setdefault(c.uid, set()).add(c.ident)
                hints.update(c.pids[:HINTS])
                hints.update(lockers.get(c.ident[1], ()))
        out: dict[int, Proven] = {}
        held: dict[tuple[int, int], frozenset[Ident]] = {}
        if not wanted:
            self._held = held
            return out
        for pid in sorted(hints.union(gpu_pids)):
            ident = identity(pid)
            if ident is None or ident[0] not in wanted:
                continue  # gone, or of a user who holds no claim: nothing to prove
            uid, start = ident
            mine = wanted[uid]
            found = self._held.get((pid, start), frozenset()) & mine
            if not found:
                found = self._files_held(pid, uid, mine)
                if not found or identity(pid) != ident:
                    continue
            held[(pid, start)] = found
            names = sorted(owner[i][2] for i in found)
            keys = sorted({owner[i][0] for i in found})
            proof = (
                f"pid {pid} holds claim file {', '.join(names)} (/proc/{pid}/fd) and is "
                f"uid {uid}, the file's owner"
            )
            out[pid] = Proven(pid, uid, start, keys, proof)
        self._held = held  # (what is gone, or proves nothing now, is forgotten: bounded)
        return out

    @staticmethod
    def _files_held(pid: int, uid: int, idents: set[Ident]) -> frozenset[Ident]:
        """The files of ``idents`` that process ``pid``, of user ``uid``, has open now
        (proven on its pidfd: the process looked at is the one that lives)."""
        found: set[Ident] = set()

        def proof(p: int) -> bool:
            if identity(p) is None or os.stat(f"/proc/{p}").st_uid != uid:
                return False
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    st = os.stat(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in idents:
                    found.add((st.st_dev, st.st_ino))
            return bool(found)

        fd = open_proven(pid, proof)
        if fd is None:
            return frozenset()
        os.close(fd)
        return frozenset(found)


def _lockers() -> dict[int, list[int]]:
    """inode -> the pids that took a flock on it, from one read of /proc/locks (hints: by
    inode alone, as overlay filesystems report another device there)."""
    out: dict[int, list[int]] = {}
    for line in files.read_locks():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK" or "->" in parts or not parts[4].isdigit():
            continue
        ino = parts[5].rsplit(":", 1)[-1]
        if ino.isdigit():
            out.setdefault(int(ino), []).append(int(parts[4]))
    return out
