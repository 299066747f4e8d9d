"""The files of the claim ledger: their names, their bodies, and whether they are alive.

Three kinds of file live in the ledger directory:

``c.<gpu>.<lease>.<share-milli>.<mem-MiB>``
    one claim of one GPU. The name carries everything a capacity check needs, so a corrupt
    body never loses capacity information. The holder keeps a shared ``flock`` on it for its
    whole life: the file is alive exactly as long as some process holds it open.
``w.<ticket>.<lease>``
    one waiter (a process waiting for GPUs), alive while its owner holds it; the body names
    the GPU capacity it reserves (see :mod:`berth.claims.fairness`), its mtime when the waiter
    last showed life (:func:`renew`; see :mod:`berth.claims.state`).
``t.<lease>.<n>``
    a file being created (locked, then renamed into place, so that no claim or waiter file is
    ever visible unlocked). Nobody looks at one before it is TEMP_GRACE seconds old (it may
    not be locked yet); an older one nobody holds is removed by its owner or root.

A body is one JSON object with a ``crc`` (CRC-32 of the rest): a truncated or scribbled body
is detected, reported, and rebuilt from what the kernel knows (owner, holders' pids).
Files are opened read-only by everyone but their holder, so probing a file never raises the
``IN_CLOSE_WRITE`` event that wakes waiters (see :mod:`berth.claims.wake`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLAIM = "c."
WAITER = "w."
TEMP = "t."
TEMP_GRACE = 60.0  # seconds: a temporary file younger than this may be in the making
_ESC = {"%": "%25", ".": "%2E", "/": "%2F"}


def escape(uuid: str) -> str:
    """A GPU uuid made safe for a file name field (no ``.`` or ``/``)."""
    if "." not in uuid and "/" not in uuid and "%" not in uuid:
        return uuid  # (NVML's uuids: a claim made per start, not a character at a time)
    return "".join(_ESC.get(ch, ch) for ch in uuid)


def unescape(text: str) -> str:
    if "%" not in text:
        return text
    from urllib.parse import unquote  # rare: an escaped uuid

    return unquote(text)


def claim_name(uuid: str, lease: str, share: float, mem: int | None) -> str:
    milli = max(1, min(1000, round(share * 1000)))
    mib = 0 if not mem else -(-mem // (1024 * 1024))  # round up: never under-declare
    return f"{CLAIM}{escape(uuid)}.{lease}.{milli}.{mib}"


def parse_claim_name(name: str) -> tuple[str, str, float, int] | None:
    """(gpu uuid, lease id, share, memory bytes) from a claim file name; None if malformed."""
    parts = name.split(".")
    if len(parts) != 5 or parts[0] != "c":
        return None
    _, gpu, lease, milli, mib = parts
    if not (gpu and lease.isalnum() and milli.isdigit() and mib.isdigit()):
        return None
    share = int(milli) / 1000
    if not 0 < share <= 1:
        return None
    return unescape(gpu), lease, share, int(mib) * 1024 * 1024


def waiter_name(ticket: int, lease: str) -> str:
    return f"{WAITER}{ticket:020d}.{lease}"


def parse_waiter_name(name: str) -> tuple[int, str] | None:
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "w" or not parts[1].isdigit() or not parts[2].isalnum():
        return None
    return int(parts[1]), parts[2]


def new_lease_id() -> str:
    return os.urandom(6).hex()


def encode_body(fields: dict[str, Any]) -> bytes:
    """JSON of ``fields`` with a ``crc`` over the rest."""
    import json  # heavy (~1 ms): only once a claim is made or read

    core = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    crc = zlib.crc32(core.encode())
    return (core[:-1] + f',"crc":{crc}}}\n').encode() if fields else b'{"crc":0}\n'


_CRC = b',"crc":'


def decode_body(data: bytes) -> dict[str, Any] | None:
    """The fields of a body, or None if it is truncated, malformed or fails its checksum.
    A body as :func:`encode_body` writes it is checked over its own text (one decode, no
    encode again: a supervisor names its job in each claim it is given, the daemon reads
    others' bodies at every scan); any other is decoded, encoded again and checked."""
    import json  # heavy (~1 ms): only once a claim is made or read

    cut = data.rfind(_CRC)
    if cut > 0 and data.endswith(b"}\n") and data[cut + 7 : -2].isdigit():
        text = data[:cut] + b"}"
        if zlib.crc32(text) == int(data[cut + 7 : -2]) and b'"crc"' not in text:
            try:
                obj = json.loads(text)
            except (ValueError, UnicodeDecodeError):
                obj = None
            if type(obj) is dict:
                return obj
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("crc"), int):
        return None
    crc = obj.pop("crc")
    core = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    if zlib.crc32(core.encode()) != crc:
        return None
    return obj


