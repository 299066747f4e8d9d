"""A submitted job's environment: the same as its user's last one is that one. Each submit
of a shell brings its environment in a dict of its own; one equal to the user's last is
replaced by it, so the specs the daemon keeps until their start share one copy, the store
encodes it once (:class:`berth.daemon.store.envs.Envs`), and the checks of a job's
environment and its size take it as checked and measured once
(:mod:`berth.wire.keptenv`)."""

from __future__ import annotations

from typing import Any

from berth.wire import keptenv


def same_env(uid: int, env: dict[Any, Any]) -> dict[Any, Any]:
    """The user's last environment (kept: :func:`kept`) if ``env`` equals it, else ``env``."""
    last = keptenv.of(uid)
    if last is not None and (last is env or last == env):
        return last
    return env


def kept(uid: int, env: dict[str, str]) -> None:
    """``env`` (of a job of ``uid`` that passed every check of its spec) is the one the
    user's next equal environments become (one per user, at most ``keptenv.MOST``)."""
    keptenv.keep(uid, env)
