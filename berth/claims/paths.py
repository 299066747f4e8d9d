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
A directory owned by another non-root user that is not sticky and world-writable is refused:
that user could delete or replace anyone's claims.
"""

from __future__ import annotations

import os
import stat

from berth.errors import UsageError

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


def check_dir(path: str) -> str:
    """Raise UsageError unless ``path`` is a directory berth may keep claims in."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise UsageError(
            f"claims directory {path!r}: {e.strerror}; create it (mode 1777) or set "
            "BERTH_CLAIMS_DIR to a directory every user of the GPUs can write"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(
            f"claims directory {path!r} is not a directory: remove it or set BERTH_CLAIMS_DIR"
        )
    me = os.geteuid()
    shared = st.st_mode & 0o1002 == 0o1002  # sticky and world-writable
    if st.st_uid not in (0, me) and not shared:
        import pwd

        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise UsageError(
            f"claims directory {path!r} belongs to {owner} and is not sticky and "
            f"world-writable (mode {stat.S_IMODE(st.st_mode):o}): {owner} could remove or "
            "replace anyone's claims there; ask the admin to create /run/berth (mode 1777) "
            "or set BERTH_CLAIMS_DIR"
        )
    return path


def claims_dir(cfg: Config | None = None, *, create: bool = True) -> str:
    """The ledger directory of this host, created (mode 1777) if missing and ``create``."""
    if cfg is None:
        from berth import config

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
