"""The claim ledger: scan the living claims, and claim GPUs atomically under one short lock.

Truth is the set of living claim files (see :mod:`berth.claims.files`). Every claim is made
under an exclusive ``flock`` of ``<dir>/.lock``: scan the living claims and waiters, compute
what is held on each GPU (plus what older waiters reserve), choose, and create the claim
files of ALL chosen GPUs or none. Dead files (no holder left) are ignored at once and removed
by whoever may remove them (their owner, or root); nothing needs cleaning for correctness.

Parts: :mod:`berth.claims.state` (what a scan reads: claims, waiters, what they hold),
:mod:`berth.claims.lease` (the claims this process holds), :mod:`berth.claims.procs`
(process ancestry, user names, command lines). Their names are re-exported here.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time

from berth.claims import files
from berth.claims.lease import Lease
from berth.claims.procs import command_line, descends_from, user_name
from berth.claims.state import ClaimInfo, State, WaiterInfo, merge
from berth.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from berth.config import Config
    from berth.devices.model import GpuSnapshot

__all__ = [
    "LOCK",
    "LOCK_TIMEOUT",
    "ClaimInfo",
    "Lease",
    "Ledger",
    "State",
    "WaiterInfo",
    "command_line",
    "descends_from",
    "merge",
    "user_name",
]

LOCK = ".lock"

LOCK_TIMEOUT = 30.0  # seconds: the lock is held for milliseconds by any healthy process


def _lock(fd: int, path: str) -> None:
    """Exclusive flock of the ledger lock; a clear error if some process sits on it (e.g. one
    stopped with Ctrl-Z in the middle of a claim) instead of hanging every claimer."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    deadline = time.monotonic() + LOCK_TIMEOUT
    pause = 0.0005
    while True:
        time.sleep(pause)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if time.monotonic() > deadline:
            owners = files.lock_owners(os.fstat(fd))
            who = ", ".join(f"pid {p} ({command_line(p)})" for p in owners) or "an unknown process"
            raise Refused(
                f"the claims lock {path!r} has been held for {LOCK_TIMEOUT:g} s by {who}: "
                "a stopped or stuck process? resume or end it (berth release needs it too)"
            )
        pause = min(pause * 2, 0.005)


