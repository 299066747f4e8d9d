"""An upgrade from a schema-5 state (as the e933aff daemon wrote it: schema5.sql) to this
berth's: the daemon backs the database up first and logs `migrated state from schema 5 to 8;
backup at ...` (issue 39.3); the jobs carry over; a newer database is still refused, and
nothing is copied then."""

from __future__ import annotations

import glob
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from berth.daemon.store.schema import SCHEMA_VERSION

FIXTURE = Path(__file__).with_name("schema5.sql")


def _plant_schema5(state_dir: str) -> str:
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    path = os.path.join(state_dir, "berth.db")
    db = sqlite3.connect(path)
    db.executescript(FIXTURE.read_text())
    db.close()
    return path


def _rows(path: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT id, state, data, spec FROM jobs ORDER BY id").fetchall()
    finally:
        db.close()


def test_upgrade_from_schema_5_backs_up_logs_and_keeps_the_jobs(daemon: Any) -> None:
    path = _plant_schema5(daemon.state_dir)
    before = _rows(path)
    assert [r[:2] for r in before] == [(1, "COMPLETED"), (2, "PENDING")]
    daemon.start(gpus=2)
    saved = glob.glob(os.path.join(daemon.state_dir, "backups", "berth-schema5-*.db"))
    assert len(saved) == 1, saved
    with open(daemon.log) as f:
        said = f.read()
    line = f"migrated state from schema 5 to {SCHEMA_VERSION}; backup at {saved[0]}"
    assert line in said, said
    copy = sqlite3.connect(f"file:{saved[0]}?mode=ro", uri=True)
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 5
    copy.close()
    assert _rows(saved[0]) == before  # the schema-5 rows, as they were
    assert os.stat(saved[0]).st_mode & 0o077 == 0  # (commands and environments: root's only)
    assert daemon.job(1)["state"] == "COMPLETED"
    assert daemon.job(2)["state"] == "PENDING"
    daemon.stop()
    daemon.start(gpus=2)  # schema 8 now: nothing to migrate, no second copy
    assert len(glob.glob(os.path.join(daemon.state_dir, "backups", "*.db"))) == 1
    with open(daemon.log) as f:
        assert len(re.findall("migrated state from schema", f.read())) == 1


def test_a_newer_database_is_refused_and_not_copied(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = _plant_schema5(str(state))
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    env = {**os.environ, "BERTH_STATE_DIR": str(state), "BERTH_SOCKET": str(tmp_path / "s"),
           "BERTH_CONFIG": "", "BERTH_CLAIMS_DIR": str(tmp_path / "claims")}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "berth", "daemon", "--foreground"], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode != 0
    assert f"has schema version {SCHEMA_VERSION + 1}, newer than this berth" in out.stderr
    assert not (state / "backups").exists()


def test_a_migration_whose_backup_fails_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    from berth.daemon.store.store import Store
    from berth.errors import BerthError

    state = tmp_path / "state"
    path = _plant_schema5(str(state))
    (state / "backups").write_text("not a directory")  # the copy cannot be made
    try:
        Store.open(path)
    except BerthError as e:
        assert "only after a backup" in str(e) and "berth admin backup" in str(e)
    else:
        raise AssertionError("migrated without a backup")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    db.close()
