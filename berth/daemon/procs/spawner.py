"""A fork server for supervisors: a small fresh process, started by the daemon before it
grows, that forks supervisors (:mod:`berth.daemon.supervisor.serve`) on request.

Why: ``fork()`` of the daemon costs more as its memory grows (100,000 queued jobs), and it
would run on the daemon's own core. The spawner is small, and forks on the other core while
the daemon goes on serving. Requests travel over a SOCK_SEQPACKET pair: a JSON message (a slot
number, the owner) with the new supervisor's channel to the daemon attached (SCM_RIGHTS). The
reply carries the supervisor's pid and a pidfd for it, opened before the spawner could reap
it, so the daemon can never watch a recycled pid.

The spawner exits when the daemon goes away (end of file on its socket); the supervisors it
forked live on (their own sessions), exactly as if the daemon had forked them.
"""

from __future__ import annotations

import array
import gc
import json
import os
import signal
import socket
import sys

import berth
from berth.daemon.supervisor import serve
from berth.daemon.supervisor.attempt import MAX_MESSAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _signal = signal
else:
    import _signal  # per request: signal's wrapper would turn the old mask into enum members

_CHLD = {signal.SIGCHLD}

MAX_FDS = 64
READY = b"ready"


class Spawner:
    """The daemon's handle on the fork server."""

    def __init__(self) -> None:
        self.alive = True
        parent, child = pair()
        try:
            pid: int | None = _start_fresh(child)
        except OSError:
            pid = None
        if pid is not None:
            child.close()  # so that its death reads as the end of the socket
            if _ready(parent):
                self.pid, self.sock = pid, parent
                return
            _kill(pid)  # it could not start (cannot import berth that way?)
            parent.close()
            parent, child = pair()
        # Fork one from the daemon instead (bigger, so each fork of it costs more).
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            code = 1
            try:
                parent.close()
                code = _serve(child)
            finally:
                os._exit(code)
        child.close()
        if not _ready(parent):
            raise OSError("the supervisor fork server did not start")
        self.pid, self.sock = pid, parent

    def request(self, slot: int, owner: dict[str, Any], chan: int) -> None:
        """Ask for a supervisor for ``owner`` serving the channel end ``chan`` (sent along;
        the caller closes its copy). The reply names ``slot``."""
        data = json.dumps({"slot": slot, "owner": owner})
        socket.send_fds(self.sock, [data.encode()], [chan])

    def replies(self) -> list[tuple[dict[str, Any], int | None]]:
        """Every reply waiting: (message, pidfd or None). Non-blocking."""
        out: list[tuple[dict[str, Any], int | None]] = []
        while True:
            try:  # (socket.recv_fds ignores its flags before Python 3.12)
                msg, anc, _, _ = self.sock.recvmsg(
                    MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_DONTWAIT
                )
            except BlockingIOError:
                return out
            if not msg:
                self.alive = False
                return out
            fds: list[int] = []
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += list(array.array("i", data[: len(data) - len(data) % 4]))
            out.append((json.loads(msg), fds[0] if fds else None))
            for extra in fds[1:]:
                os.close(extra)

    def close(self) -> None:
        self.sock.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


# The fork server runs in a fresh interpreter without ``site`` that imports only what a
# supervisor needs: every supervisor is a fork of it, and a fork (and each page the child then
# touches) costs in proportion to the parent's memory. Forked from the daemon (even early) it
# would carry asyncio, sqlite3, logging and the config: ~0.5 ms more per job, measured.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from berth.daemon.procs.spawner import serve_fd; serve_fd(int(sys.argv[2]))"
)


def pair() -> tuple[socket.socket, socket.socket]:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s in (parent, child):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    return parent, child


def _ready(sock: socket.socket, timeout: float = 15.0) -> bool:
    """Wait for the fork server's first message, ``ready``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(16) == READY
    except OSError:
        return False
    finally:
        sock.settimeout(None)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _start_fresh(child: socket.socket) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(berth.__file__)))
    fd = child.fileno()
    os.set_inheritable(fd, True)
    try:
        argv = [sys.executable, "-I", "-S", "-c", _BOOT, root, str(fd)]
        return os.posix_spawn(sys.executable, argv, dict(os.environ))
    finally:
        os.set_inheritable(fd, False)


def serve_fd(fd: int) -> None:  # pragma: no cover - runs in the fork server
    """Entry point of the fresh fork server (see :data:`_BOOT`)."""
    code = 1
    try:
        code = _serve(socket.socket(fileno=fd))
    finally:
        os._exit(code)


def _reap(*_: object) -> None:
    try:
        while True:
            pid, _status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
    except ChildProcessError:
        return


def _serve(sock: socket.socket) -> int:
    # Every object inherited from the daemon goes to the permanent generation, and nothing is
    # collected in the supervisors: a collection in a forked child would walk (and so copy,
    # page by page) every object of the parent.
    gc.collect()
    gc.freeze()
    serve.set_name(b"berth-forksrv")  # for ps -o comm, top, pkill
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the daemon's fate, not a signal, ends us
    signal.signal(signal.SIGCHLD, _reap)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})
    keep = sock.fileno()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass
    try:
        sock.send(READY)
    except OSError:
        return 0
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        except ConnectionError:
            return 0
        if not msg:
            return 0
        req = json.loads(msg)
        reply: dict[str, Any] = {"slot": req["slot"]}
        pidfd: list[int] = []
        # No reaping between the fork and pidfd_open, so the pid cannot be recycled.
        _signal.pthread_sigmask(signal.SIG_BLOCK, _CHLD)
        try:
            if len(fds) != 1:
                raise OSError(f"expected one channel, got {len(fds)} descriptors")
            pid = serve.start(fds[0], req["owner"])
            reply["pid"] = pid
            pidfd = [os.pidfd_open(pid)]
        except OSError as e:
            if "pid" not in reply:
                reply["error"] = f"cannot start a supervisor: {e.strerror or e}"
        finally:
            _signal.pthread_sigmask(signal.SIG_UNBLOCK, _CHLD)
            for fd in fds:
                os.close(fd)
        try:
            socket.send_fds(sock, [json.dumps(reply).encode()], pidfd)
        except OSError:
            return 0
        finally:
            for fd in pidfd:
                os.close(fd)