def write_body(fd: int, body: bytes) -> None:
    """Replace the content of the file open on ``fd`` (the holder's own descriptor). Takes no
    lock: a reader that catches it half-written sees a bad checksum and reads again."""
    os.pwrite(fd, body, 0)
    os.ftruncate(fd, len(body))


def create_locked(dirpath: str, final: str, body: bytes, tag: str) -> int:
    """Create ``dirpath/final`` holding ``body``, shared-locked by the returned descriptor.

    The file is written and locked under a temporary name and then renamed into place, so it
    is never visible unlocked. It is created readable by its owner only, so no other user
    can take a lock on it before ours (an exclusive one would make us wait); only then is it
    made readable by all. The descriptor is open read-write: its last close (the holder's
    death) raises IN_CLOSE_WRITE, which wakes waiters."""
    tmp = os.path.join(dirpath, f"{TEMP}{tag}.{os.getpid()}")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # (contended at most by our own or root's quick look)
        os.fchmod(fd, 0o644)  # whatever the umask: readable by all, writable by the owner
        os.write(fd, body)
        os.rename(tmp, os.path.join(dirpath, final))
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return fd


def read_only(fd: int) -> int:
    """A second, read-only descriptor of the claim file open on ``fd``, holding its own shared
    lock: what a holder passes on to a process that must keep the claim alive but may not
    change it (a daemon job gets these: through the read-write one it inherited, it could
    rewrite what its root-owned claim says, or fill the ledger's filesystem). Close-on-exec
    like every other; the caller makes it inheritable."""
    ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        a, b = os.fstat(fd), os.fstat(ro)
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
            raise OSError(errno.ESTALE, "the claim file changed under its descriptor")
        fcntl.flock(ro, fcntl.LOCK_SH)
    except BaseException:
        os.close(ro)
        raise
    return ro


class Probe:
    """What one look at a ledger file found. ``alive`` is None if the file is gone, or is no
    ledger file at all (see :func:`probe`)."""

    __slots__ = ("alive", "body", "corrupt", "ctime", "dev", "ino", "mtime", "nlink", "uid")

    def __init__(self) -> None:
        self.alive: bool | None = None
        self.uid = -1
        self.dev = 0
        self.ino = 0
        self.nlink = 0
        self.mtime = 0.0
        self.ctime = 0  # ns: when it was placed (or last changed; see berth.claims.grant)
        self.body: dict[str, Any] | None = None
        self.corrupt = False


_OPEN_PROBE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)  # our trouble, not the file's


def probe(path: str, *, read: bool = True) -> Probe:
    """Is the file at ``path`` held (flock'ed) by a living process? Reads its body if so.

    Opens read-only (no IN_CLOSE_WRITE on close), never following a symlink and never
    blocking (a FIFO). Anything but a regular file readable by every user is no ledger file
    (``alive`` None), whoever looks: a symlink, FIFO, socket or directory planted under a
    ledger name, or a file its owner made unreadable (only its owner can). A file that can be
    locked exclusively has no holder left: it is dead for good (files are never visible
    unlocked, never reused)."""
    p = Probe()
    try:
        fd = os.open(path, _OPEN_PROBE)
    except OSError as e:
        if e.errno in _EXHAUSTED:
            raise
        return p  # gone (ENOENT), a symlink (ELOOP), unreadable (EACCES), a socket (ENXIO)...
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & stat.S_IROTH:
            return p
        p.uid, p.dev, p.ino, p.nlink = st.st_uid, st.st_dev, st.st_ino, st.st_nlink
        p.mtime, p.ctime = st.st_mtime, st.st_ctime_ns
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Holders only ever hold LOCK_SH; an exclusive lock is another prober's look at
            # a dead file. So: alive iff a shared lock can be had.
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                p.alive = False
                return p
            p.alive = True
        else:
            p.alive = False
            return p
        if read:
            p.body = decode_body(os.pread(fd, 65536, 0))
            if p.body is None:  # caught half-way through a rewrite? look once more
                p.body = decode_body(os.pread(fd, 65536, 0))
            p.corrupt = p.body is None
    finally:
        os.close(fd)
    return p


