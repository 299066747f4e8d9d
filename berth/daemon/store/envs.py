"""A job's environment in the store (schema 10): each (user, environment) once, in ``envs``,
keyed by a hash of the uid and the environment's JSON; a job's spec names it (``env_key``,
:meth:`berth.daemon.store.store.Store.insert_rows`, :meth:`~berth.daemon.store.store.Store.spec`)."""

from __future__ import annotations

import hashlib
import json

from berth.wire import cjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


class Envs:
    """The environments of one batch of new jobs and the ``envs`` rows to insert: each
    (user, environment) encoded and hashed once. The jobs of one request share one dict
    (looked at once); a user's next submit most often brings the same environment again in
    a dict of its own, compared with that user's last (:data:`_LAST`) instead of encoded."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}  # key -> the environment's JSON

    def key(self, uid: int, env: dict[str, str]) -> str:
        last = _LAST.get(uid)
        if last is not None and (last[0] is env or last[0] == env):
            self.rows[last[1]] = last[2]
            return last[1]
        text = cjson.dumps(env)
        key = hashlib.sha256(f"{uid}:{text}".encode(errors="surrogatepass")).hexdigest()[:32]
        self.rows[key] = text
        if len(_LAST) >= 1024:  # (bounded: many users' environments cost no more)
            _LAST.clear()
        _LAST[uid] = (env, key, text)
        return key


# uid -> (the environment its last job stored, its key, its JSON) (the loop's thread only)
_LAST: dict[int, tuple[dict[str, str], str, str]] = {}


READ_KEEP = 16  # environments kept decoded for the launches that read specs back (bounded)


class EnvReads:
    """The environments the launches read back (:meth:`berth.daemon.store.store.Store.spec`),
    kept decoded by key: a key is a hash of its user and its environment's text, and a row
    is never changed (``INSERT OR IGNORE``), so what a key names never changes. A queue of
    one user's jobs then costs its launches one ``SELECT`` and one decode of that user's
    environment, not one each (a real one is a few KB of JSON). Each caller gets a copy of
    its own. At most :data:`READ_KEEP` are kept (then all are dropped: a new set of users)."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, str]] = {}

    def get(self, db: sqlite3.Connection, key: str) -> dict[str, str] | None:
        """The environment ``key`` names (a copy), or None if ``db`` has no such row."""
        env = self.kept.get(key)
        if env is None:
            row = db.execute("SELECT env FROM envs WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            env = json.loads(row[0])
            if type(env) is not dict:
                return env  # type: ignore[no-any-return]  # (the spec's check says what it is)
            if len(self.kept) >= READ_KEEP:
                self.kept.clear()
            self.kept[key] = env
        return dict(env)
