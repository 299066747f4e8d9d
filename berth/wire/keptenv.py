"""Environments the daemon keeps, each shared by many jobs of its user (issue 35): decoded,
checked and encoded once, not at every submit.

A shell's submits bring the same environment again and again (``--export ALL``: 1-2 KB of
variables); the daemon's admission makes an equal one *that* dict
(:func:`berth.daemon.engine.admission.envs.same_env`), which it never changes (a JobSpec's
``env`` must not be changed), and :func:`keep` notes it once it has passed the checks of a
job's environment (:func:`berth.wire.fieldkinds.env`). Then:

- the checks take it as it is (:func:`checked`: it is itself, not an equal one a client sent);
- a job's size is counted from its JSON's length, measured once (:func:`json_length`,
  :func:`berth.wire.jobsize.sizes`), and its variables' bytes too (:func:`size_of`);
- a submit whose frame holds it, as the client encodes it (``"env":{...}``, the bytes of
  :func:`cjson.dumps`), is read without decoding it again (:func:`lift`): those bytes are
  replaced by :data:`MARK` before the frame is decoded, and the request is read as it would
  have been only if the mark is found as its job's ``env`` (the one the job has, whatever
  else the frame holds; see :func:`berth.daemon.requests.reading.read`); else the frame is
  decoded as it came.

Only the daemon keeps environments (the client never calls :func:`keep`), one per user (a
user's next one replaces it), and they are held while kept (so an ``id`` is never another's):
at most :data:`MOST`, forgotten all at once past it. Standard library only.
"""

from __future__ import annotations

import os

from berth.wire import cjson

MOST = 1024  # environments kept (the daemon keeps one per user: admission/envs.py)
# What stands for a kept environment in a frame while it is decoded: no client can send it
# (it is drawn at random when the daemon starts; and it would stand for their own anyway)
MARK = "berth-kept-env-" + os.urandom(12).hex()
_MARKED = b'"env":"' + MARK.encode() + b'"'

# id -> (the environment, its JSON's length, its size as jobsize.env_bytes counts it): held,
# so that no other object can have its id
_KEPT: dict[int, tuple[dict[str, str], int, int]] = {}
_OWNER: dict[int, int] = {}  # uid -> the id of its environment kept
_NEEDLE: dict[int, tuple[bytes, dict[str, str]]] = {}  # uid -> ('"env":' + its JSON, it)


def keep(uid: int, env: dict[str, str]) -> None:
    """Note ``env``, which has passed :func:`berth.wire.fieldkinds.env`'s checks and is kept
    unchanged for the next jobs of ``uid`` (instead of its environment kept before)."""
    if checked(env):
        return
    before = _OWNER.pop(uid, None)
    if before is not None:
        _KEPT.pop(before, None)
    if len(_KEPT) >= MOST:
        forget()
    text = cjson.dumps(env)  # (ASCII: its length is its size in bytes)
    _KEPT[id(env)] = (env, len(text), _size(env))
    _OWNER[uid] = id(env)
    _NEEDLE[uid] = (b'"env":' + text.encode(), env)


def of(uid: int) -> dict[str, str] | None:
    """The environment kept for ``uid`` (its last job's, checked), if any."""
    found = _NEEDLE.get(uid)
    return None if found is None else found[1]


def checked(env: object) -> bool:
    """Whether ``env`` is (this very object) an environment kept: checked already."""
    kept = _KEPT.get(id(env))
    return kept is not None and kept[0] is env


def json_length(env: object) -> int | None:
    """The length of :func:`cjson.dumps` of ``env`` if it is kept, else None."""
    kept = _KEPT.get(id(env))
    return kept[1] if kept is not None and kept[0] is env else None


def size_of(env: object) -> int | None:
    """The bytes of ``env``'s variables (``NAME=value`` each) if it is kept, else None."""
    kept = _KEPT.get(id(env))
    return kept[2] if kept is not None and kept[0] is env else None


def lift(uid: int, payload: bytes) -> tuple[bytes, dict[str, str]] | None:
    """``payload`` (a request of ``uid``) with its first ``"env":{...}`` that is the user's
    kept environment as :func:`cjson.dumps` writes it replaced by ``"env":"MARK"``, and that
    environment; None if it holds none."""
    found = _NEEDLE.get(uid)
    if found is None:
        return None
    needle, env = found
    at = payload.find(needle)
    if at < 0:
        return None
    return payload[:at] + _MARKED + payload[at + len(needle) :], env


def _size(env: dict[str, str]) -> int:
    names, values = "".join(env), "".join(env.values())
    if names.isascii() and values.isascii():  # (its length is its size: no copy made)
        return len(names) + len(values) + 2 * len(env)
    return sum(
        len(k.encode(errors="surrogatepass")) + len(v.encode(errors="surrogatepass")) + 2
        for k, v in env.items()
    )


def forget() -> None:
    """Keep none (past :data:`MOST`; the tests' fresh start)."""
    _KEPT.clear()
    _OWNER.clear()
    _NEEDLE.clear()
