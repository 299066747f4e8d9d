"""The daemon's socket and its locks: one daemon per socket and state directory (a lock
nobody else can take first), a socket directory only the right users can reach, and the
socket bound with the mode its users need (0600, or 0666 for the system daemon)."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import stat

from berth.claims.paths import RUN_DIR
from berth.errors import BerthError

log = logging.getLogger("berth.daemon")


def lock(path: str, what: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BerthError(
            f"another berth daemon already uses {what}; stop it first (`berth daemon --stop`)"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def check_socket_dir(path: str, system: bool) -> None:
    """The socket's directory must be one nobody else can change our socket in: ours or
    root's, and not writable by others unless sticky (as ``/run/berth``, where only root can
    remove root's socket). Made if missing: 0700 for a user's daemon; 0755 for the system one,
    except ``/run/berth``, the claim ledger's directory, made as the claims make it (1777)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if system and path == RUN_DIR:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mkdir(path, 0o700)
            os.chmod(path, 0o1777)
        else:
            os.makedirs(path, mode=0o755 if system else 0o700, exist_ok=True)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(path)
    me = os.geteuid()
    sticky = st.st_mode & stat.S_ISVTX
    if not stat.S_ISDIR(st.st_mode):
        raise BerthError(f"socket directory {path} is not a directory")
    if st.st_uid not in (0, me) or (st.st_mode & 0o022 and not sticky):
        raise BerthError(
            f"socket directory {path} (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}) may be changed by others, who could replace "
            "the daemon's socket: remove it, or choose another with --socket / BERTH_SOCKET"
        )


def shared_dir(path: str) -> bool:
    """Is the directory writable by others (sticky, as /run/berth)?"""
    return bool(os.stat(path).st_mode & 0o022)


def bind(path: str, system: bool) -> socket.socket:
    """Listen on ``path``: mode 0600 (its user only), or 0666 for the system daemon (every
    local user; SO_PEERCRED says who each is). A socket file left by a dead daemon is
    removed; so is one another user put where the system daemon's goes (a squatter: in a
    sticky directory anyone may create that name while the daemon is down)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and st.st_uid not in (0, os.geteuid()):
        log.warning("removing %s: it belongs to uid %d, not to this daemon", path, st.st_uid)
        os.unlink(path)
    elif st is not None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # nobody answers: a leftover of a dead daemon
        else:
            raise BerthError(f"a berth daemon already answers on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o666 if system else 0o600)
    sock.listen(1024)
    sock.setblocking(False)
    return sock
