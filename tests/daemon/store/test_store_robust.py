"""The state database against what a disk and a crash can do to it: a full disk while jobs
end, a database truncated to 0 bytes, a file that is not a database, a row that cannot be
loaded. Nothing the daemon accepted may be lost, and nothing may stop it from starting except
a database that would silently forget every job.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from typing import Any

import pytest
from helpers import wait_until

from berth.daemon.store.store import open_store


def _daemon_fails(daemon: Any) -> str:
    """Start a daemon that must refuse to start; its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_empty_database_is_refused_and_left_alone(daemon: Any) -> None:
    daemon.fake.setup(n=2)
    os.makedirs(daemon.state_dir, exist_ok=True)
    db = os.path.join(daemon.state_dir, "berth.db")
    open(db, "w").close()
    out = _daemon_fails(daemon)
    assert "berth.db exists but is empty (0 bytes)" in out
    assert "Restore it from a backup" in out
    assert "Traceback" not in out
    assert os.path.getsize(db) == 0  # nothing written over it


def test_file_that_is_not_a_database_is_refused(daemon: Any) -> None:
    daemon.fake.setup(n=2)
    os.makedirs(daemon.state_dir, exist_ok=True)
    db = os.path.join(daemon.state_dir, "berth.db")
    with open(db, "wb") as f:
        f.write(b"this is not an sqlite database, but somebody's notes\n" * 100)
    before = open(db, "rb").read()
    out = _daemon_fails(daemon)
    assert "cannot be read" in out and "berth.db" in out
    assert "Traceback" not in out
    assert open(db, "rb").read() == before


@pytest.mark.parametrize(
    "damage",
    [
        "data = '{not json'",
        "data = json_set(data, '$.request.gpus', 'lots')",
        "data = json_set(data, '$.state', 'NAPPING')",
        "data = '[1, 2]'",
        "state = 'NAPPING'",  # a finished-looking row with a state nobody knows
    ],
)
def test_a_row_that_cannot_be_loaded_is_quarantined(daemon: Any, damage: str) -> None:
    daemon.start()
    keep = daemon.submit("true", hold=True)
    bad = daemon.submit("true", hold=True)
    daemon.stop()
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"))
    db.execute(f"UPDATE jobs SET {damage} WHERE id = ?", (bad,))
    db.commit()
    db.close()

    daemon.start()  # starts all the same
    ids = [r["id"] for r in daemon.call("queue", all=True)["jobs"]]
    assert keep in ids and bad not in ids
    assert daemon.job(keep)["state"] == "PENDING"
    with open(daemon.log) as f:
        assert f"job {bad} quarantined" in f.read()
    new = daemon.submit("true", hold=True)
    assert new > bad  # the quarantined id is never given again
    daemon.stop()
    store = open_store(daemon.state_dir)
    try:
        assert [i for i, _ in store.quarantined()] == [bad]
    finally:
        store.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (CI runs as root)")
def test_jobs_that_end_on_a_full_disk_are_kept_and_committed_later(daemon: Any) -> None:
    os.makedirs(daemon.state_dir, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", daemon.state_dir],
        check=True,
    )
    try:
        _full_disk(daemon)
    finally:
        daemon.cleanup()
        subprocess.run(["umount", "-l", daemon.state_dir], check=False)


def _full_disk(daemon: Any) -> None:
    daemon.start()
    gate = os.path.join(daemon.fake.root, "gate")
    began = os.path.join(daemon.fake.root, "began")
    ids = [
        daemon.submit("sh", "-c", f"echo >> {began}; while [ ! -e {gate} ]; do sleep 0.01; done")
        for _ in range(3)
    ]

    def running() -> bool:  # (their commands run: their starts are recorded in full)
        try:
            with open(began) as f:
                return len(f.readlines()) == 3
        except FileNotFoundError:
            return False

    wait_until(running, message="jobs running")
    filler = os.path.join(daemon.state_dir, "filler")
    with open(filler, "wb", buffering=0) as f:  # fill the disk to the last block
        for size in (65536, 512, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass
    open(gate, "w").close()  # the jobs end while nothing can be committed

    def ended() -> bool:
        rows = {r["id"]: r["state"] for r in daemon.call("queue", all=True)["jobs"]}
        return all(rows.get(i) == "COMPLETED" for i in ids)

    wait_until(ended, timeout=20, message="jobs shown COMPLETED while the disk is full")
    with open(daemon.log) as f:
        assert "cannot commit to the state database (retrying)" in f.read()
    # still shown after a while of failed retries (they are kept, not dropped)
    db_path = os.path.join(daemon.state_dir, "berth.db")

    def stored() -> dict[int, str]:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            return {int(r[0]): str(r[1]) for r in db.execute("SELECT id, state FROM jobs")}
        finally:
            db.close()

    assert any(stored().get(i) != "COMPLETED" for i in ids)
    assert ended()
    os.unlink(filler)  # space again: the retry commits them
    wait_until(
        lambda: all(stored().get(i) == "COMPLETED" for i in ids),
        timeout=20,
        message="the final states reach the database",
    )

    def logged() -> bool:  # (the log line follows the commit: it may come a moment later)
        with open(daemon.log) as f:
            return "the state database commits again" in f.read()

    wait_until(logged, timeout=20, message="the daemon's log says it commits again")
    daemon.stop()
    daemon.start()
    rows = {r["id"]: r["state"] for r in daemon.call("queue", all=True)["jobs"]}
    assert all(rows[i] == "COMPLETED" for i in ids)
