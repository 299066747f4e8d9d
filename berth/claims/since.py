"""What the ledger's events since a waiter's last look mean for it (see
:mod:`berth.claims.waiting`): whether a whole look is due, or the waiter may sleep on.

Every claim that ends and every waiter that leaves or changes what it reserves wakes every
waiter (:mod:`berth.claims.wake`). A waiter used to answer each wake-up with a whole look:
the GPUs read from NVML, every ledger file probed and read. With W waiters a release cost W
looks of W files each, and about three times that with the departure of the waiter that took
the GPU and the next one's new reservation. Now a waiter keeps what its last look found
(:class:`LastLook`) and applies the events to it: a claim that ended is gone, an older
waiter that changed is read again (that one file), a younger waiter is ignored (what it
reserves never binds an older one), and the claims made since are found by one listing of
the names (a probe of each new one). It looks again only when, on what it knows, it could claim now, or what it would
reserve changed.

No wake-up is lost: what it knows never blocks more than a look would find. Claims made
since are counted only once probed alive (a hard link: not counted); an older waiter's
reservation only as its file says now (read as a look reads it); the GPU of a claim that
ended is taken as having no process and no memory used until the look (the holder's
processes may linger in NVML for a moment); an older waiter that stops answering is looked
at again when its reservation lapses (:func:`berth.claims.waiting._sleep`). A ledger of
more than MOST_NAMES names (a flood: each owner's share of a look is bounded,
:mod:`berth.claims.bounds`) makes every event a look, as before. What NVML alone shows
(use outside berth) waits for the poll, as it did.

In order: where what it would reserve changed but an older waiter that answers and reserves
nothing yet may take that capacity first (the next in line behind a waiter that claimed), it
lets that waiter look first: until that waiter's file changes (an event: read again, the
reservation is its) or DEFER seconds pass. So a release makes a look for the waiter it
serves, and one for the next in line, not one for every waiter.
"""

from __future__ import annotations

import os
import time

from berth.claims import files
from berth.claims.fairness import idle_view, reservation
from berth.claims.listing import list_names
from berth.claims.state import LedgerScan, WaiterInfo, merge

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from berth.claims.fairness import Reservation
    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Claimed
    from berth.selection.filters import Filters
    from berth.selection.outside import OutsideRule

DEFER = 1.0  # seconds the next in line has to take a changed reservation before a look
MOST_NAMES = 256  # ledger names beyond which every event makes a look


