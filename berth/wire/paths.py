"""Where the daemon lives: its socket and its state directory (tiny; imported by the client).

Two kinds of daemon: a user's own (``berth daemon``) and the machine's (``berth daemon
--system``, run by root, usually under systemd: contrib/systemd, docs/admin.md).

Socket of a user's own daemon (first that applies): inside a Slurm allocation whose ``berth
daemon --inside-slurm`` runs, that daemon's (:func:`allocation_dir`: an exported
``$BERTH_SOCKET`` would send the allocation's jobs outside it); ``$BERTH_SOCKET``;
``[daemon] socket`` in the config (the caller passes it); :func:`private_socket`:
``$XDG_RUNTIME_DIR/berth/daemon.sock``, else ``/tmp/berth-<uid>/daemon.sock``.
State: ``$BERTH_STATE_DIR``; ``[daemon] state_dir``; ``$XDG_STATE_HOME/berth``;
``~/.local/state/berth``.

The system daemon: socket ``[daemon] system_socket``, else :data:`SYSTEM_SOCKET`; state
``[daemon] system_state_dir``, else :data:`SYSTEM_STATE_DIR` (``--socket``/``--state-dir``
override both).

A client (:func:`candidates`) uses the allocation's daemon, ``$BERTH_SOCKET``, or ``[daemon]
socket`` if one is set, and only that; else the user's own daemon if it answers, else the
system daemon. The user's own socket (or their allocation's) is not theirs when another user
made it or its directory (:func:`squatted`: anyone can make ``/tmp/berth-<uid>`` before its
user does, and nobody but root can remove it from sticky ``/tmp``): the client skips it, with
a warning, for the next one (issue 41.5).
"""

from __future__ import annotations

import os
import stat


def allocation_dir() -> str | None:
    """Inside a Slurm job: the node-local directory of its own daemon (``berth daemon
    --inside-slurm``), ``$TMPDIR/berth-<uid>/slurm-<job id>``; else None. (Not named by the
    cluster too: srun's steps do not get SLURM_CLUSTER_NAME.)"""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"berth-{os.getuid()}", f"slurm-{job}")


SYSTEM_SOCKET = "/run/berth/berth.sock"
SYSTEM_STATE_DIR = "/var/lib/berth"

# How a client found the socket it uses (see candidates()).
ENV, ALLOCATION, CONFIG, PRIVATE, SYSTEM = "BERTH_SOCKET", "allocation", "config", "own", "system"


def private_socket() -> str:
    """The socket of this user's own daemon, when nothing names another."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "berth", "daemon.sock")
    return os.path.join("/tmp", f"berth-{os.getuid()}", "daemon.sock")


def squatted_by(uid: int) -> str:
    import pwd  # rare: a squatted path

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def squatted(path: str) -> str | None:
    """Why the socket ``path`` of this user's own daemon cannot be theirs, or None: its
    directory is another user's (root's aside) or no directory, the file there is another
    user's or no socket. (What is missing is no squat: connecting says so.) The kernel's
    word on whoever serves it (SO_PEERCRED) is still asked once connected."""
    uid = os.getuid()
    parent = os.path.dirname(path) or "."
    for where, kind in ((parent, stat.S_ISDIR), (path, stat.S_ISSOCK)):
        try:
            st = os.lstat(where)
        except OSError:
            return None
        if st.st_uid not in (uid, 0):
            return f"{where} belongs to {squatted_by(st.st_uid)}"
        if not kind(st.st_mode):
            return f"{where} is not a {'directory' if kind is stat.S_ISDIR else 'socket'}"
    return None


def _named(configured: str | None, allocation: bool = True) -> tuple[str, str] | None:
    alloc = allocation_dir() if allocation else None  # (its own daemon wins, over the env)
    if alloc and os.path.exists(os.path.join(alloc, "daemon.sock")):
        return os.path.join(alloc, "daemon.sock"), ALLOCATION
    env = os.environ.get("BERTH_SOCKET")
    if env:
        return env, ENV
    if configured:
        return configured, CONFIG
    return None


def socket_path(configured: str | None = None) -> str:
    """The socket of a user's own daemon (``berth daemon`` without ``--system``)."""
    named = _named(configured)
    return named[0] if named is not None else private_socket()


def system_socket(configured: str | None = None) -> str:
    return configured or SYSTEM_SOCKET


def candidates(
    configured: str | None = None, system_configured: str | None = None
) -> list[tuple[str, str]]:
    """The sockets a client tries, in order, each with how it was found (:data:`ENV`,
    :data:`ALLOCATION`, :data:`CONFIG`: that one only; else :data:`PRIVATE`, then
    :data:`SYSTEM`). An allocation's socket that another user made (:func:`squatted`) comes
    first still, for the client to skip with a warning, then what would be tried without it."""
    named = _named(configured)
    if named is not None and named[1] == ALLOCATION and squatted(named[0]) is not None:
        rest = _named(configured, allocation=False)
        if rest is not None:
            return [named, rest]
        return [named, (private_socket(), PRIVATE), (system_socket(system_configured), SYSTEM)]
    if named is not None:
        return [named]
    return [(private_socket(), PRIVATE), (system_socket(system_configured), SYSTEM)]


def state_dir(configured: str | None = None) -> str:
    env = os.environ.get("BERTH_STATE_DIR")
    if env:
        return env
    if configured:
        return configured
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(xdg, "berth")
