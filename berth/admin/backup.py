"""Consistent copies of the daemon's state database: `berth admin backup` and `restore`, and
the copy the daemon makes before it migrates its schema (berth.daemon.store.upgrade).

A copy is made with SQLite's online backup API, so it is consistent while the daemon runs and
commits (WAL: readers never block the writer). A backup made by `berth admin backup` also
keeps, inside the copy, when and from where it was made (table ``berth_backup``) and an index
of the users' logs as they were (``berth_backup_logs``: path under the state dir, owner,
bytes, mtime): the logs themselves are the users' files, copied with whatever copies files
(``rsync -a``); the index says what a restored queue's jobs had. ``restore`` drops both
tables from the restored database.
"""

from __future__ import annotations

import os
import sqlite3
import time

from berth.errors import BerthError, UsageError

DB = "berth.db"
INFO_TABLE = "berth_backup"
LOGS_TABLE = "berth_backup_logs"


def copy_db(db: sqlite3.Connection, dest: str) -> None:
    """A consistent copy of the open database ``db`` at ``dest`` (mode 0600, written whole:
    a temporary file renamed into place; an existing ``dest`` is refused)."""
    if os.path.lexists(dest):
        raise BerthError(f"backup {dest} exists already: name another file")
    os.makedirs(os.path.dirname(os.path.abspath(dest)), mode=0o700, exist_ok=True)
    tmp = f"{dest}.partial"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    try:
        out = sqlite3.connect(tmp)
        try:
            db.backup(out)
            out.execute("PRAGMA journal_mode=DELETE")  # (one self-contained file)
        finally:
            out.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, dest)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def migration_path(db_path: str, version: int) -> str:
    """Where the copy made before migrating from schema ``version`` goes: beside the
    database, in ``backups/``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return os.path.join(os.path.dirname(db_path), "backups", f"berth-schema{version}-{stamp}.db")


def logs_index(state_dir: str) -> list[tuple[str, int, int, float]]:
    """(path under the state dir, owner uid, bytes, mtime) of each file under ``logs/``
    (links not followed)."""
    found: list[tuple[str, int, int, float]] = []
    top = os.path.join(state_dir, "logs")
    for here, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(here, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            found.append((os.path.relpath(path, state_dir), st.st_uid, st.st_size, st.st_mtime))
    return found


def backup(state_dir: str, dest: str) -> dict[str, object]:
    """Copy ``state_dir``'s database to ``dest`` with the logs index; what was copied."""
    source = os.path.join(state_dir, DB)
    if not os.path.isfile(source):
        raise UsageError(f"no state database at {source}: give the daemon's --state-dir")
    db = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        jobs = int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        copy_db(db, dest)
    except sqlite3.DatabaseError as e:
        raise BerthError(f"cannot copy {source}: {e}") from None
    finally:
        db.close()
    logs = logs_index(state_dir)
    out = sqlite3.connect(dest)
    try:
        with out:
            out.execute(f"CREATE TABLE {INFO_TABLE}(key TEXT PRIMARY KEY, value TEXT)")
            info = {"made_at": f"{time.time():.3f}", "source": source, "schema": str(version)}
            out.executemany(f"INSERT INTO {INFO_TABLE} VALUES (?, ?)", info.items())
            out.execute(
                f"CREATE TABLE {LOGS_TABLE}(path TEXT PRIMARY KEY, uid INTEGER, bytes INTEGER, "
                "mtime REAL)"
            )
            out.executemany(f"INSERT INTO {LOGS_TABLE} VALUES (?, ?, ?, ?)", logs)
    finally:
        out.close()
    return {"backup": dest, "source": source, "schema": version, "jobs": jobs, "logs": len(logs)}


def check_backup(path: str) -> tuple[int, int]:
    """(schema version, jobs) of a backup that reads as berth's state; else a UsageError."""
    if not os.path.isfile(path):
        raise UsageError(f"no backup at {path!r}: give the file `berth admin backup` wrote")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            ok = db.execute("PRAGMA quick_check").fetchone()[0]
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            jobs = int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        finally:
            db.close()
    except sqlite3.DatabaseError as e:
        raise UsageError(f"{path!r} is not a berth state backup ({e}); nothing changed") from None
    if ok != "ok":
        raise UsageError(f"{path!r} is damaged ({ok}); nothing changed")
    return version, jobs


def restore(state_dir: str, source: str) -> dict[str, object]:
    """Put the backup ``source`` in place as ``state_dir``'s database, the current one (and
    its -wal, -shm) moved aside; refused while a daemon uses the state dir."""
    import fcntl  # rare: restore

    version, jobs = check_backup(source)
    if not os.path.isdir(state_dir):
        raise UsageError(f"no state directory {state_dir}: give the daemon's --state-dir")
    lock = os.open(os.path.join(state_dir, "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (held: no daemon starts meanwhile)
        except BlockingIOError:
            raise UsageError(
                f"a berth daemon uses {state_dir}: stop it first (`systemctl stop berth`; "
                "running jobs go on), then restore; nothing changed"
            ) from None
        target = os.path.join(state_dir, DB)
        aside = f"{target}.before-restore-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
        moved = None
        if os.path.exists(target):
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(target + suffix):
                    os.rename(target + suffix, aside + suffix)
            moved = aside
        try:
            src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
            try:
                copy_db(src, target)
            finally:
                src.close()
        except BaseException:
            if moved is not None:  # (put back what was there)
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(moved + suffix):
                        os.rename(moved + suffix, target + suffix)
            raise
        db = sqlite3.connect(target)
        try:
            missing = _missing_logs(db, state_dir)
            with db:
                db.execute(f"DROP TABLE IF EXISTS {INFO_TABLE}")
                db.execute(f"DROP TABLE IF EXISTS {LOGS_TABLE}")
        finally:
            db.close()
    finally:
        os.close(lock)
    return {"restored": target, "from": source, "schema": version, "jobs": jobs,
            "moved_aside": moved, "missing_logs": missing}  # fmt: skip


def _missing_logs(db: sqlite3.Connection, state_dir: str) -> list[str]:
    try:
        rows = db.execute(f"SELECT path FROM {LOGS_TABLE} ORDER BY path").fetchall()
    except sqlite3.OperationalError:  # (a copy made otherwise: no index)
        return []
    return [str(r[0]) for r in rows if not os.path.lexists(os.path.join(state_dir, str(r[0])))]
