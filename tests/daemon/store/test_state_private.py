"""The system daemon's state holds every user's commands and environments (tokens, passwords):
docs/admin.md, "Files", promises `berth.db` (and `-wal`, `-shm`) root's, mode 0600, in a
state directory of mode 0711 that users pass through. A database put in place by hand, as the
docs' own restore "by hand" does (`sqlite3 ... .backup`, copied as `berth.db`: mode 0644 under
umask 022), must not become readable by every user once the daemon serves on it; and one that
another user owns (and so may rewrite: jobs run as root by a root daemon) is refused, not
served.

Needs root (to run as the other users), as CI runs the suite.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from typing import Any

import pytest
from test_system_mode import System
from userkit import A, B, berth_as, call_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

SECRET = "hunter2-do-not-show"


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _read(path: str) -> Any:
    def read() -> str:
        with open(path, "rb") as f:
            return f.read().decode("latin-1")

    return call_as(B, read)


def _restore_by_hand(system: System, owner: int = 0) -> str:
    """The docs' restore by hand: an online copy made under umask 022, put in place as
    berth.db with the stale -wal and -shm removed; the state dir 0711 as tmpfiles makes it."""
    db = os.path.join(system.state, "berth.db")
    copy = os.path.join(system.base, "copy.db")
    old = os.umask(0o022)
    try:
        src = sqlite3.connect(db)
        dst = sqlite3.connect(copy)
        src.backup(dst)
        dst.close()
        src.close()
    finally:
        os.umask(old)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    shutil.copy(copy, db)  # (cp: the copy's mode, 0644)
    os.chown(db, owner, owner)
    os.chmod(system.state, 0o711)
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o644
    return db


def test_a_database_restored_by_hand_is_not_readable_by_other_users(system: System) -> None:
    system.start()
    env = {**system.env, "API_TOKEN": SECRET}  # (A's shell: what the job will run with)
    out = berth_as(A, "submit", "--parsable", "--hold", "--", "sleep", "600", env=env)
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.split()[0])
    system.rig.stop()
    db = _restore_by_hand(system)
    with open(db, "rb") as f:
        assert SECRET.encode() in f.read()  # the environment A submitted is in it
    system.start()
    assert system.rig.job(job)["state"] == "PENDING"  # the restored queue is served
    # Every file of the state directory (not the users' own logs) is root's and 0600.
    for name in sorted(os.listdir(system.state)):
        path = os.path.join(system.state, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600), (name, oct(st.st_mode))
    for suffix in ("", "-wal"):
        if os.path.exists(db + suffix):
            got = _read(db + suffix)
            assert got.get("error") == "PermissionError", (suffix, str(got)[:200])


def test_a_database_another_user_owns_is_refused_and_left_as_it_is(system: System) -> None:
    system.start()
    job = system.submit(A, "--hold", "--", "sleep", "600")
    system.rig.stop()
    b_uid = int(call_as(B, os.getuid))
    db = _restore_by_hand(system, owner=b_uid)
    before = open(db, "rb").read()
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground", "--system",
         "--socket", system.sock, "--state-dir", system.state],
        env=system.rig.env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert f"{db} belongs to {B}, not root" in out.stderr, out.stderr[-2000:]
    assert f"chown root: {db}" in out.stderr
    assert open(db, "rb").read() == before and os.stat(db).st_uid == b_uid
    assert not os.path.exists(db + "-wal")
    assert job > 0
