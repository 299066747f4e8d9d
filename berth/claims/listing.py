"""The ledger directory's names, kept up to date from inotify instead of listed on every look.

A long-lived process that scans the ledger on every turn (the daemon) would otherwise list the
whole directory each time: with 100,000 files planted by one user, ~40-70 ms a listing, twice
a scheduling pass (the scan, then the check of a claim: :mod:`berth.claims.verify`), and
every one of them re-examined (issue 41.2). :class:`Listing` lists the directory once, then
applies the kernel's events (``IN_CREATE``, ``IN_MOVED_TO``, ``IN_DELETE``,
``IN_MOVED_FROM``): :meth:`Listing.names` drains them first, so a name created before the
call is in the answer (inotify queues the event before the creating call returns). It maps
each ledger name (``c.``, ``w.``, ``t.``: nothing else is ever looked at) to its inode, as
:func:`os.scandir` gives it, so a scan can tell a name it set aside last time (one owner's
files past their share) from a new file under that name without a system call. An
overflowing event queue, or no inotify at all, means a fresh listing.
"""

from __future__ import annotations

import os

from berth.claims.files import parse_claim_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Container

    Parsed = tuple[str, str, float, int] | None

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
MASK = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF
_GONE = IN_DELETE | IN_MOVED_FROM
_NEW = IN_CREATE | IN_MOVED_TO
_LOST = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF  # list again
KINDS = ("c.", "w.", "t.")


def list_names(path: str, inodes: Container[int] | None = None) -> dict[str, int]:
    """Ledger name -> inode, in one listing (the inodes cost no system call); with
    ``inodes``, only the names of those (and maybe some other names). Raises OSError."""
    with os.scandir(path) as listing:
        if inodes is not None:
            return {e.name: i for e in listing if (i := e.inode()) in inodes}
        return {e.name: e.inode() for e in listing if e.name[:2] in KINDS}


class Listing:
    """The names of ledger directory ``path``, kept from inotify (see the module).

    Each new name's owner is learned once, as its event is applied (one ``lstat``: what the
    kernel vouches for); an owner's names beyond ``cap`` (root's: never) are set aside at
    once (``capped``), so that no look considers them while they stay. :meth:`apply` may be
    called whenever the descriptor is readable (the daemon's loop does), so the owners of
    planted names are learned between passes, not in the pass that starts a job."""

    def __init__(self, path: str, cap: int) -> None:
        from berth.inotify import events, watch  # heavy (ctypes): the daemon's, not a scan's

        self.path = path
        self.fd = watch([path], MASK)
        self._events = events  # (the queued events of self.fd, read without waiting)
        self._names: dict[str, int] | None = None  # None: never listed
        self._stale = True  # list again (events were lost)
        # Names a scan sets aside (one owner's files past their share: name -> inode): kept
        # here, so that each is forgotten at its first event (gone, or a new file).
        self.aside: dict[str, int] = {}
        self.cap = cap
        self.capped: dict[str, int] = {}  # names set aside here: past their owner's cap
        self.owner: dict[str, int] = {}  # name -> uid, of names learned from an event
        self.count: dict[int, int] = {}  # uid -> names of that owner not capped
        self.relisted = 0  # how many times the directory was listed (tests, benchmarks)
        self.euid = os.geteuid()
        # Claim names parsed, once a name while it is listed (a scan, a claim's check and a
        # withdrawal each look at every name: each would parse them all again).
        self._parsed: dict[str, Parsed] = {}
        # Names this process has just made (name -> inode): learned from their own event
        # without a lookup (:meth:`expect`).
        self._expected: dict[str, int] = {}

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def names(self) -> dict[str, int]:
        """Ledger name -> inode now (the caller must not change it). Raises OSError if the
        directory cannot be listed (FileNotFoundError: not there)."""
        self.apply()
        if self._stale or self._names is None:
            self._relist()
        assert self._names is not None
        return self._names

    def _relist(self) -> None:
        """List again; what was learned of the names still there, the same files, stays
        (an overflowing queue, a flood of planted names, costs their owners' lookups once,
        not again for every name)."""
        names = list_names(self.path)
        was = self._names or {}
        self.aside = {n: i for n, i in self.aside.items() if names.get(n) == i}
        self.capped = {n: i for n, i in self.capped.items() if names.get(n) == i}
        self.owner = {n: u for n, u in self.owner.items() if was.get(n, -1) == names.get(n)}
        self._parsed = {n: p for n, p in self._parsed.items() if n in names}
        self._expected = {}
        self.count = {}
        for uid in self.owner.values():
            self.count[uid] = self.count.get(uid, 0) + 1
        self._names, self._stale = names, False
        self.relisted += 1

    def parsed(self, name: str) -> Parsed:
        """:func:`~berth.claims.files.parse_claim_name` of ``name``, parsed once while it is
        listed (a name is its own key: whatever file it names, it parses the same)."""
        try:
            return self._parsed[name]
        except KeyError:
            parsed = parse_claim_name(name)
            if self._names is not None and name in self._names:  # (bounded by the listing)
                self._parsed[name] = parsed
            return parsed

    def expect(self, name: str, ino: int) -> None:
        """This process has just made ``name`` (renamed into place: inode ``ino``, ours): its
        event, when applied, learns it without a lookup. Only the first event of that name
        does (one that follows it, in the same batch, is a new file: looked up)."""
        if self.fd is not None and len(self._expected) < 4096:
            self._expected[name] = ino

    def considered(self, names: dict[str, int] | None = None) -> Collection[str]:
        """The names a look considers: not set aside, here or by the last scan. ``names``:
        what :meth:`names` has just returned for this look (its events applied then: not
        read again)."""
        if names is None:
            names = self.names()
        keys = names.keys() - self.capped.keys() if self.capped else names.keys()
        return keys - self.aside.keys() if self.aside else keys

    def apply(self) -> None:
        """Apply the queued events (or drop the listing: list again at the next look)."""
        if self.fd is None or not self._apply():
            self._stale = True

    def _apply(self) -> bool:
        assert self.fd is not None
        names = self._names
        aside = self.aside
        new: list[str] = []
        for mask, name in self._events(self.fd):
            if mask & _LOST:
                if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    self.close()  # the watch is gone: list on every look from now on
                names = None
                continue
            if names is None or name[:2] not in KINDS:
                continue
            aside.pop(name, None)
            self._forget(name)
            if mask & _GONE:
                names.pop(name, None)
                self._parsed.pop(name, None)
            elif mask & _NEW:
                ino = self._expected.pop(name, None) if mask & IN_MOVED_TO else None
                if ino is not None:  # (our own rename: no lookup)
                    names[name] = ino
                    self._learn(name, ino, self.euid)
                    continue
                names[name] = -1
                new.append(name)
        if names is None:
            self._expected = {}
            return False
        for name in new:  # the owner and inode of each new name, once
            if names.get(name) != -1:
                continue
            try:
                st = os.lstat(os.path.join(self.path, name))
            except OSError:
                del names[name]  # gone again (its deletion's event is queued)
                continue
            names[name] = st.st_ino
            self._learn(name, st.st_ino, st.st_uid)
        return True

    def _learn(self, name: str, ino: int, uid: int) -> None:
        if uid and self.count.get(uid, 0) >= self.cap:
            self.capped[name] = ino
        else:
            self.owner[name] = uid
            self.count[uid] = self.count.get(uid, 0) + 1

    def _forget(self, name: str) -> None:
        if self.capped.pop(name, None) is None:
            uid = self.owner.pop(name, None)
            if uid is not None:
                self.count[uid] -= 1
