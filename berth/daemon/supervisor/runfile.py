"""The *run file* of one attempt, ``<run_dir>/<job>.<attempt>``: where the daemon and the
attempt's supervisor meet, so that a daemon that died (even by ``kill -9``) can tell what
became of every job it had started. Written line by line by the supervisor::

    sup <supervisor pid>
    go
    job <job pid>
    exit {"rc": 0, "signal": null, "timeout": false, "cancelled": false, ...}

``go``: the attempt passed its start gate (:mod:`berth.daemon.supervisor.gate`): its start is durable and
the command is about to be spawned. An attempt without ``go`` (nor ``job``, which a supervisor
of an earlier berth wrote first) never ran its command (see :func:`began`).

The daemon creates the file and takes an exclusive ``flock`` on it *before* it hands the
attempt to a supervisor (the descriptor travels with the attempt), then closes its own copy:
the lock is held exactly as long as the supervisor works on that attempt. It is released once
the ``exit`` line is written, or when the supervisor dies. So after a daemon crash, a run file
that is still locked has a live supervisor (adopt it), one with an ``exit`` line has a recorded
result, and one that is neither belongs to a supervisor that died uncleanly (which ran the job
only if the file says ``go``). No run file means the attempt never reached a supervisor, and
the job can safely start again.

Control of an *adopted* attempt (its supervisor lost its daemon, and runs nothing after it):
SIGTERM = terminate; SIGUSR1 = deliver the signal number written in ``<run file>.sig``. A
supervisor that still has its daemon takes the same orders as messages (see
:mod:`berth.daemon.procs.pool`), which name the attempt, so an order can never reach the wrong job.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal

from berth.daemon.supervisor.jobfiles import NoSpace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SPARE = "spare."  # prefix of a run file kept for reuse (see :func:`open_run_file`)
NEVER_STARTED = "the daemon stopped before its supervisor started it; requeued"


def run_file(run_dir: str, job_id: int, attempt: int) -> str:
    return os.path.join(run_dir, f"{job_id}.{attempt}")


def open_run_file(path: str, spare: str | None = None) -> int:
    """Create the run file ``path``, empty and locked (``LOCK_EX``); return its descriptor.

    ``spare``: a run file of an ended attempt, kept (renamed to ``spare.N``) instead of
    removed. It is locked and blanked (overwritten with NUL bytes, which end what a reader
    reads) *before* it takes the new name, so the name never shows another attempt's lines,
    exactly as a new file would. Reusing it spares the filesystem an inode allocation and a
    removal per job (on ext4 without a journal, allocation skips every recently freed inode,
    which makes both dear under a stream of short jobs); overwriting instead of truncating
    keeps its block (freeing it costs a discard on filesystems mounted with ``discard``)."""
    if spare is not None:
        try:
            fd = os.open(spare, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                size = os.fstat(fd).st_size
                if os.pwrite(fd, bytes(size), 0) != size:
                    raise OSError("short write")
                os.rename(spare, path)
                return fd
            except OSError:
                os.close(fd)
    try:  # a file left by a start that never became durable (the daemon died): a new one
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def note(fd: int, line: bytes) -> None:
    """Append one line (one write: a reader sees all of it or none) to the run file open on
    ``fd``. A full disk loses the line, not the attempt: the daemon also learns the result
    from the supervisor's ``done`` message."""
    try:
        os.write(fd, line)
    except OSError:
        pass


def note_go(fd: int, path: str) -> None:
    """Note ``go`` (the attempt passed its gate) in the run file ``path`` open on ``fd``; a
    :class:`~berth.daemon.supervisor.jobfiles.NoSpace` if it cannot: without that line a
    restarted daemon would take a job that ran for one that never did, so the command must
    not run (the job waits for space: issue 41.7)."""
    try:
        if os.write(fd, b"go\n") == 3:
            return
        why = "a short write"
    except OSError as e:
        why = e.strerror or str(e)
    raise NoSpace(f"cannot write its run file {path!r}: {why}", path)


def append_exit(path: str, result: dict[str, Any]) -> None:
    """Write the ``exit`` line for a supervisor the daemon killed (it would not end its
    attempt: :mod:`berth.daemon.procs.overdue`), after what the file says (before the blank
    rest of a reused one)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        data = os.pread(fd, 1 << 20, 0)
        end = data.find(b"\0")
        end = len(data) if end < 0 else end
        if end and not data[:end].endswith(b"\n"):
            end = data.rfind(b"\n", 0, end) + 1  # (after the last complete line)
        os.pwrite(fd, b"exit " + json.dumps(result).encode() + b"\n", end)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_run_file(path: str) -> dict[str, Any]:
    """What a run file says: ``sup`` pid, ``go`` (True), ``job`` pid, ``exit`` result (each may
    be absent)."""
    out: dict[str, Any] = {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return out
    data = data.split(b"\0", 1)[0]  # a reused file: what follows is blank
    for line in data.split(b"\n")[:-1]:  # only complete lines
        key, _, value = line.partition(b" ")
        if key == b"exit":
            try:
                out["exit"] = json.loads(value)
            except ValueError:
                pass
        elif key == b"go":
            out["go"] = True
        elif key in (b"sup", b"job"):
            try:
                out[key.decode()] = int(value)
            except ValueError:
                pass
    return out


def began(info: dict[str, Any]) -> bool:
    """Whether the attempt whose run file says ``info`` may have run its command: it passed
    its gate (``go``) or had a job pid (``job``). Without either, it never did."""
    return "go" in info or "job" in info


def supervisor_alive(path: str) -> bool:
    """True if a supervisor still holds the run file's lock (is still at that attempt)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def terminate(pidfd: int) -> None:
    """Ask an adopted supervisor (named by a pidfd, so a reused pid cannot be hit) to stop
    its job: SIGTERM to its process group, SIGKILL after the grace period."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it has just ended; its exit will be recorded


def send_signal(path: str, pidfd: int, sig: int) -> None:
    """Ask an adopted supervisor to deliver ``sig`` to the job's process group."""
    tmp = path + ".sig.tmp"
    with open(tmp, "w") as f:
        f.write(str(sig))
        os.fchmod(f.fileno(), 0o644)  # the supervisor reads it as the job's user
    os.replace(tmp, path + ".sig")
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGUSR1)
    except ProcessLookupError:
        pass