class Ledger:
    """The claim ledger in directory ``path`` (default: :func:`berth.claims.paths.claims_dir`)."""

    def __init__(self, path: str | None = None, cfg: Config | None = None) -> None:
        if path is None:
            from berth.claims.paths import claims_dir

            path = claims_dir(cfg)
        self.path = path
        self.euid = os.geteuid()

    # -- locking -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's exclusive lock (every claim and waiter change happens under it)."""
        lock = os.path.join(self.path, LOCK)
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            fd = self._create_lock(lock)
        except PermissionError:
            raise Refused(
                f"cannot open the claims lock {lock!r}: ask the admin to make it readable (mode 0666)"
            ) from None
        try:
            _lock(fd, lock)
            yield
        finally:
            os.close(fd)  # read-only: raises no IN_CLOSE_WRITE

    def _create_lock(self, lock: str) -> int:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            os.fchmod(fd, 0o666)
            return fd
        except FileExistsError:
            return os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except PermissionError:
            raise Refused(
                f"cannot create files in the claims directory {self.path!r}: ask the admin to "
                "make it mode 1777, or set BERTH_CLAIMS_DIR"
            ) from None

    # -- reading -----------------------------------------------------------------------------

    def scan(self, *, bodies: bool = True, clean: bool = False) -> State:
        """The living claims and waiters. ``clean``: remove dead files we may remove (call
        under :meth:`locked`)."""
        claims: list[ClaimInfo] = []
        waiters: list[WaiterInfo] = []
        seen: set[tuple[int, int]] = set()
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return State([], [])
        for name in sorted(names):
            kind = name[:2]
            if kind not in (files.CLAIM, files.WAITER, files.TEMP):
                continue
            path = os.path.join(self.path, name)
            parsed_claim = files.parse_claim_name(name) if kind == files.CLAIM else None
            parsed_waiter = files.parse_waiter_name(name) if kind == files.WAITER else None
            if kind != files.TEMP and parsed_claim is None and parsed_waiter is None:
                continue
            p = files.probe(path, read=bodies and kind != files.TEMP)
            if p.alive is None:
                continue
            if not p.alive:
                if clean:
                    self._remove_dead(path, p)
                continue
            if kind == files.TEMP or (p.dev, p.ino) in seen:
                continue  # being created; or a second name (hard link) of one claim
            if parsed_claim is not None:
                c = ClaimInfo(name, path, parsed_claim)
                c.fill(p)
                if p.nlink > 1 and c.corrupt and p.body is not None:
                    continue  # a hard link under a name its body disowns: not a claim
                seen.add((p.dev, p.ino))
                claims.append(c)
            elif parsed_waiter is not None:
                seen.add((p.dev, p.ino))
                w = WaiterInfo(name, path, *parsed_waiter)
                w.fill(p)
                waiters.append(w)
        waiters.sort(key=lambda w: w.ticket)
        return State(claims, waiters)

    def _remove_dead(self, path: str, p: files.Probe) -> None:
        if self.euid in (0, p.uid):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def repair(self, state: State) -> int:
        """Rewrite corrupt bodies of claims we own (root: all) from what the kernel knows.
        Returns how many were rewritten."""
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
            try:
                fd = os.open(c.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                files.write_body(fd, body)
                done += 1
            finally:
                os.close(fd)
        return done

    # -- claiming ----------------------------------------------------------------------------

    def create(
        self,
        chosen: Sequence[GpuSnapshot] | Sequence[tuple[str, int | None]],
        share: float,
        mem: int | None,
        *,
        label: str | None = None,
        command: str | None = None,
        pids: Iterable[int] = (),
    ) -> Lease:
        """Create the claim files for ``chosen`` (snapshots, or (uuid, index) pairs): all or
        none. Call under :meth:`locked`, after checking capacity."""
        pairs = [
            (g, None) if isinstance(g, str) else (g if isinstance(g, tuple) else (g.uuid, g.index))
            for g in chosen
        ]
        lease = Lease(self, files.new_lease_id(), [u for u, _ in pairs], [i for _, i in pairs])
        lease.share, lease.mem = share, mem
        lease.pids = sorted({os.getpid(), *pids})
        lease.command = command or command_line()
        lease.label = label
        try:
            for k, (uuid, index) in enumerate(pairs):
                name = files.claim_name(uuid, lease.lease_id, share, mem)
                fd = files.create_locked(
                    self.path, name, lease.body(uuid, index), f"{lease.lease_id}.{k}"
                )
                lease.fds.append(fd)
                lease.paths.append(os.path.join(self.path, name))
        except OSError as e:
            lease.release()
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise Refused(
                    f"cannot create claim files in {self.path!r}: {e.strerror}; ask the admin "
                    "to make it mode 1777, or set BERTH_CLAIMS_DIR"
                ) from None
            raise
        return lease

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
    ) -> Lease | None:
        """Claim exactly these GPUs now, or return None if one of them lacks the capacity
        (share, declared memory against ``memory_total``, older waiters' reservations).
        Never waits; all or none. This is the daemon's entry point."""
        if not 0 < share <= 1:
            raise UsageError(f"share {share!r}: must be above 0 and at most 1")
        if len(set(uuids)) != len(uuids) or not uuids:
            raise UsageError(f"GPUs {list(uuids)!r}: name each GPU once, at least one")
        with self.locked():
            state = self.scan(bodies=False, clean=True)
            held = state.held()
            if respect_waiters:
                held = merge(held, state.reserved(None))
            for uuid in uuids:
                h = held.get(uuid)
                h_share, h_mem = (h.share, h.memory) if h is not None else (0.0, 0)
                total = (memory_total or {}).get(uuid)
                if h_share + share > 1 + 1e-9:
                    return None
                if mem and total is not None and h_mem + mem > total:
                    return None
            pairs = [(u, (indices or {}).get(u)) for u in uuids]
            return self.create(pairs, share, mem, label=label, command=command)

