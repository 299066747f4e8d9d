"""What a job's start needs from the filesystem, done by its supervisor as the job's user:
its executable looked up along the job's own PATH, its log files opened safely, a stale
terminal socket removed. (Imported by the fork server, once, with :mod:`attempt`.)"""

from __future__ import annotations

import errno
import fcntl
import os
import stat


class SpawnError(Exception):
    """The job could not be started (the message says why)."""


class NoSpace(SpawnError):
    """The job could not be started for want of space (a full disk, a quota) where its start
    is written (run file, logs): it is not run, and waits for space instead of failing.
    ``path``: the file it could not write."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class Exhausted(SpawnError):
    """The job could not be started because a limit of the system was met (no descriptor
    left, no memory, no process to fork): it is not run, and waits instead of failing.
    ``kind``: the errno's name (``EMFILE``...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


NOSPACE = (errno.ENOSPC, errno.EDQUOT)
EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)


def own_limit(kind: object) -> bool:
    """Whether an attempt's ``exhausted`` (the errno's name its supervisor met) was that
    supervisor's own limit (its descriptors, its user's processes), not the system's: only
    its job waits, and that supervisor takes no other attempt."""
    return kind in ("EMFILE", "EAGAIN")


def waits(e: Exception) -> SpawnError | None:
    """The error of a start that must wait rather than fail (:class:`NoSpace`,
    :class:`Exhausted`; an OSError of a limit met made one), else None."""
    if isinstance(e, OSError) and e.errno in EXHAUSTED:
        return failed("cannot start it", e)
    return e if isinstance(e, (NoSpace, Exhausted)) else None


def openpty(out: int) -> tuple[int, int]:
    """``os.openpty()``, else the start's error (then ``out``, its log, is closed)."""
    try:
        return os.openpty()
    except OSError as e:
        os.close(out)
        raise failed("cannot make its terminal", e) from None


def failed(message: str, e: OSError) -> SpawnError:
    """The error of a start that failed with ``e``: :class:`Exhausted` for a limit met, else
    :class:`SpawnError`; ``message`` says what failed, ``e``'s words follow."""
    text = f"{message}: {e.strerror or e}"
    if e.errno in EXHAUSTED:
        return Exhausted(text, errno.errorcode[e.errno])
    return SpawnError(text)


def which(exe: str, path: str) -> str | None:
    """``shutil.which(exe, path=path)`` for a bare name on POSIX, in fewer calls: the first
    executable non-directory ``dir/exe`` along ``path`` (each directory tried once)."""
    if not path:
        return None
    seen = set()
    for d in path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        name = d + exe if not d or d.endswith("/") else f"{d}/{exe}"  # os.path.join
        try:  # access() first: it answers a missing file without raising
            if os.access(name, os.X_OK) and not stat.S_ISDIR(os.stat(name).st_mode):
                return name
        except (OSError, ValueError):
            continue
    return None


_LOG_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    | os.O_NONBLOCK
)  # fmt: skip


def open_log(path: str) -> int:
    """Open a job's log for appending, as the job's user (the supervisor is them), created
    ``0666 & ~umask`` (the submitter's umask is in force). A symbolic link as the file itself
    is refused: in a directory others may write, one could point it at a file of the job's
    user (their ~/.bashrc) and have the job write there. A missing directory is created.
    Non-blocking while opening, so a FIFO nobody reads fails instead of hanging."""
    try:
        try:
            fd = os.open(path, _LOG_FLAGS, 0o666)
        except FileNotFoundError:  # its directory is missing: create it
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            fd = os.open(path, _LOG_FLAGS, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SpawnError(
                f"log file {path!r} is a symbolic link: refused (it could send the job's "
                "output into another file); give the real path with -o/-e"
            ) from None
        if e.errno == errno.ENXIO:
            raise SpawnError(f"log file {path!r} is a FIFO that nobody reads") from None
        if e.errno in NOSPACE:
            raise NoSpace(f"cannot open log file {path!r}: {e.strerror}", path) from None
        raise failed(f"cannot open log file {path!r}", e) from None
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    return fd


def remove_stale_socket(path: str) -> None:
    """A terminal socket left by an attempt whose supervisor was killed (ids restart with a
    new state dir): only a socket is removed, never anything else found there."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass
