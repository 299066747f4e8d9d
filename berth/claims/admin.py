"""Ending other people's claims: who may (the admin), and how (SIGTERM, then SIGKILL).

The admin is root or a member of ``[claims] admin_group`` (by the user database). Anyone may
end their own claims. The holders of a claim are the processes that have its file open
(proven in /proc/PID/fd before any signal: a pid /proc/locks names is only a hint, see
:func:`berth.claims.procs.open_proven`), so the claim ends exactly when they are gone; a
holder that leads its process group (berth run's command does) is signalled with its whole
group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from berth.claims import files
from berth.claims.procs import holds_file, open_proven, signal_proven
from berth.claims.wake import watcher_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from berth.claims.ledger import ClaimInfo, Ledger, WaiterInfo
    from berth.config import Config


def is_admin(cfg: Config) -> bool:
    """Is this process's user an admin: root, or a member of ``[claims] admin_group`` as the
    user database says (never the groups this process happens to carry)."""
    uid = os.geteuid()
    if uid == 0:
        return True
    group = cfg.admin_group
    if not group:
        return False
    import grp  # rare: an admin group
    import pwd  # rare: an admin group

    try:
        gid = grp.getgrnam(group).gr_gid
        pw = pwd.getpwuid(uid)
    except KeyError:
        return False
    return gid == pw.pw_gid or gid in os.getgrouplist(pw.pw_name, pw.pw_gid)


def holder_pids(claims: Iterable[ClaimInfo | WaiterInfo]) -> list[int]:
    """The processes proven to hold these claims open now (not this one): those
    :func:`berth.claims.files.holders` names (/proc/locks, /proc/PID/fd) that have one of
    the files open (:func:`berth.claims.procs.holds_file`). /proc/locks alone names the pid
    that took a lock, which may have died and its number gone to another user's process."""
    out = []
    for pid, fd in _proven(claims):
        os.close(fd)
        out.append(pid)
    return out


def _proven(claims: Iterable[ClaimInfo | WaiterInfo]) -> list[tuple[int, int]]:
    """(pid, pidfd) of the processes proven to hold these files open (not this one)."""
    idents: set[tuple[int, int]] = set()
    hints: set[int] = set()
    for c in claims:
        try:
            st = os.stat(c.path)
        except OSError:
            continue
        idents.add((st.st_dev, st.st_ino))
        hints.update(files.holders(c.path))
    hints.discard(os.getpid())
    proof = holds_file(idents)
    out = []
    for pid in sorted(hints):
        fd = open_proven(pid, proof)
        if fd is not None:
            out.append((pid, fd))
    return out


def _signal(claims: Iterable[ClaimInfo | WaiterInfo], sig: int) -> list[int]:
    """Send ``sig`` to the proven holders of these files (to the process group of one that
    leads its group, as berth run's command does); the pids signalled."""
    done = []
    for pid, fd in _proven(claims):
        try:
            if signal_proven(fd, pid, sig, group=True):
                done.append(pid)
        finally:
            os.close(fd)
    return done


def end_waiters(ledger: Ledger, waiters: list[WaiterInfo], grace: float) -> None:
    """SIGTERM the processes holding these waiter files, SIGKILL those left after ``grace``
    seconds, and remove the files (a waiter file only its maker holds is no waiter)."""
    if not waiters:
        return
    names = {w.name for w in waiters}
    _signal(waiters, signal.SIGTERM)
    watcher = watcher_for(ledger.path)
    deadline = time.monotonic() + grace
    while True:
        alive = [w for w in ledger.scan(bodies=False).waiters if w.name in names]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            break
        watcher.wait(min(left, 0.2))
    _signal(alive, signal.SIGKILL)
    for w in waiters:
        with contextlib.suppress(OSError):
            os.unlink(w.path)


def wait_ended(ledger: Ledger, claims: list[ClaimInfo], timeout: float) -> list[ClaimInfo]:
    """Wait up to ``timeout`` seconds for ``claims`` to end; those still alive."""
    names = {c.name for c in claims}
    watcher = watcher_for(ledger.path)
    deadline = time.monotonic() + timeout
    while True:
        alive = [c for c in ledger.scan(bodies=False).claims if c.name in names]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return alive
        watcher.wait(min(left, 0.2))


def end_claims(ledger: Ledger, claims: list[ClaimInfo], grace: float) -> list[int]:
    """SIGTERM the holders of ``claims``, SIGKILL those left after ``grace`` seconds, then
    remove the claim files. Returns the pids that had to be killed."""
    _signal(claims, signal.SIGTERM)
    alive = wait_ended(ledger, claims, grace)
    killed = _signal(alive, signal.SIGKILL) if alive else []
    for c in claims:  # dead now, or about to be: the name goes in any case
        try:
            os.unlink(c.path)
        except OSError:
            pass
    return killed
