"""`berth admin backup` makes a consistent copy while the daemon runs and commits, with an
index of the users' logs; `berth admin restore` puts one back only while no daemon uses the
state dir, keeps the database it replaces, and refuses what is not a backup (issue 39.3)."""

from __future__ import annotations

import glob
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


def _ids(path: str) -> list[int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        return [int(r[0]) for r in db.execute("SELECT id FROM jobs ORDER BY id")]
    finally:
        db.close()


def test_backup_while_the_daemon_commits_then_restore(daemon: Any, tmp_path: Path) -> None:
    daemon.start(gpus=2)
    done = daemon.submit(*daemon.workload("--seconds", "0"))
    daemon.wait_done([done])
    held = [daemon.submit("true", hold=True) for _ in range(20)]
    stop = threading.Event()
    later: list[int] = []

    def keep_submitting() -> None:
        while not stop.is_set():
            later.append(daemon.submit("true", hold=True))

    writer = threading.Thread(target=keep_submitting)
    writer.start()
    try:
        copy = tmp_path / "copy.db"
        out = daemon.berth("admin", "backup", str(copy))
    finally:
        stop.set()
        writer.join()
    assert out.returncode == 0, out.stderr
    ids = _ids(str(copy))
    assert ids[: 1 + len(held)] == [done, *held]  # every job acknowledged before: in the copy
    assert ids == list(range(1, len(ids) + 1))  # and whole transactions only
    db = sqlite3.connect(copy)
    logs = [r[0] for r in db.execute("SELECT path FROM berth_backup_logs")]
    db.close()
    assert any(p.endswith(f"/{done}.out") for p in logs), logs

    refused = daemon.berth("admin", "restore", str(copy))
    assert refused.returncode == 2 and "stop it first" in refused.stderr
    assert glob.glob(os.path.join(daemon.state_dir, "berth.db.before-restore-*")) == []

    daemon.stop()
    log = Path(daemon.state_dir, "logs").rglob(f"{done}.out").__next__()
    log.unlink()  # (a log gone since the backup: restore says so)
    out = daemon.berth("admin", "restore", str(copy))
    assert out.returncode == 0, out.stderr
    assert "1 log file(s) of the backup's index are missing now" in out.stdout
    aside = glob.glob(os.path.join(daemon.state_dir, "berth.db.before-restore-*"))
    assert len(aside) == 1 and not aside[0].endswith(("-wal", "-shm"))
    assert _ids(aside[0])[-1] == max(later)  # the replaced database, whole
    restored = os.path.join(daemon.state_dir, "berth.db")
    assert _ids(restored) == ids
    db = sqlite3.connect(restored)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert not tables & {"berth_backup", "berth_backup_logs"}
    daemon.start(gpus=2)
    assert daemon.job(done)["state"] == "COMPLETED"
    assert daemon.job(held[-1])["state"] == "PENDING"


def test_restore_refuses_what_is_not_a_backup(daemon: Any, tmp_path: Path) -> None:
    daemon.start(gpus=1)
    job = daemon.submit("true", hold=True)
    made = daemon.berth("admin", "backup")  # (the default place: STATE_DIR/backups/)
    assert made.returncode == 0, made.stderr
    saved = glob.glob(os.path.join(daemon.state_dir, "backups", "berth-*.db"))
    assert len(saved) == 1 and saved[0] in made.stdout and _ids(saved[0]) == [job]
    daemon.stop()
    before = sorted(os.listdir(daemon.state_dir))
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite at all, but long enough to be read as a header... " * 20)
    out = daemon.berth("admin", "restore", str(junk))
    assert out.returncode == 2 and str(junk) in out.stderr and "nothing changed" in out.stderr
    missing = daemon.berth("admin", "restore", str(tmp_path / "nope.db"))
    assert missing.returncode == 2 and "no backup at" in missing.stderr
    assert sorted(os.listdir(daemon.state_dir)) == before
    daemon.start(gpus=1)
    assert daemon.job(job)["state"] == "PENDING"
