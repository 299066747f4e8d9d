"""The state database's schema: its version and the migrations that lead to it (each
database is brought to :data:`SCHEMA_VERSION` when the daemon opens it,
:meth:`berth.daemon.store.store.Store.open`; a newer one is refused)."""

from __future__ import annotations

SCHEMA_VERSION = 10

# Each entry migrates from version i to i + 1: statements separated by ";", or a tuple of
# statements (a trigger's body has ";" of its own).
# A stored spec's after_ok list -> its dependency text (an empty list: none).
_AFTER_OK = """
    UPDATE {table} SET spec = CASE
        WHEN json_array_length(spec, '$.after_ok') > 0 THEN json_set(
            json_remove(spec, '$.after_ok'), '$.dependency',
            'afterok:' || (SELECT group_concat(value, ':') FROM json_each(spec, '$.after_ok')))
        ELSE json_remove(spec, '$.after_ok') END
    WHERE json_valid(spec) AND json_type(spec, '$.after_ok') = 'array'
"""

MIGRATIONS: list[str | tuple[str, ...]] = [
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE jobs(
        id INTEGER PRIMARY KEY,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        state TEXT NOT NULL,
        submitted_at REAL NOT NULL,
        ended_at REAL,
        launched INTEGER NOT NULL DEFAULT 0,
        sup_pid INTEGER,
        data TEXT NOT NULL,
        spec TEXT NOT NULL
    );
    CREATE INDEX jobs_unfinished ON jobs(state)
        WHERE state IN ('PENDING', 'RUNNING', 'COMPLETING');
    CREATE INDEX jobs_ended ON jobs(ended_at);
    CREATE TABLE paused(gpu TEXT PRIMARY KEY, since REAL NOT NULL);
    """,
    # 2: `submit --unique`: the job's identity (see berth.daemon.engine.admission.unique), to find a twin.
    """
    ALTER TABLE jobs ADD COLUMN unique_key TEXT;
    CREATE INDEX jobs_unique ON jobs(unique_key) WHERE unique_key IS NOT NULL;
    """,
    # 3: rows that could not be loaded (a bug, a hand edit, a disk error) are moved aside
    # instead of stopping the daemon; their ids stay taken.
    """
    CREATE TABLE quarantine(
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        reason TEXT NOT NULL,
        state TEXT,
        data TEXT,
        spec TEXT
    );
    """,
    # 4: the dashboard's history (berth.web.history): one row a minute, the last day kept.
    """
    CREATE TABLE samples(at REAL PRIMARY KEY, data TEXT NOT NULL);
    """,
    # 5: fair share and limits (berth.daemon.engine.accounts): each tenant's decayed GPU-seconds as
    # of a time; per-user limits set at runtime (NULL: the default; -1: no limit; user '*':
    # the defaults themselves); who paused (drained) a GPU, and why.
    """
    CREATE TABLE usage(tenant TEXT PRIMARY KEY, value REAL NOT NULL, as_of REAL NOT NULL);
    CREATE TABLE limits(
        user TEXT PRIMARY KEY,
        max_gpus REAL,
        max_jobs INTEGER,
        max_time REAL,
        shares REAL
    );
    ALTER TABLE paused ADD COLUMN by_user TEXT;
    ALTER TABLE paused ADD COLUMN note TEXT;
    """,
    # 6: an array's shared spec, once (see the module); gone with the last of its tasks' rows
    # (tasks are ids ID .. ID + tasks - 1, at most 10,000 of them: berth.wire.jobspec).
    (
        "CREATE TABLE shared_specs(id INTEGER PRIMARY KEY, tasks INTEGER NOT NULL, "
        "spec TEXT NOT NULL)",
        """
        CREATE TRIGGER shared_specs_purge AFTER DELETE ON jobs BEGIN
            DELETE FROM shared_specs
            WHERE id > OLD.id - 10000 AND id <= OLD.id AND OLD.id < id + tasks
            AND NOT EXISTS (
                SELECT 1 FROM jobs WHERE jobs.id >= shared_specs.id
                AND jobs.id < shared_specs.id + shared_specs.tasks
            );
        END
        """,
    ),
    # 7: dependencies as people write them (berth.dependency): a spec's ``after_ok: [12,
    # 13]`` becomes ``dependency: "afterok:12:13"``; each user's jobs by id, for ``@`` (your
    # last submitted job: berth.daemon.engine.admission.depends).
    (
        _AFTER_OK.format(table="jobs"),
        _AFTER_OK.format(table="shared_specs"),
        "CREATE INDEX jobs_uid ON jobs(uid, id)",
    ),
    # 8: admin reservations (berth.daemon.engine.reservations): GPUs kept for users, a group
    # or a project over a time window; ids never reused (AUTOINCREMENT).
    """
    CREATE TABLE reservations(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        start REAL NOT NULL,
        end REAL NOT NULL,
        data TEXT NOT NULL
    );
    """,
    # 9: `berth report`'s history (berth.daemon.store.summaries): per UTC day, kind (job, claim,
    # outside), user, project, GPU model and end state, the sums of berth.daemon.report.tally;
    # each job's sampled utilisation and memory (berth.web.usage), gone with its row.
    (
        """
        CREATE TABLE summaries(
            day REAL NOT NULL,
            kind TEXT NOT NULL,
            user TEXT NOT NULL,
            project TEXT NOT NULL,
            model TEXT NOT NULL,
            state TEXT NOT NULL,
            jobs INTEGER NOT NULL DEFAULT 0,
            gpu_seconds REAL NOT NULL DEFAULT 0,
            queued_seconds REAL NOT NULL DEFAULT 0,
            sampled REAL NOT NULL DEFAULT 0,
            util REAL NOT NULL DEFAULT 0,
            mem REAL NOT NULL DEFAULT 0,
            PRIMARY KEY(day, kind, user, project, model, state)
        )
        """,
        """
        CREATE TABLE job_usage(
            id INTEGER PRIMARY KEY,
            sampled REAL NOT NULL,
            util REAL NOT NULL,
            mem REAL NOT NULL,
            peak_util REAL NOT NULL,
            peak_mem REAL NOT NULL
        )
        """,
        """
        CREATE TRIGGER job_usage_purge AFTER DELETE ON jobs BEGIN
            DELETE FROM job_usage WHERE id = OLD.id;
        END
        """,
    ),
    # 10: a job's environment stored once per user (berth.daemon.store.store: ``envs``, keyed
    # by a hash of the user and the environment's JSON; a job's spec names it by
    # ``env_key``), gone with the last job that names it. Rows written before keep theirs.
    (
        "CREATE TABLE envs(key TEXT PRIMARY KEY, env TEXT NOT NULL)",
        "ALTER TABLE jobs ADD COLUMN env_key TEXT",
        "CREATE INDEX jobs_env ON jobs(env_key) WHERE env_key IS NOT NULL",
        """
        CREATE TRIGGER envs_purge AFTER DELETE ON jobs WHEN OLD.env_key IS NOT NULL BEGIN
            DELETE FROM envs WHERE key = OLD.env_key
            AND NOT EXISTS (SELECT 1 FROM jobs WHERE env_key = OLD.env_key);
        END
        """,
    ),
]
