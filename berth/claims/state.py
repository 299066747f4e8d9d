"""The living claims and waiters at one moment, as a ledger scan reads them, and what they
hold on each GPU (for selection) or reserve (for fairness). See :mod:`berth.claims.ledger`.

A waiter renews its file's mtime every ``WAITER_RENEW`` seconds while it waits. One that has
not for ``WAITER_STALE`` seconds (stopped with Ctrl-Z, frozen, being debugged) could not take
what it is offered: it is *stale*, and reserves nothing until it answers again (it keeps its
ticket, so it is back in its place in line as soon as it runs). So is a waiter whose file is
dated in the future (a sign of life nobody gave), or is not locked by the living process of
its owner that its body names (a file made by hand, its lock handed on to some other
process): a waiter is honoured only while its own process holds it and shows life.
"""

from __future__ import annotations

import os

from berth.claims import files
from berth.claims.procs import descends_from, user_name

WAITER_RENEW = 1.0  # seconds between a waiting process's signs of life
WAITER_STALE = 3.0  # seconds without one after which its reservation lapses
WAITER_FUTURE = 1.0  # seconds a sign of life may seem ahead of our clock (none is)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Claimed


class ClaimInfo:
    """One living claim of one GPU, as read from the ledger."""

    __slots__ = (
        "command", "corrupt", "gpus", "ident", "index", "label", "lease", "memory", "name",
        "path", "pids", "placed", "share", "since", "uid", "user", "uuid",
    )  # fmt: skip

    def __init__(self, name: str, path: str, parsed: tuple[str, str, float, int]) -> None:
        self.name = name
        self.path = path
        self.uuid, self.lease, self.share, self.memory = parsed
        self.uid = -1
        self.user: str | None = None
        self.pids: list[int] = []
        self.command: str | None = None
        self.since: float | None = None
        self.index: int | None = None
        self.gpus: list[str] = [self.uuid]
        self.label: str | None = None
        self.corrupt = False
        self.ident = (0, 0)  # (device, inode) of the file, as probed
        self.placed = 0  # its file's ctime (ns), as probed: when it was placed (grant.py)

    def fill(self, probe: files.Probe, find_holders: bool = True) -> None:
        """What ``probe`` read; an unreadable body's holders from /proc (``find_holders``:
        a scan bounds how many a user's files may cost it, berth.claims.ledger)."""
        self.uid = probe.uid
        self.ident = (probe.dev, probe.ino)
        self.placed = probe.ctime
        self.user = user_name(probe.uid)  # the file's owner is the holder: never the body
        self.corrupt = probe.corrupt
        body = probe.body or {}
        if body.get("lease") != self.lease or body.get("gpu") != self.uuid:
            self.corrupt = self.corrupt or probe.body is not None
            body = {}
        self.pids = [p for p in body.get("pids", []) if isinstance(p, int)]
        self.command = body.get("command") if isinstance(body.get("command"), str) else None
        since = body.get("since")
        self.since = float(since) if isinstance(since, (int, float)) else None
        self.index = body.get("index") if isinstance(body.get("index"), int) else None
        gpus = body.get("gpus")
        if isinstance(gpus, list) and all(isinstance(g, str) for g in gpus):
            self.gpus = gpus
        self.label = body.get("label") if isinstance(body.get("label"), str) else None
        if self.corrupt and find_holders:
            self.pids = files.holders(self.path)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k not in ("path", "ident", "placed")}