class LastLook:
    """What a waiter's last look found, kept up to date from the events' names."""

    def __init__(
        self,
        path: str,
        ticket: int,
        lease: str,
        reserve: Reservation,
        gpus: Sequence[GpuSnapshot],
        filters: Filters,
        banned: Mapping[int, str] | None,
        outside: OutsideRule | None,
        state: LedgerScan,
        skip: Collection[str],
    ) -> None:
        """A waiter's (``ticket``, ``lease``, what it reserves) last look at the ledger in
        ``path``: ``gpus``, ``filters``, ``banned``, ``outside`` and ``state`` as its attempt
        had them; ``skip``: leases it works under (:meth:`LedgerScan.inherited`)."""
        self.path = path
        self.ticket, self.lease, self.reserve = ticket, lease, reserve
        self.gpus = list(gpus)
        self.filters = filters
        self.banned = banned
        self.outside = outside
        self.skip = set(skip)
        self.claims = {c.name: (c.uuid, c.share, c.memory) for c in state.claims}
        for c in state.claims:
            if c.lease in self.skip:
                del self.claims[c.name]
        self.pids = {u: h.pids for u, h in state.held(gpus, skip=self.skip).items()}
        self.older = {w.name: w for w in state.waiters if w.ticket < ticket}
        self.freed: set[str] = set()  # GPUs whose claims ended since
        self.dead: set[str] = set()  # claim names probed and found no claim
        self.defer: float | None = None  # time.monotonic() until which the next in line may

    def ahead(self) -> list[str]:
        """The files of the older waiters that reserve something (their lapse frees it)."""
        return [w.path for w in self.older.values() if w.reserve]

    def position(self) -> int:
        return sum(1 for w in self.older.values() if not w.stale)

    def due(self, names: Sequence[str]) -> bool:
        """Apply these events' names (those :class:`berth.claims.wake.Watcher` returns, and
        the lapsed files of :meth:`ahead`): is a whole look due?"""
        changed: list[str] = []
        ended = False
        for name in names:
            if name.startswith(files.CLAIM):
                ended = True
                gone = self.claims.pop(name, None)
                if gone is not None:
                    self.freed.add(gone[0])
            elif name.startswith(files.WAITER):
                parsed = files.parse_waiter_name(name)
                if parsed is not None and parsed[0] > self.ticket:
                    continue  # younger: what it reserves never binds this waiter
                changed.append(name)
            else:
                return True  # ("*": the events were lost, or polled without inotify)
        if not (ended or changed):
            return False
        try:
            if not self._refresh(changed):
                return True
        except OSError:
            return True
        return self._decide()

    def _refresh(self, changed: list[str]) -> bool:
        """Read the changed older waiters again, and probe the claims made since. False where
        this look cannot stand for a whole one (a flood of names, a hard link)."""
        locks: list[str] | None = None
        now = time.time()
        for name in changed:
            self.older.pop(name, None)
            parsed = files.parse_waiter_name(name)
            if parsed is None or parsed[0] >= self.ticket:
                continue
            path = os.path.join(self.path, name)
            p = files.probe(path)
            if not p.alive:
                continue
            if p.nlink > 1:
                return False
            if locks is None:
                locks = files.read_locks()
            w = WaiterInfo(name, path, *parsed)
            w.fill(p, now, locks)
            self.older[name] = w
        names = list_names(self.path)
        if len(names) > MOST_NAMES:
            return False
        for name in names:
            if not name.startswith(files.CLAIM) or name in self.claims or name in self.dead:
                continue
            parsed_claim = files.parse_claim_name(name)
            if parsed_claim is None or parsed_claim[1] in self.skip:
                self.dead.add(name)
                continue
            p = files.probe(os.path.join(self.path, name), read=False)
            if p.alive and p.nlink == 1:
                self.claims[name] = (parsed_claim[0], parsed_claim[2], parsed_claim[3])
            else:  # (dead, no ledger file, or a second name of one: not counted)
                self.dead.add(name)
        return True

    def _decide(self) -> bool:
        from berth.selection.choose import Claimed, select  # heavy (~1.5 ms): as ledger's

        share: dict[str, float] = {}
        mem: dict[str, int] = {}
        for uuid, s, m in self.claims.values():
            share[uuid] = share.get(uuid, 0.0) + s
            mem[uuid] = mem.get(uuid, 0) + m
        claims: dict[str, Claimed] = {
            u: Claimed(min(share[u], 1.0), mem[u], self.pids.get(u, frozenset())) for u in share
        }
        older = LedgerScan([], list(self.older.values())).reserved(self.ticket, skip=self.lease)
        gpus = [
            idle_view(g, Claimed(1.0, 0, frozenset(p.pid for p in g.processes or ())))
            if g.uuid in self.freed
            else g
            for g in self.gpus
        ]
        sel = select(gpus, self.filters, merge(claims, older), self.banned, self.outside)
        if sel.ok:
            return True
        keep = [u for u, _, _ in self.reserve]
        want = reservation(gpus, self.filters, sel.qualified, claims, older, self.banned, keep)
        if want == self.reserve:
            self.defer = None
            return False
        if not any(not w.stale and not w.reserve for w in self.older.values()):
            return True  # first of those who reserve nothing: nobody to let look first
        now = time.monotonic()
        if self.defer is None:
            self.defer = now + DEFER
        return now >= self.defer
