"""Where the claim ledger lives, and whether that directory can be trusted.

The ledger is one directory that every user of the host shares (the first that applies):

1. ``$BERTH_CLAIMS_DIR``;
2. ``[claims] dir`` in the config file;
3. ``/run/berth`` if it exists (on a multi-user host the admin should create it at boot:
   ``d /run/berth 1777 root root -`` in ``/etc/tmpfiles.d/berth.conf``);
4. ``/tmp/berth-claims`` if it exists;
5. otherwise ``/run/berth`` is created if possible (root can), else ``/tmp/berth-claims``.
   (An existing directory always wins: a host never splits its claims between the two.)

A directory berth creates gets mode 1777 (world-writable and sticky, like ``/tmp``): every user
can add claim files, and only a file's owner (or root, or the directory's owner) can remove it.
Refused (:func:`check_dir`): a symlink another user owns, a world- or group-writable directory
without the sticky bit, a directory of another non-root user that is not mode 1777. Root claims only
in a directory root owns (:func:`check_claimable`): the owner of a directory can remove any
file in it.
"""

from __future__ import annotations

import os
import stat

from berth import config
from berth.errors import Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.config import Config

RUN_DIR = "/run/berth"
TMP_DIR = "/tmp/berth-claims"
SHARED_MODE = 0o1777


def _make(path: str) -> bool:
    """Create ``path`` (mode 1777) if missing; True if it exists afterwards as a directory."""
    try:
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    else:
        try:
            os.chmod(path, SHARED_MODE)
        except OSError:
            return False
    return os.path.isdir(path)


def _owner(uid: int) -> str:
    import pwd  # rare: root, in another user's directory

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check_dir(path: str) -> str:
    """Raise UsageError unless ``path`` is a directory berth may keep claims in: a real
    directory (or a symlink that root or this user made: whoever owns a symlink can re-point
    it, splitting the host's claims in two), not world- or group-writable unless sticky (else
    anyone, or any member of the group, could remove anyone's claims), and, if another non-root user owns it, shared like /tmp
    (mode 1777)."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise UsageError(
            f"claims directory {path!r}: {e.strerror}; create it (mode 1777) or set "
            "BERTH_CLAIMS_DIR to a directory every user of the GPUs can write"
        ) from None
    me = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid not in (0, me):
            raise UsageError(
                f"claims directory {path!r} is a symbolic link that belongs to "
                f"{_owner(st.st_uid)}, who could point it elsewhere at any moment; ask the "
                "admin to remove it and create /run/berth (install -d -m 1777 /run/berth), "
                "or set BERTH_CLAIMS_DIR"
            )
        try:
            st = os.stat(path)
        except OSError as e:
            raise UsageError(
                f"claims directory {path!r}: {e.strerror} (a dangling symbolic link); "
                "remove it or set BERTH_CLAIMS_DIR"
            ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(
            f"claims directory {path!r} is not a directory: remove it or set BERTH_CLAIMS_DIR"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o002 and not mode & 0o1000:
        raise UsageError(
            f"claims directory {path!r} is world-writable but not sticky (mode {mode:o}): "
            f"any user could remove anyone's claims; chmod +t {path} (mode 1777)"
        )
    if mode & 0o020 and not mode & 0o1000:
        raise UsageError(
            f"claims directory {path!r} is group-writable but not sticky (mode {mode:o}): any "
            f"member of its group could remove the others' claims and take their GPUs; "
            f"chmod +t {path} (mode {mode | 0o1000:o})"
        )
    if st.st_uid not in (0, me) and mode & 0o1007 != 0o1007:
        owner = _owner(st.st_uid)
        raise UsageError(
            f"claims directory {path!r} belongs to {owner} and is not sticky and "
            f"world-writable (mode {mode:o}): {owner} could remove or replace anyone's claims "
            "there; ask the admin to create /run/berth (mode 1777) or set BERTH_CLAIMS_DIR"
        )
    return path


def check_claimable(path: str) -> None:
    """Raise Refused if root would claim in a directory another user owns.

    The owner of a directory may remove or rename any file in it, sticky bit or not: claims
    made there (the daemon's, for every user's jobs) are only as safe as that user is honest.
    Users may still share such a directory among themselves (it is how /tmp/berth-claims
    starts when nobody set up /run/berth); root refuses, and says how to set one up."""
    if os.geteuid() != 0:
        return
    try:
        st = os.stat(path)
    except OSError:
        return  # (claiming will say what is wrong)
    if st.st_uid != 0:
        owner = _owner(st.st_uid)
        raise Refused(
            f"root does not claim GPUs in {path!r}: it belongs to {owner}, who could remove "
            "or rename the claims in it (a GPU would then be handed out twice); create a "
            "directory root owns: install -d -m 1777 /run/berth (berth uses it before "
            "/tmp/berth-claims, unless [claims] dir or BERTH_CLAIMS_DIR names another)"
        )


def claims_dir(cfg: Config | None = None, *, create: bool = True) -> str:
    """The ledger directory of this host, created (mode 1777) if missing and ``create``."""
    if cfg is None:
        cfg = config.get()
    explicit = os.environ.get("BERTH_CLAIMS_DIR") or cfg.claims_dir
    if explicit:
        path = os.path.abspath(os.path.expanduser(explicit))
        if not os.path.isdir(path):
            if not create:
                return path  # nothing claimed yet: readers see an empty ledger
            _make(path)
        return check_dir(path)
    # An existing directory wins, so that a host never splits its claims between two places
    # (root creating /run/berth while users already hold claims in /tmp/berth-claims).
    for path in (RUN_DIR, TMP_DIR):
        if os.path.isdir(path):
            return check_dir(path)
    if not create:
        return TMP_DIR
    if _make(RUN_DIR):
        return check_dir(RUN_DIR)
    _make(TMP_DIR)
    return check_dir(TMP_DIR)
