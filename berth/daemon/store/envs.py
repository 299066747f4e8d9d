"""A job's environment in the store (schema 10): each (user, environment) once, in ``envs``,
keyed by a hash of the uid and the environment's JSON; a job's spec names it (``env_key``,
:meth:`berth.daemon.store.store.Store.insert_rows`, :meth:`~berth.daemon.store.store.Store.spec`)."""

from __future__ import annotations

import hashlib

from berth.wire import cjson


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
