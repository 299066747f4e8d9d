"""The claim ledger: scan the living claims, and claim GPUs atomically under one short lock.

Truth is the set of living claim files (see :mod:`berth.claims.files`). Every claim is made
under an exclusive ``flock`` of ``<dir>/.lock``: scan the living claims and waiters, compute
what is held on each GPU (plus what older waiters reserve), choose, and create the claim
files of ALL chosen GPUs or none. Dead files (no holder left) are ignored at once and removed
by whoever may remove them (their owner, or root); nothing needs cleaning for correctness.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time

from berth.claims import files
from berth.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any

    from berth.config import Config
    from berth.devices.model import GpuSnapshot
    from berth.select import Held

LOCK = ".lock"


class ClaimInfo:
    """One living claim of one GPU, as read from the ledger."""

    __slots__ = (
        "command", "corrupt", "gpus", "index", "label", "lease", "memory", "name", "path",
        "pids", "share", "since", "uid", "user", "uuid",
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

    def fill(self, probe: files.Probe) -> None:
        self.uid = probe.uid
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
        if self.corrupt:
            self.pids = files.holders(self.path)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if k not in ("path",)}


class WaiterInfo:
    """One living waiter: its ticket (arrival order) and the capacity it reserves."""

    __slots__ = ("lease", "name", "path", "pid", "reserve", "ticket", "uid", "want")

    def __init__(self, name: str, path: str, ticket: int, lease: str) -> None:
        self.name, self.path, self.ticket, self.lease = name, path, ticket, lease
        self.uid = -1
        self.pid: int | None = None
        self.want: str | None = None
        self.reserve: list[tuple[str, float, int]] = []

    def fill(self, probe: files.Probe) -> None:
        self.uid = probe.uid
        body = probe.body or {}
        self.pid = body.get("pid") if isinstance(body.get("pid"), int) else None
        self.want = body.get("want") if isinstance(body.get("want"), str) else None
        for item in body.get("reserve", []):
            if (
                isinstance(item, list)
                and len(item) == 3
                and isinstance(item[0], str)
                and isinstance(item[1], (int, float))
                and isinstance(item[2], int)
            ):
                self.reserve.append((item[0], float(item[1]), item[2]))


class State:
    """The living claims and waiters (oldest first) at one moment."""

    __slots__ = ("claims", "waiters")

    def __init__(self, claims: list[ClaimInfo], waiters: list[WaiterInfo]) -> None:
        self.claims = claims
        self.waiters = waiters

    def held(self, gpus: Sequence[GpuSnapshot] = (), skip: Iterable[str] = ()) -> dict[str, Held]:
        """GPU uuid -> what berth claims hold on it (but leases ``skip``). The pids include GPU
        processes that descend from a holder (a training script's workers): berth's own."""
        from berth.select import Held

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
        return {u: Held(min(share[u], 1.0), memory[u], pids[u]) for u in share}

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

    def reserved(self, before: int | None, skip: str | None = None) -> dict[str, Held]:
        """GPU uuid -> capacity reserved by living waiters older than ticket ``before``
        (all waiters when None), except the waiter of lease ``skip``."""
        from berth.select import Held

        out: dict[str, Held] = {}
        for w in self.waiters:
            if (before is not None and w.ticket >= before) or w.lease == skip:
                continue
            for uuid, share, mem in w.reserve:
                h = out.get(uuid)
                out[uuid] = Held(
                    min(1.0, (h.share if h else 0.0) + share), (h.memory if h else 0) + mem
                )
        return out


def merge(a: Mapping[str, Held], b: Mapping[str, Held]) -> dict[str, Held]:
    from berth.select import Held

    out = dict(a)
    for uuid, h in b.items():
        g = out.get(uuid)
        out[uuid] = (
            h
            if g is None
            else Held(min(1.0, g.share + h.share), g.memory + h.memory, g.pids | h.pids)
        )
    return out


def descends_from(pid: int, ancestors: set[int]) -> bool:
    """Is ``pid`` (or one of its ancestors) in ``ancestors``? Reads /proc/PID/stat."""
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            pid = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid in ancestors:
            return True
        if pid <= 1:
            return False
    return False


_users: dict[int, str] = {}


def user_name(uid: int) -> str:
    if uid not in _users:
        import pwd

        try:
            _users[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _users[uid] = str(uid)
    return _users[uid]


def command_line(pid: int | None = None) -> str:
    """The command line of ``pid`` (this process by default), space-joined."""
    if not pid:  # ours is read once per process (a daemon claims for every job)
        me = os.getpid()
        if _own_command[0] != me:
            _own_command[:] = [me, _read_command_line("self")]
        return str(_own_command[1])
    return _read_command_line(str(pid))


_own_command: list[int | str] = [-1, ""]  # [pid, its command line]


def _read_command_line(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").split(b"\0")
        return " ".join(a.decode("utf-8", "replace") for a in argv)[:500]
    except OSError:
        return "?"


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


class Lease:
    """Claims held by this process: one file (and one descriptor) per GPU.

    ``fds`` keep the claims alive: hand them to a child (``pass_fds``) and the claims live as
    long as any process holding them. :meth:`release` ends the claims (unlinks the files);
    :meth:`detach` only closes this process's descriptors (a child keeps the claims)."""

    def __init__(
        self, ledger: Ledger, lease_id: str, uuids: list[str], indices: list[int | None]
    ) -> None:
        self.ledger = ledger
        self.lease_id = lease_id
        self.uuids = uuids
        self.indices = indices
        self.share = 1.0
        self.mem: int | None = None
        self.pids: list[int] = []
        self.command = ""
        self.label: str | None = None
        self.since = time.time()
        self.fds: list[int] = []
        self.paths: list[str] = []

    @property
    def active(self) -> bool:
        return bool(self.fds)

    def body(self, uuid: str, index: int | None) -> bytes:
        return files.encode_body(
            {
                "v": 1, "lease": self.lease_id, "gpu": uuid, "index": index, "gpus": self.uuids,
                "share": self.share, "mem": self.mem or 0, "uid": os.geteuid(),
                "user": user_name(os.geteuid()), "pids": self.pids, "command": self.command,
                "since": self.since, "label": self.label,
            }
        )  # fmt: skip

    def set_pids(self, pids: Iterable[int], command: str | None = None) -> None:
        """Record the holder pids (e.g. after spawning the command that inherits the fds)."""
        self.pids = sorted({*self.pids, *pids})
        if command is not None:
            self.command = command
        with self.ledger.locked():
            for fd, uuid, index in zip(self.fds, self.uuids, self.indices, strict=True):
                files.write_body(fd, self.body(uuid, index))

    def release(self) -> None:
        """End the claims: unlink the files (waking waiters) and close the descriptors."""
        for path, fd in zip(self.paths, self.fds, strict=True):
            try:
                st, mine = os.stat(path), os.fstat(fd)
                if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                    os.unlink(path)
            except OSError:
                pass
        self.detach()

    def detach(self) -> None:
        """Close this process's descriptors; the claims live on in whoever else holds them."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        self.paths = []

    def __repr__(self) -> str:
        return f"Lease({self.lease_id}, gpus={self.indices or self.uuids}, share={self.share:g})"
