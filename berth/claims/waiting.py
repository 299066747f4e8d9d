"""Claim GPUs, waiting for them if need be: attempt a claim, else register as a waiter (see
:mod:`berth.claims.fairness`) and sleep until the ledger changes (inotify), the poll interval
passes (for changes outside berth, seen only through NVML), or an older waiter whose
reservation stands in the way stops answering (its reservation then lapses: see
:mod:`berth.claims.state`). A change looks again only where it may let this waiter claim or
change what it reserves (:mod:`berth.claims.since`). While it sleeps a waiter renews its
file every WAITER_RENEW seconds, so that others know it would still take what it waits for."""

from __future__ import annotations

import contextlib
import os
import random
import time

from berth.claims import files
from berth.claims.fairness import reservation
from berth.claims.ledger import LedgerScan, command_line, merge, user_name
from berth.claims.since import LastLook
from berth.claims.state import WAITER_RENEW, WAITER_STALE
from berth.claims.wake import watcher_for
from berth.errors import WaitTimeout
from berth.selection.choose import select

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from berth.claims.fairness import Reservation
    from berth.claims.ledger import Claim, Ledger
    from berth.claims.wake import Watcher
    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Claimed, Selection
    from berth.selection.filters import Filters
    from berth.selection.outside import OutsideRule

    OnWait = Callable[[int, Selection, LedgerScan], None]


