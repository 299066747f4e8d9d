"""The daemon's durable state: SQLite in WAL mode, a versioned schema, explicit transactions.

Every state change happens inside :meth:`Store.tx` (``BEGIN IMMEDIATE`` .. ``COMMIT``) with
``synchronous=FULL``, so a change the daemon has acknowledged survives a crash. The job's
command, environment and working directory (``spec``) live only here; the daemon keeps the
core Job of each unfinished job in memory.

An array's tasks share one spec (schema 6): the part they have in common (environment,
command, directory...) is stored once, in ``shared_specs`` under the array's id, and each
task's row keeps only its own fields and ``"shared": ARRAY_ID`` (:meth:`Store.insert_rows`);
:meth:`Store.spec` puts them together. A 10,000-task array with a large environment costs
one copy of it, not 10,000. Rows written before (whole specs) load as they are.

A job's environment is stored once per user (schema 10, :mod:`berth.daemon.store.envs`): its
spec names it (``"env_key"``, also a column: its last job's deletion deletes it). 100,000
submits from one shell cost one copy of its environment, not 100,000.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager

from berth.daemon.store.envs import EnvReads, Envs
from berth.daemon.store.schema import MIGRATIONS as MIGRATIONS
from berth.daemon.store.schema import SCHEMA_VERSION as SCHEMA_VERSION
from berth.daemon.store.upgrade import migrate
from berth.errors import BerthError
from berth.wire import cjson
from berth.wire.jobspec import JobSpec
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any


class UnreadableSpec(OSError):
    """A job's stored spec no longer reads as a job (a damaged row, or one written by hand):
    that job cannot start (it fails with this as its reason); the daemon goes on."""


TASK_FIELDS = ("stdout_path", "stderr_path", "array_task")  # an array task's own (and argv)


class Store:
    """One SQLite database; open with :meth:`open`."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self.db = db
        self.path = path
        self.env_reads = EnvReads()

    @classmethod
    def open(cls, path: str) -> Store:
        _refuse_empty(path)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as e:
            db.close()
            raise BerthError(
                f"state database {path} cannot be read ({e}): restore it from a backup "
                "(docs/daemon.md, 'Back up and restore'), or move it aside to start an empty "
                "queue"
            ) from None
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=5000")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise BerthError(
                f"state database {path} has schema version {version}, newer than this berth "
                f"({SCHEMA_VERSION}); upgrade berth or use another --state-dir"
            )
        migrate(db, path, version)  # (a backup first, and a log line: store/upgrade.py)
        return cls(db, path)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction: everything inside commits together or not at all."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- meta ---------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- jobs ---------------------------------------------------------------------------------
    # A job row keeps the core Job as JSON (``data``: request, state, attempts, history) beside
    # the columns queries need, and the spec (argv, env, cwd, log paths) that only launching
    # reads. ``launched`` is the write-ahead mark: the attempt number that is (or is about to
    # be) handed to a supervisor. (``sup_pid``, of schema 1, is not used: run files say it.)

    def next_id(self) -> int:
        """Ids are never reused, even when old jobs have been purged (``last_id``) or
        quarantined."""
        row = self.db.execute(
            "SELECT MAX(id) FROM (SELECT id FROM jobs UNION ALL SELECT id FROM quarantine)"
        ).fetchone()
        return max(int(row[0] or 0), int(self.meta("last_id") or 0)) + 1

    def quarantine(self, job_id: int, reason: str) -> None:
        """Move a job's row that cannot be loaded aside (inside a transaction)."""
        self.db.execute(
            "INSERT OR REPLACE INTO quarantine(id, at, reason, state, data, spec) "
            "SELECT id, ?, ?, state, data, spec FROM jobs WHERE id = ?",
            (time.time(), reason, job_id),
        )
        self.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def quarantined(self) -> list[tuple[int, str]]:
        """(id, reason) of every quarantined row."""
        rows = self.db.execute("SELECT id, reason FROM quarantine ORDER BY id")
        return [(int(r[0]), str(r[1])) for r in rows]

    # Purging jobs that ended long ago: remember the highest id first (see next_id).
    LAST_ID_SQL = "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_id', ?)"
    PURGE_SQL = "DELETE FROM jobs WHERE id = ?"

    def ended_before(self, before: float) -> list[int]:
        """Ids of finished jobs that ended before ``before``."""
        sql = (
            "SELECT id FROM jobs WHERE ended_at < ? "
            "AND state NOT IN ('PENDING', 'RUNNING', 'COMPLETING')"
        )
        return [int(r[0]) for r in self.db.execute(sql, (before,))]

    def twin(self, key: str) -> tuple[int, str] | None:
        """The newest job with this ``--unique`` identity: (id, state), or None."""
        row = self.db.execute(
            "SELECT id, state FROM jobs WHERE unique_key = ? ORDER BY id DESC LIMIT 1", (key,)
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    # Batches for :class:`berth.daemon.store.writer.Writer` (``executemany`` inside one transaction).
    INSERT_SQL = (
        "INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec, unique_key, env_key) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    ENV_SQL = "INSERT OR IGNORE INTO envs(key, env) VALUES (?, ?)"
    # ``launched`` is kept when the row's value is NULL (not given).
    SAVE_SQL = (
        "UPDATE jobs SET state = ?, ended_at = ?, data = ?, "
        "launched = COALESCE(?, launched) WHERE id = ?"
    )

    SHARED_SQL = "INSERT OR IGNORE INTO shared_specs(id, tasks, spec) VALUES (?, ?, ?)"

    @staticmethod
    def insert_rows(new: Iterable[tuple[dict[str, Any], JobSpec]]) -> list[tuple[str, list[Any]]]:
        """The statements that insert ``new`` jobs (the job's ``to_dict()``, its spec): an
        array task's row keeps only its own fields, with the array's shared spec once per
        array (again in a later batch with more of its tasks: it is inserted if missing)."""
        rows: list[tuple[Any, ...]] = []
        shared: dict[int, tuple[tuple[str, ...] | None, tuple[Any, ...]]] = {}
        envs = Envs()
        for job, spec in new:
            task = spec.array_task
            if task is None:
                whole = spec.to_dict(env=not spec.env)  # (an environment: once per user, envs)
                if spec.env:
                    whole["env_key"] = envs.key(job["uid"], spec.env)
                rows.append(Store.insert_row(job, whole))
                continue
            head = task[0]
            if head not in shared:
                common = {k: v for k, v in spec.to_dict().items() if k not in TASK_FIELDS}
                text = json.dumps(common, separators=(",", ":"))
                shared[head] = (spec.argv, (head, task[2], text))
            own: dict[str, Any] = {"shared": head}
            if spec.argv != shared[head][0]:  # (`berth sweep`: each task its own command)
                own["argv"] = list(spec.argv or ())
            for key in TASK_FIELDS:
                value = getattr(spec, key)
                if value is not None:
                    own[key] = list(value) if type(value) is tuple else value
            rows.append(Store.insert_row(job, own))
        out: list[tuple[str, list[Any]]] = []
        if envs.rows:
            out.append((Store.ENV_SQL, list(envs.rows.items())))
        if shared:
            out.append((Store.SHARED_SQL, [row for _, row in shared.values()]))
        if rows:
            out.append((Store.INSERT_SQL, rows))
        return out

    @staticmethod
    def insert_row(job: dict[str, Any], spec: dict[str, Any]) -> tuple[Any, ...]:
        return (
            job["id"],
            job["uid"],
            job["user"],
            job["state"],
            job["submit_time"],
            cjson.dumps(job),
            cjson.dumps(spec),
            spec.get("unique_key"),
            spec.get("env_key"),
        )

    @staticmethod
    def save_row(
        job: dict[str, Any], ended_at: float | None = None, launched: int | None = None
    ) -> tuple[Any, ...]:
        return (job["state"], ended_at, cjson.dumps(job), launched, job["id"])

    def unfinished(self) -> list[tuple[int, str, int]]:
        """(id, job JSON, launched attempt) of every unfinished job, by id."""
        rows = self.db.execute(
            "SELECT id, data, launched FROM jobs "
            "WHERE state IN ('PENDING', 'RUNNING', 'COMPLETING') ORDER BY id"
        )
        return [(int(r[0]), str(r[1]), int(r[2] or 0)) for r in rows]

    def job(self, job_id: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT data FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def last_job(self, uid: int) -> int | None:
        """The newest job of user ``uid`` on record (an index's last entry), or None."""
        row = self.db.execute("SELECT MAX(id) FROM jobs WHERE uid = ?", (uid,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def spec(self, job_id: int) -> JobSpec:
        """The job's spec as it was stored (``JobSpec.to_dict()``, today's shape or an earlier
        daemon's), read back through the one validator of a job."""
        row = self.db.execute("SELECT spec FROM jobs WHERE id = ?", (job_id,)).fetchone()
        try:
            raw = json.loads(row[0])
            head = raw.pop("shared", None) if type(raw) is dict else None
            if head is not None:  # an array task: the array's shared spec, then its own
                common = self.db.execute(
                    "SELECT spec FROM shared_specs WHERE id = ?", (head,)
                ).fetchone()
                if common is None:
                    raise ValueError(f"the shared spec of array {head!r} is missing")
                raw = {**json.loads(common[0]), **raw}
            key = raw.pop("env_key", None) if type(raw) is dict else None
            if key is not None:  # its environment, stored once (envs)
                env = self.env_reads.get(self.db, key)  # (decoded once a user: EnvReads)
                if env is None:
                    raise ValueError(f"its environment {key!r} is missing")
                raw["env"] = env
            return JobSpec.from_dict(raw, stored=True)
        except (ValueError, TypeError, ProtocolError) as e:  # damaged, or written by hand
            raise UnreadableSpec(
                f"job {job_id}: its stored spec does not read as a job ({e})"
            ) from e

    def finished_since(self, since: float, uid: int | None) -> list[dict[str, Any]]:
        sql = (
            "SELECT data FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING', 'COMPLETING') "
            "AND ended_at >= ?"
        )
        args: list[Any] = [since]
        if uid is not None:
            sql += " AND uid = ?"
            args.append(uid)
        return [json.loads(r[0]) for r in self.db.execute(sql + " ORDER BY id", args)]

    def ended_with_dependencies(self, since_job: int, limit: int) -> list[dict[str, Any]]:
        """Jobs that ended FAILED or CANCELLED, with dependencies, no earlier than job
        ``since_job`` ended (those its end may have doomed: `berth resubmit --cascade`), at
        most ``limit`` of them, oldest first."""
        rows = self.db.execute(
            "SELECT data FROM jobs WHERE state IN ('FAILED', 'CANCELLED') "
            "AND ended_at >= (SELECT ended_at FROM jobs WHERE id = ?) "
            "AND data NOT LIKE '%\"dependencies\":[]%' ORDER BY ended_at, id LIMIT ?",
            (since_job, limit),
        )
        return [json.loads(r[0]) for r in rows]

    def finished_recent(self, n: int) -> list[dict[str, Any]]:
        """The ``n`` jobs that finished last, newest first."""
        sql = (
            "SELECT data FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING', 'COMPLETING') "
            "AND ended_at IS NOT NULL ORDER BY ended_at DESC LIMIT ?"
        )
        return [json.loads(r[0]) for r in self.db.execute(sql, (n,))]

    # -- the dashboard's samples (written through the journal) --------------------------------

    SAMPLE_SQL = "INSERT OR REPLACE INTO samples(at, data) VALUES (?, ?)"
    PRUNE_SAMPLES_SQL = "DELETE FROM samples WHERE at < ?"

    def samples_since(self, since: float) -> list[tuple[float, str]]:
        rows = self.db.execute("SELECT at, data FROM samples WHERE at >= ? ORDER BY at", (since,))
        return [(float(r[0]), str(r[1])) for r in rows]

    # -- paused GPUs --------------------------------------------------------------------------

    def paused(self) -> set[str]:
        return {str(r[0]) for r in self.db.execute("SELECT gpu FROM paused")}

    def set_paused(
        self, gpu: str, paused: bool, by: str | None = None, note: str | None = None
    ) -> None:
        """Pause (drain) or resume a GPU; ``by`` and ``note`` say who paused it and why
        (pausing a paused GPU again replaces them)."""
        if paused:
            self.db.execute(
                "INSERT OR IGNORE INTO paused(gpu, since) VALUES (?, ?)", (gpu, time.time())
            )
            if by is not None or note is not None:
                self.db.execute(
                    "UPDATE paused SET by_user = ?, note = ? WHERE gpu = ?", (by, note, gpu)
                )
        else:
            self.db.execute("DELETE FROM paused WHERE gpu = ?", (gpu,))

    def pause_notes(self) -> dict[str, tuple[str | None, str | None, float]]:
        """GPU uuid -> (who paused it, why, since) for every paused GPU."""
        rows = self.db.execute("SELECT gpu, by_user, note, since FROM paused")
        return {str(r[0]): (r[1], r[2], float(r[3])) for r in rows}

    # -- admin reservations (berth.daemon.engine.reservations) -------------------------------

    def reservations(self) -> list[tuple[int, float, float, str]]:
        """(id, start, end, data) of every reservation kept."""
        rows = self.db.execute("SELECT id, start, end, data FROM reservations ORDER BY id")
        return [(int(r[0]), float(r[1]), float(r[2]), str(r[3])) for r in rows]

    def add_reservation(self, start: float, end: float, data: str) -> int:
        cur = self.db.execute(
            "INSERT INTO reservations(start, end, data) VALUES (?, ?, ?)", (start, end, data)
        )
        return int(cur.lastrowid or 0)

    def remove_reservation(self, rid: int) -> None:
        self.db.execute("DELETE FROM reservations WHERE id = ?", (rid,))

    # -- fair share and limits (berth.daemon.engine.accounts) ----------------------------------------

    USAGE_SQL = "INSERT OR REPLACE INTO usage(tenant, value, as_of) VALUES (?, ?, ?)"

    def usage(self) -> dict[str, tuple[float, float]]:
        """tenant -> (decayed GPU-seconds, as of when)."""
        rows = self.db.execute("SELECT tenant, value, as_of FROM usage")
        return {str(r[0]): (float(r[1]), float(r[2])) for r in rows}

    def limits(self) -> dict[str, dict[str, float | None]]:
        """user -> {max_gpus, max_jobs, max_time, shares} as set (None: not set)."""
        rows = self.db.execute("SELECT user, max_gpus, max_jobs, max_time, shares FROM limits")
        return {
            str(r[0]): {"max_gpus": r[1], "max_jobs": r[2], "max_time": r[3], "shares": r[4]}
            for r in rows
        }

    def set_limits(self, user: str, values: dict[str, float | None]) -> None:
        """Replace ``user``'s row (a row of nothing but NULLs is removed)."""
        keys = ("max_gpus", "max_jobs", "max_time", "shares")
        if all(values.get(k) is None for k in keys):
            self.db.execute("DELETE FROM limits WHERE user = ?", (user,))
            return
        self.db.execute(
            "INSERT OR REPLACE INTO limits(user, max_gpus, max_jobs, max_time, shares) "
            "VALUES (?, ?, ?, ?, ?)",
            (user, *(values.get(k) for k in keys)),
        )


def _refuse_empty(path: str) -> None:
    """An existing database of 0 bytes is not a new queue: it was truncated or lost its
    contents (a fresh database has its header written before the daemon serves). Starting on
    it would give job ids from 1 again and forget every job: refuse, and say what to do."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return
    wal = path + "-wal"
    if size == 0 and not (os.path.exists(wal) and os.path.getsize(wal) > 0):
        raise BerthError(
            f"state database {path} exists but is empty (0 bytes): it was truncated or its "
            "contents were lost, so every job it held would be forgotten and job ids would "
            "start from 1 again. Restore it from a backup (docs/daemon.md, 'Back up and "
            "restore'); to start an empty queue on purpose, delete the file"
        )


def open_store(state_dir: str) -> Store:
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    return Store.open(os.path.join(state_dir, "berth.db"))
