"""Bringing a state database to this berth's schema: a consistent copy first
(berth.admin.backup), then each migration in its own transaction, then one log line that
says so and where the copy is. A database newer than this berth is refused
(:meth:`berth.daemon.store.store.Store.open`); one that cannot be copied is not migrated."""

from __future__ import annotations

import logging
import sqlite3

from berth.admin.backup import copy_db, migration_path
from berth.daemon.store.schema import MIGRATIONS, SCHEMA_VERSION
from berth.errors import BerthError

log = logging.getLogger("berth.daemon")


def migrate(db: sqlite3.Connection, path: str, version: int) -> str | None:
    """Migrate ``db`` (at ``path``) from schema ``version``; the backup's path (None: a new
    database, nothing to keep)."""
    if version >= SCHEMA_VERSION:
        return None
    saved = None
    if version > 0:
        saved = migration_path(path, version)
        try:
            copy_db(db, saved)
        except (OSError, sqlite3.Error, BerthError) as e:
            raise BerthError(
                f"state database {path} has schema {version}; this berth migrates it to "
                f"{SCHEMA_VERSION} only after a backup, and the backup to {saved} failed "
                f"({e}): free space there, or back it up yourself (`berth admin backup`)"
            ) from None
    for i in range(version, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        step = MIGRATIONS[i]
        for statement in step if isinstance(step, tuple) else step.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version={i + 1}")
        db.execute("COMMIT")
    if saved is not None:
        log.info(
            "migrated state from schema %d to %d; backup at %s", version, SCHEMA_VERSION, saved
        )
    return saved
