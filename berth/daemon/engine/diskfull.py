"""A full state disk: the starts it stops wait, and the daemon says so (issue 41.7; DESIGN.md
invariant 10: a resource running out never turns an accepted job into a failure).

A start whose write-ahead cannot be committed (the state database cannot grow), or whose
supervisor cannot write its run file or open its logs for want of space, never ran its
command: the engine takes it back (:func:`berth.core.transition.unstart`: the job PENDING
again, no attempt counted, no retry burned) and tells :class:`DiskFull`, which

- holds the scheduling passes back (no start is tried while the disk is full: no busy loop),
- lets one pass try again after a pause that doubles from :data:`RETRY_FIRST` to
  :data:`RETRY_MAX` seconds, and at once when a commit succeeds after failing (space came
  back),
- gives the jobs it stopped the pending reason ``StateDiskFull`` (with the path and the
  error; ``StateUnwritable`` for another error, as a database another process keeps
  locked), a line for ``berth status`` and the gauge ``berth_state_disk_full`` of
  ``/metrics``,
- logs one line when the disk is found full and one when a start goes through again (its
  command runs: its supervisor wrote ``go`` in its run file, or ended it; a commit alone may
  go through on a full disk, where SQLite reuses its WAL's space).

A start that met a limit of the system (no descriptor, memory or process left:
:mod:`berth.daemon.engine.exhausted`) is held back the same way, its reason ``SystemLimit``,
tried again after at most :data:`berth.daemon.engine.exhausted.RETRY_MAX` seconds, and
``/metrics``' ``berth_starts_exhausted`` is 1 meanwhile.
"""

from __future__ import annotations

import errno
import logging
import sqlite3

from berth.claims.together import claim_each
from berth.core.states import Reason
from berth.daemon.engine import exhausted

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Sequence

    from berth.claims.claim import Claim
    from berth.claims.together import Claimer, Want

log = logging.getLogger("berth.daemon")

RETRY_FIRST = 0.5  # seconds before the first try after the disk was found full; doubles
RETRY_MAX = 30.0
CONFIRM_FIRST = 0.02  # seconds before asking whether a start committed passed its gate
CONFIRM_MAX = 5.0  # (asked until then; after it, its supervisor's answer says)

FULL, LIMIT, UNWRITABLE = Reason.STATE_DISK_FULL, Reason.SYSTEM_LIMIT, Reason.STATE_UNWRITABLE
# What each kind of wait says: what happened; until what; who fixes it; the line at its end.
_SAYS = {
    FULL: ("the state disk is full", "space returns", "the admin frees space",
           "the state disk has room again"),
    LIMIT: ("starts meet a limit of the system (descriptors, memory, processes)",
            "the limit is no longer met", "descriptors, memory or processes free",
            "starts go through again"),
    UNWRITABLE: ("the state database cannot record starts", "it can",
                 "the state database can be written", "the state database records starts again"),
}  # fmt: skip


def is_full(e: BaseException | str | None) -> bool:
    """Is ``e`` a full disk: SQLite's SQLITE_FULL, ENOSPC or EDQUOT (or their words)?"""
    if isinstance(e, sqlite3.Error) and getattr(e, "sqlite_errorcode", None) == 13:
        return True  # SQLITE_FULL
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e or "")
    return any(w in text for w in ("database or disk is full", "No space left", "quota"))


