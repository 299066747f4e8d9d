"""The places `berth admin doctor` checks, each a file of the host or a directory: the claims
directory, the system daemon's socket and state directory (free space, filesystem, a leftover
daemon). Each check returns :class:`berth.admin.verdict.Check` lines; none changes anything
(a probe file made to test a directory is removed at once)."""

from __future__ import annotations

import errno
import os
import socket
import stat

from berth.admin.verdict import FAIL, OK, WARN, Check

MIN_FREE = 1 << 30  # below this the state dir's disk is a warning...
LOW_FREE = 100 << 20  # ... and below this a failure (jobs wait when it is full: issue 41.7)
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "fuse.sshfs", "9p", "lustre", "gpfs", "ceph")


def claims_dir(path: str) -> list[Check]:
    """The ledger every user shares: root's, mode 1777 (sticky, world-writable), made at boot."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [Check("claims dir", FAIL, f"{path} does not exist",
                      "systemd-tmpfiles --create /etc/tmpfiles.d/berth.conf (berth admin install)")]  # fmt: skip
    if not stat.S_ISDIR(st.st_mode):
        return [Check("claims dir", FAIL, f"{path} is not a directory",
                      "move it aside; then systemd-tmpfiles --create /etc/tmpfiles.d/berth.conf")]  # fmt: skip
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != 0:
        return [Check("claims dir", FAIL, f"{path} belongs to uid {st.st_uid}, not root: they "
                      "could remove or rename others' claims", f"chown root: {path}")]  # fmt: skip
    if mode != 0o1777:
        return [Check("claims dir", FAIL, f"{path} has mode {mode:04o}, not 1777 (sticky, "
                      "every user adds claims, only the owner removes them)",
                      f"chmod 1777 {path}")]  # fmt: skip
    boot = os.path.exists("/etc/tmpfiles.d/berth.conf") or not path.startswith("/run/")
    if not boot:
        return [Check("claims dir", WARN, f"{path}: root's, 1777, but no tmpfiles rule makes "
                      "it at boot (a user who makes it first would own it)",
                      "berth admin install")]  # fmt: skip
    return [Check("claims dir", OK, f"{path}: root's, mode 1777")]


def socket_file(path: str) -> list[Check]:
    """The system daemon's socket: root's, 0666, and a daemon listening (else: stale)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [Check("socket", WARN, f"no socket at {path}: the system daemon is not running",
                      "systemctl enable --now berth")]  # fmt: skip
    if not stat.S_ISSOCK(st.st_mode):
        return [Check("socket", FAIL, f"{path} is not a socket", "move it aside; restart berth")]
    if st.st_uid != 0:
        return [Check("socket", FAIL, f"{path} belongs to uid {st.st_uid}, not root: clients "
                      "refuse it", "systemctl restart berth (it replaces the socket)")]  # fmt: skip
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return [Check("socket", WARN, f"{path} is stale: no daemon listens on it",
                          "systemctl start berth (journalctl -u berth says why it stopped)")]  # fmt: skip
        return [Check("socket", WARN, f"cannot connect to {path}: {e.strerror}", "")]
    finally:
        s.close()
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o666:
        return [Check("socket", WARN, f"{path} has mode {mode:04o}, not 0666: some users "
                      "cannot reach the daemon", "systemctl restart berth")]  # fmt: skip
    return [Check("socket", OK, f"{path}: root's, 0666, a daemon listens")]


def state_dir(path: str, socket_answers: bool) -> list[Check]:
    """The state directory: root's, 0711; its free space and filesystem; a daemon holding it
    that no socket answers for (a leftover daemon)."""
    if not os.path.isdir(path):
        return [Check("state dir", WARN, f"{path} does not exist yet (the daemon makes it)",
                      "systemd-tmpfiles --create /etc/tmpfiles.d/berth.conf")]  # fmt: skip
    out = []
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid() or mode & 0o066:
        out.append(Check("state dir", FAIL, f"{path}: uid {st.st_uid}, mode {mode:04o}: "
                         "others could read or change the queue", f"chmod 0711 {path}"))  # fmt: skip
    else:
        out.append(Check("state dir", OK, f"{path}: mode {mode:04o}"))
    out.append(_space(path))
    lock = os.path.join(path, "daemon.lock")
    if os.path.exists(lock) and _held(lock) and not socket_answers:
        out.append(Check("leftover daemon", WARN, f"a daemon holds {lock} but no socket "
                         "answers for it", f"find it: fuser {lock}; stop it"))  # fmt: skip
    return out


def _space(path: str) -> Check:
    sv = os.statvfs(path)
    free = sv.f_bavail * sv.f_frsize
    kind = _fs_type(path)
    said = f"{path}: {_size(free)} free on {kind}"
    if kind in NETWORK_FS:
        return Check("state disk", FAIL, said + ": SQLite's locks are not safe on a network "
                      "filesystem", "a local disk ([daemon] system_state_dir)")  # fmt: skip
    if free < LOW_FREE:
        return Check("state disk", FAIL, said + ": jobs wait for disk to be written",
                     f"free space on {path}'s filesystem")  # fmt: skip
    if free < MIN_FREE:
        return Check("state disk", WARN, said, f"free space on {path}'s filesystem")
    return Check("state disk", OK, said)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "K", "M", "G"):
        if value < 1024:
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}T"


def _fs_type(path: str) -> str:
    """The filesystem type of the mount ``path`` is on (/proc/self/mounts; "unknown")."""
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def _held(lock: str) -> bool:
    import fcntl  # rare: a lock file exists

    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
