"""Each user's own directory under a root daemon's state: ``<state>/logs/<user>``.

A daemon that runs as root runs every job as its submitter, so a job's default log cannot be
in root's state directory (the job, as its user, could not create it). Each user gets a
directory of their own, made by the daemon the first time they submit:

- ``<state>`` and ``<state>/logs`` are root's, mode 0711: anyone may pass through, nobody
  but root may list or add anything (the database and the daemon's log stay 0600);
- ``<state>/logs/<user>`` belongs to the user, mode 0700 (what they put in it is theirs to
  share); default logs (``%j.out``) and the terminals of ``--pty`` jobs live there.

Why not under the user's home: homes may be on NFS with ``root_squash``, missing for system
accounts, or over quota, and the admin could neither back up nor purge them in one place.

Making it is safe against a hostile user: ``<state>/logs`` is writable by root alone, so no
one else can plant a link or a file where the directory is made (``mkdir`` and ``chown``
without following links, relative to a descriptor of ``<state>/logs``); an existing entry is
used only if it is a real directory owned by the user, else the submit is refused with what
the admin should do. A non-root daemon (one user's own) keeps its logs in ``<state>/logs``.

A job's log names (``-o``/``-e``, or the default) are expanded here too, at submit:
:func:`expand_pattern`.
"""

from __future__ import annotations

import os
import stat
import time

from berth.claims.procs import user_name
from berth.errors import BerthError
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.daemon.engine.admission.prepared import Caller as Peer

SHARED_MODE = 0o711  # root's dirs the users pass through
USER_MODE = 0o700


def logs_root(state_dir: str) -> str:
    return os.path.join(state_dir, "logs")


def prepare(state_dir: str) -> None:
    """At start: a root daemon's state dir and logs dir are passable (0711), and every file
    directly in the state dir is private to root (0600 at most); one another user owns (a
    database put in place by hand with its owner kept) stops the start: they could rewrite
    it."""
    if os.geteuid() != 0:
        return
    root = logs_root(state_dir)
    os.makedirs(root, mode=SHARED_MODE, exist_ok=True)
    for d in (state_dir, root):
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
            raise BerthError(
                f"{d} must be a directory owned by root (not a link): the users' log "
                "directories are made in it; choose another --state-dir"
            )
        os.chmod(d, SHARED_MODE)
    for name in os.listdir(state_dir):
        path = os.path.join(state_dir, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid != 0:  # (its owner may rewrite it)
            raise BerthError(
                f"{path} belongs to {user_name(st.st_uid)}, not root: that user could rewrite "
                "what root acts on (the queue, whose jobs run as their users); check what it "
                f"holds, then chown root: {path} (or move it away), and start again"
            )
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


CHECKED_FOR = 1.0  # seconds
_CHECKED: dict[tuple[str, str, int, int], tuple[float, str]] = {}


def user_dir(state_dir: str, user: str, uid: int, gid: int, make: bool = True) -> str:
    """``<state>/logs/<user>``, made for (and owned by) that user if missing. Once checked,
    taken as it was for :data:`CHECKED_FOR` seconds: a stream of submits of one user checks
    it once a second, not three system calls a submit (only root can change ``<state>/logs``).
    ``make=False`` (a dry run): checked as a submit checks it, but nothing is made."""
    key = (state_dir, user, uid, gid)
    now = time.monotonic()
    seen = _CHECKED.get(key)
    if seen is not None and now - seen[0] < CHECKED_FOR:
        return seen[1]
    path = _user_dir(state_dir, user, uid, gid, make)
    if not make:
        return path  # (not remembered: it may not exist yet)
    if len(_CHECKED) >= 4096:
        _CHECKED.clear()
    _CHECKED[key] = (now, path)
    return path


def _user_dir(state_dir: str, user: str, uid: int, gid: int, make: bool) -> str:
    name = user if user and "/" not in user and user not in (".", "..") else str(uid)
    root = logs_root(state_dir)
    path = os.path.join(root, name)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            if not make:
                return path
            os.mkdir(name, USER_MODE, dir_fd=fd)
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
            os.chmod(name, USER_MODE, dir_fd=fd)  # (whatever the daemon's umask)
            return path
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a directory"
            raise ProtocolError(
                protocol.INVALID_STATE,
                f"the log directory {path} is {what} owned by uid {st.st_uid}, not by {user} "
                f"({uid}): ask the admin to move it away (a new one is made at the next "
                "submit), or give your own log file with -o",
            )
        return path
    finally:
        os.close(fd)


def log_dir(state: str, peer: Peer, make: bool = True) -> str:
    """Where a job's default log goes: a root daemon's jobs run as their users, each with a
    directory of their own (:func:`user_dir`; ``make=False``: a dry run's, checked, not made);
    a user's own daemon keeps them in its state dir."""
    if os.geteuid() != 0:
        return logs_root(state)
    try:
        return user_dir(state, peer.user, peer.uid, peer.gid, make)
    except OSError as e:
        raise ProtocolError(
            protocol.INVALID_STATE,
            f"cannot make the log directory of {peer.user} under {logs_root(state)}: "
            f"{e.strerror or e}; ask the admin, or give your own log file with -o",
        ) from None


def expand_pattern(
    pattern: str, job_id: int, cwd: str, user: str, array: tuple[int, int | str] | None = None
) -> str:
    """sbatch's filename patterns: %j job id, %u user, %A / %a an array's id and the task's
    index (outside an array: the job id, and nothing: a job that is not an array has no task
    index, so ``-o run_%A_%a.out`` is ``run_12_.out``; some sbatch versions write Slurm's
    NO_VAL, 4294967294, there); %x is not supported; %% a percent."""
    out = pattern.replace("%%", "\0").replace("%j", str(job_id)).replace("%u", user)
    if "%A" in out or "%a" in out:
        head, task = array if array is not None else (job_id, "")
        out = out.replace("%A", str(head)).replace("%a", str(task))
    out = out.replace("\0", "%")
    return out if os.path.isabs(out) else os.path.join(cwd, out)
