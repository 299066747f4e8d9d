"""The I/O of enforcement (:mod:`berth.daemon.engine.enforcer`): a process's identity from
/proc, a message on a user's terminals (as `write` does), the audit log read back."""

from __future__ import annotations

import os
import pwd
import signal

from berth.daemon.engine.resources import _stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass


def identity(pid: int) -> tuple[int, int] | None:
    """(uid, start time in clock ticks) of a living, non-zombie process; None otherwise."""
    stat = _stat(pid)
    if stat is None or stat[0] in b"ZX":
        return None
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    return uid, stat[3]


GONE = "not the same process any more"  # (signal_if's answer where the pid is another's now)


def signal_if(pid: int, uid: int, start: int, sig: int) -> str | None:
    """Signal ``pid`` only if /proc says it is still the process classed (``uid``, ``start``),
    through a pidfd taken before that look: a pid that goes to another process after the
    look is never hit (a pid is not an identity). None once signalled, else why not."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return GONE
    except OSError as e:
        return str(e)
    try:
        if identity(pid) != (uid, start):
            return GONE
        signal.pidfd_send_signal(fd, sig)
    except OSError as e:
        return str(e)
    finally:
        os.close(fd)
    return None


def write_ttys(uid: int, text: str, pts_dir: str | None = None) -> int:
    """Write ``text`` to every terminal of ``uid`` (the pseudo-terminals it owns, as `write`
    finds them, in ``pts_dir``: ``$BERTH_PTS_DIR`` if set, for a container or a test that
    must not write to the host's terminals, else /dev/pts); returns how many were written
    to. Never blocks."""
    if pts_dir is None:
        pts_dir = os.environ.get("BERTH_PTS_DIR") or "/dev/pts"
    written = 0
    try:
        names = os.listdir(pts_dir)
    except OSError:
        return 0
    data = ("\r\n\a" + text.replace("\n", "\r\n") + "\r\n").encode()
    for name in names:
        path = os.path.join(pts_dir, name)
        try:
            if not name.isdigit() or os.stat(path).st_uid != uid:
                continue
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_APPEND)
            try:
                os.write(fd, data)
                written += 1
            finally:
                os.close(fd)
        except OSError:
            continue
    return written


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
