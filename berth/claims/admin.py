"""Ending other people's claims: who may (the admin), and how (SIGTERM, then SIGKILL).

The admin is root or a member of ``[claims] admin_group``. Anyone may end their own claims.
The holders of a claim are the processes that have its file open (found in /proc), so the
claim ends exactly when they are gone; a holder that leads its process group (berth run's
command does) is signalled with its whole group.
"""

from __future__ import annotations

import os
import signal
import time

from berth.claims import files
from berth.claims.wake import watcher_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from berth.claims.ledger import ClaimInfo, Ledger
    from berth.config import Config


def is_admin(cfg: Config) -> bool:
    if os.geteuid() == 0:
        return True
    group = cfg.admin_group
    if not group:
        return False
    import grp  # rare: an admin group

    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return False
    return gid == os.getegid() or gid in os.getgroups()


def holder_pids(claims: Iterable[ClaimInfo]) -> list[int]:
    """The processes holding these claims open (not this one)."""
    out: set[int] = set()
    for c in claims:
        out.update(files.holders(c.path))
    out.discard(os.getpid())
    return sorted(out)


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            if os.getpgid(pid) == pid and pid != os.getpgrp():
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_claims(ledger: Ledger, claims: list[ClaimInfo], grace: float) -> list[int]:
    """SIGTERM the holders of ``claims``, SIGKILL those left after ``grace`` seconds, then
    remove the claim files. Returns the pids that had to be killed."""
    names = {c.name for c in claims}
    pids = holder_pids(claims)
    _signal(pids, signal.SIGTERM)
    watcher = watcher_for(ledger.path)
    deadline = time.monotonic() + grace
    while True:
        alive = [c for c in ledger.scan(bodies=False).claims if c.name in names]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            break
        watcher.wait(min(left, 0.2))
    killed = holder_pids(alive) if alive else []
    if killed:
        _signal(killed, signal.SIGKILL)
    for c in claims:  # dead now, or about to be: the name goes in any case
        try:
            os.unlink(c.path)
        except OSError:
            pass
    return killed