class WaiterInfo:
    """One living waiter: its ticket (arrival order) and the capacity it reserves.

    ``wanted``: the reservation its file names; ``reserve``: what it does reserve, the same
    unless it is ``stale`` (no sign of life for ``age`` > WAITER_STALE seconds, or not
    really waiting: ``lapsed`` says why): nothing."""

    __slots__ = (
        "age", "lapsed", "lease", "name", "path", "pid", "reserve", "stale", "ticket", "uid",
        "wanted", "want",
    )  # fmt: skip

    def __init__(self, name: str, path: str, ticket: int, lease: str) -> None:
        self.name, self.path, self.ticket, self.lease = name, path, ticket, lease
        self.uid = -1
        self.pid: int | None = None
        self.want: str | None = None
        self.wanted: list[tuple[str, float, int]] = []
        self.reserve: list[tuple[str, float, int]] = []
        self.age = 0.0
        self.stale = False
        self.lapsed: str | None = None  # why it reserves nothing (None: it does)

    def fill(self, probe: files.Probe, now: float, locks: list[str] | None = None) -> None:
        """From a look at its file (``locks``: /proc/locks, as read once for the scan)."""
        self.uid = probe.uid
        age = now - probe.mtime
        self.age = max(0.0, age)
        body = probe.body or {}
        self.pid = body.get("pid") if isinstance(body.get("pid"), int) else None
        # A sign of life from the future is none (a file dated by hand would never lapse);
        # and the waiting process is the one that holds the file, owned by its owner.
        if age < -WAITER_FUTURE:
            self.lapsed = "its sign of life is dated in the future"
        elif age > WAITER_STALE:
            self.lapsed = f"stopped or not answering for {age:.0f} s"
        elif self.pid is None or not files.locked_by(self.path, self.pid, probe.uid, locks):
            self.lapsed = "not held by the process it names"
        self.stale = self.lapsed is not None
        self.want = body.get("want") if isinstance(body.get("want"), str) else None
        reserve = body.get("reserve")
        for item in reserve if isinstance(reserve, list) else []:
            if (
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], str)
                and isinstance(item[1], (int, float))
                and isinstance(item[2], int)
            ):
                self.wanted.append((item[0], float(item[1]), item[2]))
        self.reserve = [] if self.stale else self.wanted


class LedgerScan:
    """The living claims and waiters (oldest first) at one moment."""

    __slots__ = ("claims", "waiters")

    def __init__(self, claims: list[ClaimInfo], waiters: list[WaiterInfo]) -> None:
        self.claims = claims
        self.waiters = waiters

    def held(
        self, gpus: Sequence[GpuSnapshot] = (), skip: Iterable[str] = ()
    ) -> dict[str, Claimed]:
        """GPU uuid -> what berth claims hold on it (but leases ``skip``). The pids include GPU
        processes that descend from a holder (a training script's workers): berth's own."""
        from berth.selection.choose import Claimed  # heavy (~1.5 ms): not for status without claims

        share: dict[str, float] = {}
        memory: dict[str, int] = {}
        pids: dict[str, set[int]] = {}
        skipped = set(skip)
        for c in self.claims:
            if c.lease in skipped:
                continue
            share[c.uuid] = share.get(c.uuid, 0.0) + c.share
            memory[c.uuid] = memory.get(c.uuid, 0) + c.memory
            pids.setdefault(c.uuid, set()).update(c.pids)
        for g in gpus:
            own = pids.get(g.uuid)
            if own and g.processes:
                for p in g.processes:
                    if p.pid not in own and descends_from(p.pid, own):
                        own.add(p.pid)
        return {u: Claimed(min(share[u], 1.0), memory[u], frozenset(pids[u])) for u in share}

    def inherited(self) -> set[str]:
        """Leases this process works under: ``$BERTH_LEASE`` (set by ``berth run`` for its
        command) when an ancestor of this process holds it. A script run by ``berth run``
        that claims GPUs itself (``berth.acquire``, GPUScheduler) may use that capacity
        instead of waiting for itself forever."""
        lease = os.environ.get("BERTH_LEASE")
        if not lease:
            return set()
        for c in self.claims:
            if (
                c.lease == lease
                and c.uid == os.geteuid()
                and descends_from(os.getpid(), set(c.pids))
            ):
                return {lease}
        return set()

    def reserved(self, before: int | None, skip: str | None = None) -> dict[str, Claimed]:
        """GPU uuid -> capacity reserved by living waiters older than ticket ``before``
        (all waiters when None), except the waiter of lease ``skip``."""
        from berth.selection.choose import Claimed  # heavy (~1.5 ms): not for status without claims

        out: dict[str, Claimed] = {}
        for w in self.waiters:
            if (before is not None and w.ticket >= before) or w.lease == skip:
                continue
            for uuid, share, mem in w.reserve:
                h = out.get(uuid)
                out[uuid] = Claimed(
                    min(1.0, (h.share if h else 0.0) + share), (h.mem if h else 0) + mem
                )
        return out


def merge(a: Mapping[str, Claimed], b: Mapping[str, Claimed]) -> dict[str, Claimed]:
    from berth.selection.choose import Claimed  # heavy (~1.5 ms): not for status without claims

    out = dict(a)
    for uuid, h in b.items():
        g = out.get(uuid)
        out[uuid] = (
            h if g is None else Claimed(min(1.0, g.share + h.share), g.mem + h.mem, g.pids | h.pids)
        )
    return out
