"""The claim ledger: scan the living claims, and claim GPUs all or none, without any lock.

Truth is the set of living claim files (see :mod:`berth.claims.files`). A claim is made by
creating the claim files of ALL chosen GPUs, then checking that they fit next to every other
living claim, and withdrawing them all if not (:mod:`berth.claims.verify`): no lock, so no
user of the host can make anybody wait, the daemon's event loop included. Dead files (no
holder left) are ignored at once and removed by whoever may remove them (their owner, or
root; a daemonless claimer beside a flood of them, only some); nothing needs cleaning for
correctness.

Parts: :mod:`berth.claims.state` (what a scan reads: claims, waiters, what they hold),
:mod:`berth.claims.claim` (the GPUs this process claimed), :mod:`berth.claims.procs`
(process ancestry, user names, command lines). Their names are re-exported here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time

from berth.claims import files
from berth.claims.bounds import MAX_FILES_PER_UID, MAX_LOOKUPS_PER_UID, Shares
from berth.claims.claim import Claim
from berth.claims.listing import Listing, list_names
from berth.claims.ownfiles import is_ours
from berth.claims.paths import check_claimable, claims_dir
from berth.claims.procs import command_line, descends_from, user_name
from berth.claims.state import ClaimInfo, LedgerScan, WaiterInfo, merge
from berth.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

    from berth.config import Config
    from berth.devices.model import GpuSnapshot

    Chosen = Sequence[GpuSnapshot] | Sequence[tuple[str, int | None]] | Sequence[str]

__all__ = [
    "Claim",
    "ClaimInfo",
    "Ledger",
    "LedgerScan",
    "WaiterInfo",
    "command_line",
    "descends_from",
    "merge",
    "user_name",
]

TRIES = 4  # try_claim: attempts when claims made at the same moment withdraw each other


def _older(path: str, now: float, seconds: float) -> bool:
    try:
        return now - os.lstat(path).st_mtime > seconds
    except OSError:
        return False


class Ledger:
    """The claim ledger in directory ``path`` (default: :func:`berth.claims.paths.claims_dir`)."""

    def __init__(
        self, path: str | None = None, cfg: Config | None = None, *, keep: bool = False
    ) -> None:
        """``keep``: keep the directory's names from inotify between looks (a long-lived
        process that scans on every turn: the daemon; see :mod:`berth.claims.listing`)."""
        if path is None:
            path = claims_dir(cfg)
        self.path = path
        self.euid = os.geteuid()
        self._claimable = False
        self._over: dict[str, int] = {}  # name -> inode of files past their owner's share
        self.listing = Listing(path, MAX_FILES_PER_UID) if keep else None
        # A claim file's name parsed: once a name while a kept listing lists it.
        self.parse_claim = self.listing.parsed if self.listing else files.parse_claim_name

    def names(self) -> dict[str, int]:
        """The ledger's names now (name -> inode; not to be changed). Raises OSError."""
        if self.listing is not None:
            return self.listing.names()
        return list_names(self.path)

    def _locked(self) -> set[int] | None:
        """For a look that keeps nothing (status, select, a daemonless claim): the inodes
        some process locks. A living ledger file is locked by its holder, so the names of
        others are dead, left unseen (issue 41.2: 100,000 planted files cost such a look a
        system call each; their removal is left to the daemons, whose listing is kept). What
        the look finds is the ledger as /proc/locks was read: a file locked later is as if
        made after the look (a claim checked then sees this one: :mod:`~.verify`)."""
        return files.locked_inodes() if self.listing is None else None

    def _names_locked(self, clean: bool = False) -> dict[str, int]:
        """The names a look that keeps nothing considers (see :meth:`_locked`); ``clean``:
        and some others, which it removes if dead and its own (all of them but in a flood:
        at most MAX_FILES_PER_UID; a flood of planted files is the daemons' to remove)."""
        locked = self._locked()
        if locked is None:
            return self.names()
        if not clean:
            return list_names(self.path, locked)
        names = self.names()
        unlocked = [n for n, i in names.items() if i not in locked]
        if len(unlocked) <= MAX_FILES_PER_UID:
            return names
        some = set(unlocked[:MAX_FILES_PER_UID])
        return {n: i for n, i in names.items() if i in locked or n in some}

    def _looked_at(self, names: dict[str, int]) -> tuple[dict[str, int], Collection[str]]:
        """The names past their owner's share in the last scan, still the same files (skipped
        unseen), and the other names: what a look considers. (Set operations of C speed:
        100,000 names set aside cost a look a few milliseconds; a kept listing forgets a name
        set aside at its first event, so it costs nothing more.)"""
        if self.listing is not None:
            return self.listing.aside, self.listing.considered(names)  # (names: just applied)
        over = dict(self._over.items() & names.items()) if self._over else {}
        return over, (names.keys() - over.keys()) if over else names.keys()

    def check_claimable(self) -> None:
        """Raise Refused if this process must not claim here (root in another user's
        directory: see :func:`berth.claims.paths.check_claimable`)."""
        if not self._claimable:
            check_claimable(self.path)
            self._claimable = True

    # -- reading -----------------------------------------------------------------------------

    def scan(
        self, *, bodies: bool = True, clean: bool = False, skip: Collection[str] = ()
    ) -> LedgerScan:
        """The living claims and waiters. ``bodies``: read the claims' bodies (who, pids,
        command: capacity is in the names); waiters' are always read (their reservations).
        ``clean``: remove the dead files we may remove. ``skip``: lease ids whose claims the
        caller leaves out of what it uses (its own: the daemon's jobs'): their files of ours
        are neither probed nor returned (nor removed: the caller releases its own)."""
        claims: list[ClaimInfo] = []
        waiters: list[WaiterInfo] = []
        seen: set[tuple[object, ...]] = set()
        locks: list[str] | None = None  # /proc/locks, read once if there are waiters
        try:
            names = self._names_locked(clean)
        except FileNotFoundError:
            return LedgerScan([], [])
        except OSError as e:
            raise Refused(
                f"cannot list the claims directory {self.path!r}: {e.strerror}; ask the admin "
                "to make it mode 1777 (install -d -m 1777 /run/berth), or set BERTH_CLAIMS_DIR"
            ) from None
        now = time.time()
        over, looked = self._looked_at(names)
        shares = Shares(over)
        prefix = os.path.join(self.path, "")
        for name in sorted(looked):
            kind = name[:2]
            parsed_claim = self.parse_claim(name) if kind == files.CLAIM else None
            parsed_waiter = files.parse_waiter_name(name) if kind == files.WAITER else None
            if kind != files.TEMP and parsed_claim is None and parsed_waiter is None:
                continue
            path = prefix + name  # (os.path.join's: a name has no "/")
            if parsed_claim is not None and parsed_claim[1] in skip:
                if is_ours(self.listing, path, name, self.euid):
                    continue  # (another's file named with our lease is theirs: ownfiles.py)
            if kind == files.TEMP and not (clean and _older(path, now, files.TEMP_GRACE)):
                continue  # perhaps not locked yet: in the making, not dead
            read = kind == files.WAITER or (bodies and kind == files.CLAIM)
            p = shares.probe(name, path, read, parsed_claim)
            if p is None or p.alive is None:
                continue
            if not p.alive:
                if clean:
                    self._remove_dead(path, p)
                continue
            if kind == files.TEMP:
                continue  # an old one, held: its maker is still at it
            if parsed_claim is not None:
                key: tuple[object, ...] = (p.dev, p.ino, parsed_claim[0])
                c = ClaimInfo(name, path, parsed_claim)
                c.fill(p, find_holders=shares.lookups.get(p.uid, 0) < MAX_LOOKUPS_PER_UID)
                if c.corrupt:
                    shares.lookups[p.uid] = shares.lookups.get(p.uid, 0) + 1
                if key in seen or (p.nlink > 1 and c.corrupt and p.body is not None):
                    continue  # a second name of one claim; a hard link its body disowns
                seen.add(key)
                claims.append(c)
            elif parsed_waiter is not None and (p.dev, p.ino) not in seen:
                seen.add((p.dev, p.ino))
                w = WaiterInfo(name, path, *parsed_waiter)
                if locks is None:
                    locks = files.read_locks()
                w.fill(p, now, locks)
                waiters.append(w)
        self._over = shares.over  # (a kept listing's own: it forgets what changes)
        waiters.sort(key=lambda w: (w.ticket, w.lease))
        return LedgerScan(claims, waiters)

    def _remove_dead(self, path: str, p: files.Probe) -> None:
        if self.euid in (0, p.uid):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def repair(self, state: LedgerScan) -> int:
        """Rewrite corrupt bodies of claims we own (root: all) from what the kernel knows.
        Returns how many were rewritten. Only the very file scanned is written (a regular
        file of one name, same owner, same inode), and only if its body is still corrupt:
        root never writes through a name somebody swapped or linked meanwhile."""
        done = 0
        for c in state.claims:
            if not c.corrupt or self.euid not in (0, c.uid):
                continue
            body = files.encode_body(
                {
                    "v": 1, "lease": c.lease, "gpu": c.uuid, "gpus": c.gpus, "index": c.index,
                    "share": c.share, "mem": c.memory, "uid": c.uid, "user": c.user,
                    "pids": c.pids, "command": command_line(c.pids[0]) if c.pids else None,
                    "since": c.since, "label": "rebuilt", "repaired": time.time(),
                }
            )  # fmt: skip
            flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            try:
                fd = os.open(c.path, flags)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if (
                    (st.st_dev, st.st_ino) == c.ident
                    and st.st_nlink == 1
                    and st.st_uid == c.uid
                    and files.decode_body(os.pread(fd, 65536, 0)) is None
                ):
                    files.write_body(fd, body)
                    done += 1
            except OSError:
                pass
            finally:
                os.close(fd)
        return done

    def withdraw(self, lease_id: str | None) -> int:
        """Remove the claim files of lease ``lease_id`` that this process's user owns: the
        claim ends for everybody now, whoever still holds a descriptor or a lock on them
        (the daemon, when a job's end is recorded: a job's leftovers, or another user
        sitting on a shared lock, must not keep its GPUs claimed). How many were removed."""
        if not lease_id:
            return 0
        try:
            names = self.names()
        except OSError:
            return 0
        done = 0
        for name in [n for n in names if lease_id in n]:  # (no parse of planted names)
            parsed = self.parse_claim(name)
            if parsed is None or parsed[1] != lease_id:
                continue
            path = os.path.join(self.path, name)
            try:
                if os.lstat(path).st_uid == self.euid:
                    os.unlink(path)
                    done += 1
            except OSError:
                pass
        return done

    # -- claiming ----------------------------------------------------------------------------

    def claim(
        self,
        chosen: Chosen,
        share: float,
        mem: int | None,
        *,
        memory_total: Mapping[str, int | None] | None = None,
        skip: Collection[str] = (),
        label: str | None = None,
        command: str | None = None,
        pids: Iterable[int] = (),
    ) -> Claim | None:
        """Claim ``chosen`` (snapshots, (uuid, index) pairs or uuids): all or none. Never
        waits. Returns None, leaving nothing behind, if the claim does not fit next to the
        living claims (counted when checked, after the files were made: see
        :mod:`berth.claims.verify`); the caller may look again.

        Declared memory is checked against ``memory_total`` (default: the snapshots'). Leases
        in ``skip`` (this user's) are not counted. Older waiters' reservations are the
        caller's to respect (see :meth:`try_claim` and
        :func:`berth.claims.waiting.claim_or_enqueue`).
        Raises Refused if this process may not claim here, OSError if files cannot be made."""
        from berth.claims.verify import conflicts  # not for a scan (status, select)

        self.check_claimable()
        pairs: list[tuple[str, int | None]] = []
        totals: dict[str, int | None] = {}
        for g in chosen:
            if isinstance(g, str):
                pairs.append((g, None))
            elif isinstance(g, tuple):
                pairs.append(g)
            else:
                pairs.append((g.uuid, g.index))
                totals[g.uuid] = g.memory_total
        totals.update(memory_total or {})
        claim = self._create(pairs, share, mem, label=label, command=command, pids=pids)
        try:
            names = self._names_locked()  # (/proc/locks read after this claim's files were made)
            looked = self._looked_at(names)[1]
            why = conflicts(self.path, claim, totals, skip, looked, names, self.parse_claim)
        except BaseException:
            claim.release()
            raise
        if why is not None:
            claim.release()
            return None
        return claim

    def _create(
        self,
        pairs: list[tuple[str, int | None]],
        share: float,
        mem: int | None,
        *,
        label: str | None,
        command: str | None,
        pids: Iterable[int],
    ) -> Claim:
        """Make the claim files of ``pairs`` ((uuid, index)): all, or none and raise."""
        claim = Claim(files.new_lease_id(), [u for u, _ in pairs], [i for _, i in pairs])
        claim.share, claim.mem = share, mem
        claim.pids = sorted({os.getpid(), *pids})
        claim.command = command or command_line()
        claim.label = label
        try:
            for k, (uuid, index) in enumerate(pairs):
                name = files.claim_name(uuid, claim.lease_id, share, mem)
                fd = files.create_locked(
                    self.path, name, claim.body(uuid, index), f"{claim.lease_id}.{k}"
                )
                claim.fds.append(fd)
                claim.paths.append(os.path.join(self.path, name))
                st = os.fstat(fd)  # (the file made: what its check knows it by)
                claim.idents.append((st.st_dev, st.st_ino))
                if self.listing is not None:
                    self.listing.expect(name, st.st_ino)
        except OSError as e:
            claim.release()
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise Refused(
                    f"cannot create claim files in {self.path!r}: {e.strerror}; ask the admin "
                    "to make it mode 1777, or set BERTH_CLAIMS_DIR"
                ) from None
            raise
        return claim

    def try_claim(
        self,
        uuids: Sequence[str],
        *,
        share: float = 1.0,
        mem: int | None = None,
        memory_total: Mapping[str, int | None] | None = None,
        indices: Mapping[str, int] | None = None,
        label: str | None = None,
        command: str | None = None,
        respect_waiters: bool = True,
    ) -> Claim | None:
        """Claim exactly these GPUs now, or return None if one of them lacks the capacity
        (share, declared memory against ``memory_total``, older waiters' reservations).
        Never waits for anybody; all or none. (A claim made at the same moment by another
        process may make both withdraw: then it looks again, a few times, milliseconds
        apart.)"""
        if not 0 < share <= 1:
            raise UsageError(f"share {share!r}: must be above 0 and at most 1")
        if len(set(uuids)) != len(uuids) or not uuids:
            raise UsageError(f"GPUs {list(uuids)!r}: name each GPU once, at least one")
        totals = memory_total or {}
        pairs = [(u, (indices or {}).get(u)) for u in uuids]
        for attempt in range(TRIES):
            if attempt:
                import random  # rare: a race

                time.sleep(random.uniform(0, 0.002 * 2**attempt))
            state = self.scan(bodies=False, clean=True)
            held = state.held()
            if respect_waiters:
                held = merge(held, state.reserved(None))
            for uuid in uuids:
                h = held.get(uuid)
                h_share, h_mem = (h.share, h.mem) if h is not None else (0.0, 0)
                total = totals.get(uuid)
                if h_share + share > 1 + 1e-9:
                    return None
                if mem and total is not None and h_mem + mem > total:
                    return None
            claim = self.claim(pairs, share, mem, memory_total=totals, label=label, command=command)
            if claim is not None:
                return claim
        return None
