"""What berth needs to know of a process: its ancestry, its owner's name (:func:`user_name`,
the one uid -> name lookup, cached; the daemon uses it too), its command line; and, before
anybody signals a pid read from /proc/locks, a claim body, NVML or a file, the proof that it
is the process meant (:func:`open_proven`: the one helper every such signal goes through).

Read from /proc and the user database, for the claim ledger (holders, bodies, lock errors).
"""

from __future__ import annotations

import os
import pwd
import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection


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


# -- proving a pid before signalling it (invariant 7) -----------------------------------------


def open_proven(pid: int, proof: Callable[[int], bool]) -> int | None:
    """A pidfd of process ``pid`` if ``proof(pid)`` holds of that very process, else None.

    A pid read from /proc/locks, a claim body, NVML or a file is a hint, never an identity:
    the process it named may be gone and the number another user's by now (pids come round
    in minutes). So the pidfd is taken first, ``proof`` looks at /proc/PID, and the pidfd
    must still reach a living process afterwards: then the process looked at was the one
    the pidfd holds. Signal it through the pidfd (:func:`signal_proven`), never the pid."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        if proof(pid):
            signal.pidfd_send_signal(fd, 0)  # still that process (else ProcessLookupError)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def holds_file(
    idents: Collection[tuple[int, int]], uid: int | None = None
) -> Callable[[int], bool]:
    """A proof for :func:`open_proven`: the process has one of the files ``idents`` ((device,
    inode)) open now (an open descriptor of that very file cannot be a reused pid), and
    belongs to user ``uid`` if given. Needs /proc/PID/fd: root's, or the process owner's."""

    def proof(pid: int) -> bool:
        if uid is not None and owner(pid) != uid:
            return False
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in idents:
                return True
        return False

    return proof


def owner(pid: int) -> int | None:
    """The uid that owns process ``pid`` (None if it is gone)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def signal_proven(fd: int, pid: int, sig: int, *, group: bool = False) -> bool:
    """Send ``sig`` to the process of pidfd ``fd`` (pid ``pid``), and to its whole process
    group if ``group`` and it leads one: the leader first, so that a group whose leader is
    gone (its number free for reuse) is never signalled by number. False if it is gone."""
    try:
        signal.pidfd_send_signal(fd, sig)
        if group and os.getpgid(pid) == pid and pid != os.getpgrp():
            os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
