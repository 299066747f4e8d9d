"""Whether the dashboard may show a job's log to an admin who is not its owner.

The daemon reads the log (as root, on the system daemon), but an admin of ``[claims]
admin_group`` is not root: like `berth logs`, which reads as its caller, the page shows such
an admin only a log they could read themselves; one that the owner's umask keeps private
needs root itself (docs/admin.md: `sudo berth logs ID`). Judged by the file's and its
folders' modes against the viewer's uid and groups from the user database (the kernel cannot
be asked for a user who is not this process)."""

from __future__ import annotations

import os
import pwd
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.daemon.requests.authority import Peer


def denied(path: str, st: os.stat_result, viewer: Peer, owner: int) -> str | None:
    """Why ``viewer`` may not see the log ``path`` (``st``: its fstat), or None: its owner
    and root may; anyone else only where the mode bits let them read it and reach it."""
    if viewer.uid in (owner, 0):
        return None
    groups = _groups(viewer)
    if not _may(st, viewer.uid, groups, 0o4):
        return f"{path} is private to its owner"
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        try:
            dst = os.stat(folder)
        except OSError:
            return f"{folder} cannot be reached"
        if not _may(dst, viewer.uid, groups, 0o1):
            return f"{folder}, where it is, is private"
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _may(st: os.stat_result, uid: int, groups: set[int], bit: int) -> bool:
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == uid:
        return bool(mode & (bit << 6))
    if st.st_gid in groups:
        return bool(mode & (bit << 3))
    return bool(mode & bit)


def _groups(viewer: Peer) -> set[int]:
    try:
        pw = pwd.getpwuid(viewer.uid)
        return set(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except (KeyError, OSError):
        return {viewer.gid}