class Waiter:
    """This process's waiter file: its ticket (arrival order) and reservation."""

    def __init__(self, ledger: Ledger, want: str, command: str) -> None:
        self.ledger = ledger
        self.lease = files.new_lease_id()
        self.want = want
        self.command = command
        self.ticket = 0
        self.name = ""
        self.fd = -1
        self.reserve: Reservation = []
        self.since = time.time()
        self.renewed = 0.0  # time.monotonic() of the last sign of life

    def _body(self) -> bytes:
        return files.encode_body(
            {
                "v": 1, "lease": self.lease, "pid": os.getpid(), "uid": os.geteuid(),
                "user": user_name(os.geteuid()), "want": self.want, "command": self.command,
                "since": self.since, "reserve": [list(r) for r in self.reserve],
            }
        )  # fmt: skip

    def register(self, state: LedgerScan) -> None:
        """Take a ticket after every living waiter's (``state``: a fresh scan). A ticket
        from the future (a hand-made file's: berth takes the time) is not followed, so that
        nobody can push everyone's tickets out of reach of those who come later."""
        self.ledger.check_claimable()
        now = time.time_ns()
        last = max((w.ticket for w in state.waiters if w.ticket < now + 10**12), default=0)
        self.ticket = max(now, last + 1)
        self.name = files.waiter_name(self.ticket, self.lease)
        self.fd = files.create_locked(self.ledger.path, self.name, self._body(), f"{self.lease}.w")
        self.renewed = time.monotonic()

    def update(self, reserve: Reservation) -> None:
        """Rewrite the reservation if it changed (wakes younger waiters: IN_MODIFY); renew
        the file in any case."""
        if reserve != self.reserve:
            self.reserve = reserve
            files.write_body(self.fd, self._body())
            self.renewed = time.monotonic()
        else:
            self.renew()

    def renew(self) -> None:
        """A sign of life (the file's mtime; wakes nobody): see :mod:`berth.claims.state`.
        Back from a silence long enough for others to have ignored its reservation (it was
        stopped), it rewrites its file instead, which wakes younger waiters (IN_MODIFY): its
        reservation stands again, from its old place in line."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            if time.monotonic() - self.renewed > WAITER_STALE:
                files.write_body(self.fd, self._body())
            else:
                files.renew(self.fd)
        self.renewed = time.monotonic()

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.ledger.path, self.name))
            os.close(self.fd)
            self.fd = -1


def claim_or_enqueue(
    ledger: Ledger,
    gpus: Sequence[GpuSnapshot],
    filters: Filters,
    waiter: Waiter | None,
    *,
    banned: Mapping[int, str] | None = None,
    label: str | None = None,
    command: str | None = None,
    register: bool = True,
    outside: OutsideRule | None = None,
) -> tuple[Claim | None, Selection, LedgerScan, Waiter | None, int]:
    """One try: claim if what ``filters`` ask can be had now, else register (or update) this
    process's waiter. ``banned``: why the config keeps berth off a GPU (by index);
    ``outside``: the host's outside-use rule, as the daemon applies it. Returns
    (claim, selection, state, waiter, position). A selection that is ``ok`` without a claim
    lost a race with a claim made at the same moment: try again."""
    state = ledger.scan(clean=True)
    inherited = state.inherited()
    claims = state.held(gpus, skip=inherited)
    older = state.reserved(waiter.ticket if waiter else None, skip=waiter.lease if waiter else None)
    sel = select(gpus, filters, merge(claims, older), banned, outside)
    _name_reservations(sel, gpus, claims, older)
    if sel.ok and waiter is not None:
        sel.chosen = _own_first(sel, waiter)
    if sel.ok:
        claim = ledger.claim(
            sel.chosen, filters.share, filters.mem, skip=inherited, label=label, command=command
        )
        if claim is not None:
            if waiter is not None:
                waiter.close()
            return claim, sel, state, None, 0
    if not register:
        return None, sel, state, waiter, len(state.waiters)
    if waiter is None:
        waiter = Waiter(ledger, filters.describe(), command or command_line())
        waiter.register(state)
    if not sel.ok:
        keep = [u for u, _, _ in waiter.reserve]
        waiter.update(reservation(gpus, filters, sel.qualified, claims, older, banned, keep))
    position = sum(1 for w in state.waiters if w.ticket < waiter.ticket and not w.stale)
    return None, sel, state, waiter, position


def _own_first(sel: Selection, waiter: Waiter) -> list[GpuSnapshot]:
    """What a waiter takes: the GPUs it reserved first, where any qualifying GPU would do
    (whole GPUs in random order). One it left free for another would be a GPU no younger
    waiter was told to wait for: each of them would look, and race for it."""
    if not waiter.reserve or sel.filters.order != "random":
        return sel.chosen
    mine = {u for u, _, _ in waiter.reserve}
    own = [g for g in sel.qualified if g.uuid in mine]
    return (own + [g for g in sel.qualified if g.uuid not in mine])[: sel.filters.count]


def _name_reservations(
    sel: Selection,
    gpus: Sequence[GpuSnapshot],
    claims: Mapping[str, Claimed],
    older: Mapping[str, Claimed],
) -> None:
    """Say "reserved for an older waiter" where that, not a claim, is what blocks a GPU."""
    for g in gpus:
        why = sel.rejected.get(g.index)
        if not why or g.uuid not in older:
            continue
        h = claims.get(g.uuid)
        if h is None or h.share + sel.filters.share <= 1 + 1e-9:
            sel.rejected[g.index] = [
                "reserved for an older waiter" if r.startswith("held by berth claims") else r
                for r in why
            ]


def wait_claim(
    ledger: Ledger,
    read: Callable[[], Sequence[GpuSnapshot]],
    filters: Filters,
    *,
    bans: Callable[[Sequence[GpuSnapshot]], Mapping[int, str]] | None = None,
    timeout: float | None = None,
    poll: float = 5.0,
    label: str | None = None,
    command: str | None = None,
    on_wait: OnWait | None = None,
    outside: OutsideRule | None = None,
) -> Claim:
    """Claim what ``filters`` ask for, waiting up to ``timeout`` seconds (None: for ever).

    ``read`` returns fresh GPU snapshots (called on every attempt), ``bans`` why the config
    keeps berth off some of them (by index). Raises WaitTimeout naming what was missing and
    the best selection seen."""
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    waiter: Waiter | None = None
    best: Selection | None = None
    settle = _Settle()
    raced = 0  # claims withdrawn in a row, each for another made at the same moment
    watcher = None  # set up after a first failed attempt (then tried again: no event is lost)
    try:
        while True:
            gpus = read()
            banned = bans(gpus) if bans else None
            claim, sel, state, waiter, position = claim_or_enqueue(
                ledger, gpus, filters, waiter, banned=banned, label=label, command=command,
                outside=outside,
            )  # fmt: skip
            if claim is not None:
                return claim
            if sel.ok and raced < RACES:  # both withdrew: look again after a random pause
                raced += 1
                time.sleep(random.uniform(0, 0.002 * 2**raced))
                continue
            raced = 0
            if best is None or len(sel.qualified) >= len(best.qualified):
                best = sel
            if on_wait is not None:
                on_wait(position, sel, state)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise WaitTimeout(
                    f"waited {timeout:g} s for {filters.describe()}; best seen: "
                    f"{best.explain_shortfall()}"
                )
            if watcher is None:
                watcher = watcher_for(ledger.path)
                watcher.ignore = {waiter.name} if waiter is not None else set()
                continue
            backoff = settle.backoff(now, state, gpus, sel)
            wait = poll if deadline is None else min(poll, deadline - now)
            end = now + (min(wait, backoff) if backoff else wait)
            look = None
            if waiter is not None:
                look = LastLook(
                    ledger.path, waiter.ticket, waiter.lease, waiter.reserve, gpus, filters,
                    banned, outside, state, state.inherited(),
                )  # fmt: skip
            _sleep_on(watcher, waiter, look, end, state, settle, on_wait, (position, sel))
    finally:
        if waiter is not None:
            waiter.close()


RACES = 6  # claims withdrawn in a row before a wait counts as a failed attempt


def _sleep_on(
    watcher: Watcher,
    waiter: Waiter | None,
    look: LastLook | None,
    end: float,
    state: LedgerScan,
    settle: _Settle,
    on_wait: OnWait | None,
    said: tuple[int, Selection],
) -> None:
    """Sleep until ``end`` (time.monotonic()), or until ledger events make a look due:
    where ``look`` (what the last look found) says they change nothing for this waiter, it
    sleeps on (telling ``on_wait`` its new place in line; ``said``: the place and selection
    it was told)."""
    ahead = [
        w.path
        for w in state.waiters
        if w.reserve and (waiter is None or (w.ticket, w.lease) < (waiter.ticket, waiter.lease))
    ]
    position, sel = said
    while True:
        until = end if look is None or look.defer is None else min(end, look.defer)
        names = _sleep(watcher, waiter, until - time.monotonic(), ahead)
        settle.closed |= {n for n in names if n.startswith(files.CLAIM)}
        if not names or look is None or look.due(names):
            return
        ahead = look.ahead()
        if on_wait is not None and look.position() != position:
            position = look.position()
            on_wait(position, sel, state)


def _sleep(watcher: Watcher, waiter: Waiter | None, timeout: float, ahead: list[str]) -> list[str]:
    """Wait up to ``timeout`` seconds for a ledger event (the names it touched), renewing
    ``waiter`` every WAITER_RENEW seconds. Returns early the names of the waiters in
    ``ahead`` (the files of older waiters that reserve something) that left or stopped
    answering: what they reserved is free for the others then, and no file event says so."""
    end = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        left = end - now
        if waiter is not None:
            if now - waiter.renewed >= WAITER_RENEW:
                waiter.renew()
            left = min(left, waiter.renewed + WAITER_RENEW - now)
        if ahead:
            lapse, lapsed = _lapse(ahead)
            if lapsed:
                return lapsed
            left = min(left, lapse)
        names = watcher.wait(max(0.0, left))
        if names or time.monotonic() >= end:
            return names


def _lapse(paths: list[str]) -> tuple[float, list[str]]:
    """Seconds until the first of these waiter files lapses, and the names of those that
    have, or are gone."""
    now = time.time()
    first = WAITER_STALE
    lapsed = []
    for path in paths:
        try:
            mtime = os.lstat(path).st_mtime
        except OSError:
            mtime = 0.0
        if mtime + WAITER_STALE - now + 0.01 <= 0:
            lapsed.append(os.path.basename(path))
        first = min(first, mtime + WAITER_STALE - now + 0.01)
    return max(0.0, first), lapsed


class _Settle:
    """Quick second looks right after a claim ends, for two kernel-side lags:

    - a dead holder's last close is reported (IN_CLOSE_WRITE) just before its lock is
      dropped, so the claim may still look alive for a moment;
    - a dying process closes its claim before the driver drops it from the GPU's process
      list, so for a moment NVML still shows an "outside" process on the freed GPU.

    For up to WINDOW seconds after either, look again after 1, 2, 4... ms instead of sleeping
    until the next event or poll."""

    WINDOW = 0.5

    def __init__(self) -> None:
        self.closed: set[str] = set()  # claim files reported closed
        self.names: dict[str, str] = {}  # living claim file -> GPU uuid, at the last look
        self.freed: set[str] = set()  # GPUs whose claims ended within the window
        self.until = 0.0
        self.step = 0.0

    def backoff(
        self, now: float, state: LedgerScan, gpus: Sequence[GpuSnapshot], sel: Selection
    ) -> float:
        names = {c.name: c.uuid for c in state.claims}
        freed = {u for n, u in self.names.items() if n not in names}
        self.names = names
        self.closed &= names.keys()  # closed but still alive: the lock is on its way out
        if freed or self.closed:
            self.until = (
                max(self.until, now + self.WINDOW) if freed else self.until or now + self.WINDOW
            )
            self.freed |= freed
        if now > self.until:
            self.closed.clear()
            self.freed.clear()
            self.until = 0.0
        index = {g.uuid: g.index for g in gpus}
        lagging = any(
            index.get(u) in sel.rejected
            and not any(r.startswith(("held by berth", "reserved")) for r in sel.rejected[index[u]])
            for u in self.freed
        )
        if self.closed or lagging:
            self.step = min(self.step * 2 or 0.001, 0.064)
            return self.step
        self.step = 0.0
        return 0.0
