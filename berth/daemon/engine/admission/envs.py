"""A submitted job's environment: the same as its user's last one is that one. Each submit
of a shell brings its environment in a dict of its own; one equal to the user's last is
replaced by it, so the specs the daemon keeps until their start share one copy, the store
encodes it once (:class:`berth.daemon.store.envs.Envs`), and the checks of a job's
environment and its size take it as checked and measured once
(:mod:`berth.wire.keptenv`)."""

from __future__ import annotations

from typing import Any

from berth.wire import keptenv

# uid -> the environment of its last job (checked): the next one most often brings it again,
# in a dict of its own (each submit of a shell); equal, it is that one (one copy in memory
# for the specs kept until their start, and for the store's encoding:
# berth.daemon.store.store.Envs)
_LAST: dict[int, Any] = {}


def same_env(uid: int, env: dict[Any, Any]) -> dict[Any, Any]:
    """The user's last environment if ``env`` equals it, else ``env`` itself."""
    last = _LAST.get(uid)
    if last is not None and (last is env or last == env):
        return last  # type: ignore[no-any-return]
    return env


def kept(uid: int, env: dict[str, str]) -> None:
    """``env`` (of a job of ``uid`` that passed every check of its spec) is the one the
    user's next equal environments become."""
    keptenv.keep(uid, env)  # (one per user, as here)
    if _LAST.get(uid) is env:
        return
    if len(_LAST) >= 1024:  # (bounded: many users' environments cost no more)
        _LAST.clear()
    _LAST[uid] = env
