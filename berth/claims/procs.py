"""What berth needs to know of a process: its ancestry, its owner's name (:func:`user_name`,
the one uid -> name lookup, cached; the daemon uses it too), its command line.

Read from /proc and the user database, for the claim ledger (holders, bodies, lock errors).
"""

from __future__ import annotations

import os
import pwd


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
