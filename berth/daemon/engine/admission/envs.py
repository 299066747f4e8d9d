"""A submitted job's environment: the same as its user's last one is that one. Each submit
of a shell brings its environment in a dict of its own; one equal to the user's last is
replaced by it, so the specs the daemon keeps until their start share one copy, and the
store encodes it once (:class:`berth.daemon.store.envs.Envs`)."""

from __future__ import annotations

from typing import Any

# uid -> the environment of its last job: the next one most often brings it again, in a dict
# of its own (each submit of a shell); equal, it is that one (one copy in memory for the
# specs kept until their start, and for the store's encoding: berth.daemon.store.store.Envs)
_LAST: dict[int, Any] = {}


def same_env(uid: int, env: dict[Any, Any]) -> dict[Any, Any]:
    last = _LAST.get(uid)
    if last is not None and (last is env or last == env):
        return last  # type: ignore[no-any-return]
    if len(_LAST) >= 1024:  # (bounded: many users' environments cost no more)
        _LAST.clear()
    _LAST[uid] = env  # (checked by JobSpec.from_dict before any job keeps it)
    return env
