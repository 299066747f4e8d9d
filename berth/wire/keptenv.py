"""Environments the daemon keeps, each shared by many jobs of its user (issue 35): checked
once and encoded once, not at every submit.

A shell's submits bring the same environment again and again (``--export ALL``: 1-2 KB of
variables); the daemon's admission makes an equal one *that* dict
(:func:`berth.daemon.engine.admission.envs.same_env`), which it never changes (a JobSpec's
``env`` must not be changed), and :func:`keep` notes it once it has passed the checks of a
job's environment (:func:`berth.wire.fieldkinds.env`). The checks then take it as it is
(:func:`checked`: it is itself, not an equal one a client could have sent) and a job's size is
counted from its JSON made once (:func:`json_of`, :func:`berth.wire.jobsize.sizes`).

Only the daemon keeps environments (the client never calls :func:`keep`), one per user (a
user's next one replaces it), and they are held while kept (so an ``id`` is never another's):
at most :data:`MOST`, forgotten all at once past it. Standard library only.
"""

from __future__ import annotations

from berth.wire import cjson

MOST = 1024  # environments kept (the daemon keeps one per user: admission/envs.py)

# id -> (the environment, its JSON, its size as jobsize.env_bytes counts it): held, so that no
# other object can have its id
_KEPT: dict[int, tuple[dict[str, str], str, int]] = {}
_OWNER: dict[int, int] = {}  # uid -> the id of its environment kept


def keep(uid: int, env: dict[str, str]) -> None:
    """Note ``env``, which has passed :func:`berth.wire.fieldkinds.env`'s checks and is kept
    unchanged for the next jobs of ``uid`` (instead of its environment kept before)."""
    if checked(env):
        return
    before = _OWNER.pop(uid, None)
    if before is not None:
        _KEPT.pop(before, None)
    if len(_KEPT) >= MOST:
        _KEPT.clear()
        _OWNER.clear()
    _KEPT[id(env)] = (env, cjson.dumps(env), _size(env))
    _OWNER[uid] = id(env)


def checked(env: object) -> bool:
    """Whether ``env`` is (this very object) an environment kept: checked already."""
    kept = _KEPT.get(id(env))
    return kept is not None and kept[0] is env


def json_of(env: object) -> str | None:
    """The JSON of ``env`` if it is kept (:func:`cjson.dumps`'s text), else None."""
    kept = _KEPT.get(id(env))
    return kept[1] if kept is not None and kept[0] is env else None


def size_of(env: object) -> int | None:
    """The bytes of ``env``'s variables (``NAME=value`` each) if it is kept, else None."""
    kept = _KEPT.get(id(env))
    return kept[2] if kept is not None and kept[0] is env else None


def _size(env: dict[str, str]) -> int:
    names, values = "".join(env), "".join(env.values())
    if names.isascii() and values.isascii():  # (its length is its size: no copy made)
        return len(names) + len(values) + 2 * len(env)
    return sum(
        len(k.encode(errors="surrogatepass")) + len(v.encode(errors="surrogatepass")) + 2
        for k, v in env.items()
    )


def forget() -> None:
    """Keep none (the tests' fresh start)."""
    _KEPT.clear()
    _OWNER.clear()