def renew(fd: int) -> None:
    """Show that the holder of ``fd`` is alive and answering: set the file's mtime to now.
    (Raises only IN_ATTRIB, which wakes nobody; see :mod:`berth.claims.wake`.)"""
    os.utime(fd)


def read_locks() -> list[str]:
    """The lines of /proc/locks (none if it cannot be read)."""
    try:
        with open("/proc/locks") as f:
            return f.read().splitlines()
    except OSError:
        return []


_INIT_PID_NS = 0xEFFFFFFC  # the inode of the initial pid namespace (PROC_PID_INIT_INO)


def locked_inodes() -> set[int] | None:
    """Inodes of the files some process holds a flock on, from /proc/locks (the kernel's
    word: one read, however many files the ledger holds); None where it may not list them
    all: outside the initial pid namespace, /proc/locks leaves out the locks of processes its
    namespace cannot see (and those of dead takers whose descriptors live on elsewhere).
    Matched by inode alone (overlay filesystems report another device there): a file of
    another filesystem with the same inode is merely looked at.

    None too when /proc/locks did not come in one read: the kernel hands it out a page at a
    time (~70 locks) and lets go of its lock list between reads, so a lock released meanwhile
    shifts the rest and a living lock is skipped; only one read is a snapshot. Then the caller
    looks at each file (exact; slower only where planted files abound)."""
    try:
        if os.stat("/proc/self/ns/pid").st_ino != _INIT_PID_NS:
            return None
        fd = os.open("/proc/locks", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1 << 20)
            if data and os.read(fd, 1 << 20):  # more than one read: no snapshot
                return None
        finally:
            os.close(fd)
    except OSError:
        return None
    out: set[int] = set()
    for line in data.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == b"FLOCK":  # ("->": a blocked waiter, no holder)
            ino = parts[5].rpartition(b":")[2]
            if ino.isdigit():
                out.add(int(ino))
    return out


def lock_owners(st: os.stat_result, lines: list[str] | None = None) -> list[int]:
    """Pids that took a flock on the file ``st`` describes, from /proc/locks (readable by
    all, unlike another user's /proc/PID/fd; ``lines``: as :func:`read_locks` read them).
    Matched by device and inode; by inode alone when no device matches (overlay filesystems
    report the underlying device there). Hints, never identities: the pid that took a lock
    may have handed it on and died, and its number gone to another process."""
    exact: list[int] = []
    loose: list[int] = []
    if lines is None:
        lines = read_locks()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        devino = parts[5].rsplit(":", 1)
        if len(devino) != 2 or not parts[4].isdigit() or devino[1] != str(st.st_ino):
            continue
        (exact if devino[0] == dev else loose).append(int(parts[4]))
    pids = exact or loose
    return [p for p in pids if p > 0 and os.path.exists(f"/proc/{p}")]


def locked_by(path: str, pid: int, uid: int, lines: list[str] | None = None) -> bool:
    """Does process ``pid``, of user ``uid``, hold the lock on ``path`` (/proc/locks, readable
    by all: the pid that took the lock; ``lines`` as :func:`read_locks` read them)?"""
    try:
        st = os.stat(path)
        return pid in lock_owners(st, lines) and os.stat(f"/proc/{pid}").st_uid == uid
    except OSError:
        return False


def holders(path: str) -> list[int]:
    """Pids of the processes that have ``path`` open: those whose /proc/PID/fd this user may
    read, plus the lock's owner from /proc/locks."""
    try:
        target = os.stat(path)
    except OSError:
        return []
    out = lock_owners(target)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fddir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fddir)
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"{fddir}/{fd}")
            except OSError:
                continue
            if st.st_ino == target.st_ino and st.st_dev == target.st_dev:
                out.append(int(entry))
                break
    return sorted(set(out))
