"""A folder only its user may write to: where the client keeps what runs as them (the Slurm
backend's batch scripts and records, the copies of submitted scripts).

Such a file is found by a name anyone can compute (its content's hash), and is used as it is
when it exists: in a folder another user may write to, they could plant it first, and it
would run as the submitting user (or a link planted there would have the user write through
it). So the folder must be the user's own, a directory that neither their group nor others
may write to, and its parent must not let others replace it (others may write there only
with the sticky bit, as in ``/tmp``). Anything else is refused before anything is written,
naming the folder and what to do. Client side only (the daemon keeps its own state).
"""

from __future__ import annotations

import os
import stat

from berth.errors import UsageError


def own_dir(path: str, what: str, elsewhere: str) -> str:
    """``path``, made (mode 0700) if missing, once checked to be a folder only the caller may
    write to (see the module's docstring); ``what`` names it in the refusal ("the Slurm log
    dir's folder"), ``elsewhere`` says how to name another. Raises :class:`UsageError`."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    real = os.path.realpath(path)
    uid = os.geteuid()
    st = os.stat(real)
    why = None
    if not stat.S_ISDIR(st.st_mode):
        why = "it is no folder"
    elif st.st_uid != uid:
        why = f"it belongs to {_user(st.st_uid)}"
    elif st.st_mode & 0o022:
        who = "others" if st.st_mode & 0o002 else "its group"
        why = f"{who} may write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    else:
        parent = os.path.dirname(real)
        pst = os.stat(parent)
        loose = pst.st_mode & (0o002 if pst.st_uid in (uid, 0) else 0o022)
        if loose and not pst.st_mode & stat.S_ISVTX:
            why = (
                f"others may replace it: its folder {parent} may be written to by others "
                f"(mode {stat.S_IMODE(pst.st_mode):04o}) without the sticky bit"
            )
    if why is not None:
        raise UsageError(
            f"{what} {path}: is not a folder only you may write to ({why}), and what berth "
            "keeps there runs as you (a script another user planted there would run in your "
            f"job): `chmod go-w {path}` if it is yours, or {elsewhere}"
        )
    return path


def _user(uid: int) -> str:
    import pwd  # rare: a folder of another user's

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"
