"""Force a pid to be reused, as it is on a busy host within minutes (pid_max 32768): root
writes the pid before it to ``/proc/sys/kernel/ns_last_pid`` and forks. Tests that do so
take one lock (a file lock on :data:`LOCK`), so that two of them never race for the counter.

:func:`process_at` starts a long-lived process of a given user under a given pid (a victim
whose pid an attacker saw before): ``/bin/sleep``, in a session of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
from collections.abc import Iterator

LOCK = "/tmp/berth-tests-ns_last_pid.lock"
NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


@contextlib.contextmanager
def _serialised() -> Iterator[None]:
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def process_at(pid: int, user: str, tries: int = 50) -> int:
    """Start ``sleep 600`` as ``user`` with pid ``pid`` (which must be free); its pid. The
    caller reaps it (:func:`end`). Raises AssertionError if another process kept taking
    the pid first."""
    pw = pwd.getpwnam(user)
    with _serialised():
        for _ in range(tries):
            with open(NS_LAST_PID, "w") as f:
                f.write(str(pid - 1))
            child = os.fork()
            if child == 0:  # pragma: no cover - child
                try:
                    os.setsid()
                    os.setgroups([])
                    os.setgid(pw.pw_gid)
                    os.setuid(pw.pw_uid)
                    os.execv("/bin/sleep", ["sleep", "600"])
                finally:
                    os._exit(70)
            if child == pid:
                return child
            end(child)
    raise AssertionError(f"could not start a process under pid {pid}")


def alive(pid: int) -> bool:
    """Is our child ``pid`` still running (not killed, not a zombie)?"""
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return got == 0


def gone(pid: int) -> bool:
    """Has process ``pid`` (anyone's, not only our child) ended: absent, or a zombie?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def end(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