class DiskFull:
    """Whether starts wait for space, and why (see the module)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, kick: Callable[[], None]) -> None:
        self.loop = loop
        self.kick = kick
        self.why: str | None = None  # while full: what failed, naming the path
        self.since = 0.0  # (the loop's time)
        self.stopped = 0  # starts taken back since the disk was found full
        self.kind = FULL  # why starts wait: FULL, LIMIT (SystemLimit) or UNWRITABLE
        self._probe = False  # one pass may try to start again
        self._pause = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._confirm: asyncio.TimerHandle | None = None  # (:meth:`committed`)

    @property
    def full(self) -> bool:
        return self.why is not None

    def blocks(self) -> bool:
        """Whether a pass must start nothing now (the disk is full and no try is due). A
        pass let through makes the try, and the next one is due after a longer pause (in
        case this one has nothing to start, or its start fails too)."""
        if self.why is None:
            return False
        if not self._probe:
            return True
        self._probe = False
        self._arm()
        return False

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        most = exhausted.RETRY_MAX if self.kind is LIMIT else RETRY_MAX
        self._pause = min(most, self._pause * 2 or RETRY_FIRST)
        self._timer = self.loop.call_later(self._pause, self._due)

    def stopped_start(self, job_id: int, why: str) -> None:
        """The start of ``job_id`` was taken back for want of space (``why``: what failed,
        with the path)."""
        if self.why is None:
            self.since = self.loop.time()
            self.kind = (
                FULL if is_full(why) else LIMIT if exhausted.is_exhausted(why) else UNWRITABLE
            )
            log.error(
                "%s: %s; jobs whose turn comes stay pending (%s) and start when %s",
                self._what(), why, self.label(), self._until(),
            )  # fmt: skip
        self.why = why
        self.stopped += 1
        self._probe = False
        if self._confirm is not None:  # (a start taken back after its commit: still full)
            self._confirm.cancel()
            self._confirm = None
        if self._timer is None:
            self._arm()

    def claim_each(self, ledger: Claimer, wants: Sequence[Want]) -> list[Claim | None]:
        """A pass's claims (:func:`berth.claims.together.claim_each`); all None if they could
        not be made for a limit of the system met (no descriptor for the claim files: none
        stands): starts wait as :meth:`stopped_start` says, and no pass tries again before
        its pause is over."""
        try:
            return claim_each(ledger, wants)
        except OSError as e:
            if not exhausted.is_exhausted(e):
                raise
            self.stopped_start(0, f"cannot claim its GPUs: {e}")
            return [None] * len(wants)

    def _due(self) -> None:
        self._timer = None
        if self.why is not None:
            self._probe = True
            self.kick()

    def room(self) -> None:
        """A commit succeeded after commits had failed: try to start again now."""
        if self.why is not None:
            self._probe = True
            self.kick()

    def committed(self, went: Callable[[], bool | None]) -> None:
        """Starts were committed while the disk was full: their supervisors have yet to write
        ``go`` (which may fail too). ``went()`` says whether one has (None: it cannot tell);
        asked after a short pause, again and again, until it is known (:meth:`started`),
        or the disk is found full again (:meth:`stopped_start`)."""
        if self.why is None:
            return
        if self._confirm is not None:
            self._confirm.cancel()
        self._confirm = self.loop.call_later(CONFIRM_FIRST, self._ask, went, CONFIRM_FIRST)

    def _ask(self, went: Callable[[], bool | None], pause: float) -> None:
        self._confirm = None
        said = went()
        if said or said is None:
            self.started()
        elif self.why is not None and pause < CONFIRM_MAX:
            pause *= 2
            self._confirm = self.loop.call_later(pause, self._ask, went, pause)

    def started(self) -> None:
        """A start went through (its command runs): the disk has room again."""
        if self._confirm is not None:
            self._confirm.cancel()
            self._confirm = None
        if self.why is None:
            return
        log.warning(
            "%s after %.0fs: queued jobs start (%d start(s) had waited)",
            _SAYS[self.kind][3], self.loop.time() - self.since, self.stopped,
        )  # fmt: skip
        self.why = None
        self.stopped = 0
        self._pause = 0.0
        self._probe = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def disk_full(self) -> bool:
        """Whether starts wait because the disk is full (``/metrics``' gauge)."""
        return self.why is not None and self.kind is FULL

    @property
    def exhausted(self) -> bool:
        """Whether starts wait for a limit of the system (``/metrics``' gauge)."""
        return self.why is not None and self.kind is LIMIT

    def label(self) -> str:
        """``StateDiskFull``, ``SystemLimit``, or ``StateUnwritable`` for another error (a
        locked database, an I/O error)."""
        return str(self.kind)

    def _what(self) -> str:
        return _SAYS[self.kind][0]

    def _until(self) -> str:
        return _SAYS[self.kind][1]

    def reason(self) -> str:
        """The pending reason of a job whose start waits for space."""
        return f"{self.label()}: {self.why}; it starts when {self._until()}"

    def note(self) -> str | None:
        """``berth status``'s line while starts wait."""
        if self.why is None:
            return None
        return (
            f"{self._what()} ({self.why}): queued jobs wait ({self.label()}) until "
            f"{_SAYS[self.kind][2]}"
        )
