"""Strict checks of everything a client sends, before the daemon acts on any of it.

The one place where a submitted job's fields are checked (:func:`job_spec`; issue 15 folds
it into a typed ``JobSpec.from_dict``), and where the values of other requests are (job ids,
signal numbers, timeouts, uids). :mod:`berth.wire.protocol` checks only that a request's
fields exist and have a JSON type; here every value is checked by *exact* type (``True`` is
not a job id, ``2.0`` is not a priority), element by element, and by range (finite numbers;
a signal the kernel knows; a time limit that ends; strings without NUL; paths without
``..``). A refusal is a ``BAD_REQUEST`` naming the field and the value, and changes nothing.

Why so strict: a value that passes here is stored, and read back at every restart. A bool
that passed an int check once made the daemon accept ``after_ok: [true]`` and then fail at
every start; an out-of-range signal or an infinite limit would fail far from the request,
in a supervisor, with nobody to tell.
"""

from __future__ import annotations

import math
import signal as _signal

from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_ID = 2**63 - 1  # job ids are SQLite integers
MAX_UID = 2**32 - 2  # (uid_t; -1 is "none")
MAX_GPU_INDEX = 1023
MAX_GPUS = 1024
MAX_MEM = 1 << 50  # 1 PiB of GPU memory per GPU
MAX_PRIORITY = 2**31 - 1  # as Slurm's nice range
MAX_RETRIES = 100
MAX_TIME_LIMIT = 366 * 86400.0  # a year: leave -t out for no limit
MAX_TIMEOUT = 7 * 86400.0  # of a `wait` request
MAX_TEXT = 64 * 1024  # a name, a path, a setup script line... (argv and env: the frame limit)
SIGNAL_MAX = int(getattr(_signal, "SIGRTMAX", 64))
MAX_ARRAY_TASKS = 10_000  # tasks of one array (Slurm's MaxArraySize is 1001 by default)


def _bad(field: str, value: Any, want: str) -> ProtocolError:
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return ProtocolError(protocol.BAD_REQUEST, f"{field} = {shown}: {want}; nothing was changed")


def is_int(v: Any) -> bool:
    return type(v) is int  # not bool, not float


def integer(field: str, v: Any, low: int, high: int) -> int:
    if not is_int(v) or not low <= v <= high:
        raise _bad(field, v, f"must be an integer from {low} to {high}")
    return int(v)


def number(field: str, v: Any, low: float, high: float, *, low_open: bool = True) -> float:
    """A finite int or float in (low, high] (or [low, high] unless ``low_open``)."""
    ok = type(v) in (int, float) and math.isfinite(v) and v <= high
    ok = ok and (v > low if low_open else v >= low)
    if not ok:
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        raise _bad(field, v, f"must be a finite number {bound} and at most {high:g}")
    return v  # type: ignore[no-any-return]


def text(field: str, v: Any, *, empty: bool = False, limit: int = MAX_TEXT) -> str:
    if type(v) is not str:
        raise _bad(field, v, "must be a string")
    if "\0" in v:
        raise _bad(field, v, "must not contain a NUL character")
    if not empty and not v:
        raise _bad(field, v, "must not be empty")
    if len(v) > limit:
        raise _bad(field, v, f"is longer than {limit} characters")
    return v


def int_list(field: str, v: Any, low: int, high: int, *, empty: bool = False) -> list[int]:
    if type(v) is not list or not all(is_int(i) and low <= i <= high for i in v):
        raise _bad(field, v, f"must be a list of integers from {low} to {high}")
    if not v and not empty:
        raise _bad(field, v, "must not be empty")
    return list(v)


# -- requests other than submit ---------------------------------------------------------------


def job_id(v: Any, field: str = "job_id") -> int:
    return integer(field, v, 1, MAX_ID)


def job_ids(v: Any) -> list[int]:
    return int_list("job_ids", [] if v is None else v, 1, MAX_ID, empty=True)


def signal_number(v: Any) -> int | None:
    """A signal to send to a job: 1..SIGRTMAX (0 would only probe; larger ones do not exist)."""
    if v is None:
        return None
    if not is_int(v) or not 1 <= v <= SIGNAL_MAX:
        raise _bad("signal", v, f"must be a signal number from 1 to {SIGNAL_MAX} (or a name)")
    return int(v)


def timeout(v: Any) -> float | None:
    return None if v is None else number("timeout", v, 0, MAX_TIMEOUT, low_open=False)


def uid(v: Any) -> int | None:
    return None if v is None else integer("uid", v, 0, MAX_UID)


def strings(field: str, v: Any) -> list[str]:
    if v is None:
        return []
    if type(v) is not list:
        raise _bad(field, v, "must be a list of strings")
    return [text(f"{field}[{i}]", s, limit=256) for i, s in enumerate(v)]


def gpu_names(field: str, v: Any) -> list[str]:
    """GPUs named by index (int or text) or UUID (`pause`, `resume`)."""
    if v is None:
        return []
    if type(v) is not list:
        raise _bad(field, v, "must be a list of GPU indices or UUIDs")
    out = []
    for g in v:
        if is_int(g) and 0 <= g <= MAX_GPU_INDEX:
            out.append(str(g))
        elif type(g) is str:
            out.append(text(field, g, limit=256))
        else:
            raise _bad(field, g, "must be a GPU index or UUID")
    return out


# -- submit -----------------------------------------------------------------------------------


def _gpus(v: Any) -> float:
    g = number("job field 'gpus'", v, 0, MAX_GPUS)
    if g >= 1 and g != int(g):
        raise _bad("job field 'gpus'", v, "must be a whole number of GPUs or a fraction below 1")
    return int(g) if g >= 1 else g


def _log_path(field: str, v: Any) -> str:
    path = text(field, v, limit=4096)
    if ".." in path.split("/"):
        raise _bad(field, v, "must not have a '..' component: name the file by its real path")
    return path


def _env(v: Any) -> dict[str, str]:
    if type(v) is not dict:
        raise _bad("job field 'env'", v, "must be an object of strings")
    for k, val in v.items():
        if type(k) is not str or not k or "=" in k or "\0" in k:
            raise _bad("job field 'env'", k, "a variable name must be a non-empty string "
                       "without '=' or NUL")  # fmt: skip
        if type(val) is not str or "\0" in val:
            raise _bad(f"job field 'env' {k!r}", val, "must be a string without NUL")
    return dict(v)


def _argv(v: Any) -> list[str]:
    if type(v) is not list or not v:
        raise _bad("job field 'argv'", v, "must be a non-empty list of strings")
    for i, a in enumerate(v):
        text(f"job field 'argv[{i}]'", a, empty=i > 0, limit=1 << 24)
    return list(v)


def _cwd(v: Any) -> str:
    path = text("job field 'cwd'", v, limit=4096)
    if not path.startswith("/"):
        raise _bad("job field 'cwd'", v, "must be an absolute path")
    return path


def _opt(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """``check``, or None passes."""
    return lambda field, v: None if v is None else check(field, v)


def _bool(field: str, v: Any) -> bool:
    if type(v) is not bool:
        raise _bad(field, v, "must be true or false")
    return bool(v)


def _array(field: str, v: Any) -> str:
    """``--array 0-9%2``, read by the same parser as the Slurm backend's."""
    from berth.backends.base import ArraySpec
    from berth.errors import UsageError

    spec = text(field, v, limit=4096)
    try:
        parsed = ArraySpec.parse(spec)
    except UsageError as e:
        raise _bad(field, v, str(e)) from None
    if len(parsed.indices) > MAX_ARRAY_TASKS:
        raise _bad(field, v, f"has {len(parsed.indices)} tasks; at most {MAX_ARRAY_TASKS}")
    return parsed.text


def _argvs(field: str, v: Any) -> list[list[str]]:
    """Each task's own command (`berth sweep`): a list of argv lists."""
    if type(v) is not list or not v or len(v) > MAX_ARRAY_TASKS:
        raise _bad(field, v, f"must be a list of 1 to {MAX_ARRAY_TASKS} commands")
    return [_argv(a) for a in v]


def _inject(field: str, v: Any) -> str:
    from berth.wire.inject import parse

    try:
        parse(text(field, v, limit=256))
    except ValueError as e:
        raise _bad(field, v, str(e)) from None
    return str(v)


def _mail(field: str, v: Any) -> str:
    addr = text(field, v, limit=256)
    if addr.startswith("-") or any(c.isspace() or c in "<>,;\"'()" for c in addr):
        raise _bad(field, v, "must be one mail address (user or user@host)")
    return addr


# field -> (check(field name, value) -> normalised value, required)
JOB_FIELDS: dict[str, tuple[Callable[[str, Any], Any], bool]] = {
    "argv": (lambda f, v: _argv(v), False),
    "wrap": (_opt(lambda f, v: text(f, v, limit=1 << 24)), False),
    "env": (lambda f, v: _env(v), True),
    "cwd": (lambda f, v: _cwd(v), True),
    "name": (_opt(lambda f, v: text(f, v, empty=True, limit=1024)), False),
    "gpus": (lambda f, v: _gpus(v), False),
    "mem": (_opt(lambda f, v: integer(f, v, 1, MAX_MEM)), False),
    "gpu_ids": (_opt(lambda f, v: int_list(f, v, 0, MAX_GPU_INDEX)), False),
    "prefer": (_opt(lambda f, v: int_list(f, v, 0, MAX_GPU_INDEX, empty=True)), False),
    "name_filter": (_opt(lambda f, v: text(f, v, limit=256)), False),
    "time_limit": (_opt(lambda f, v: number(f, v, 0, MAX_TIME_LIMIT)), False),
    "priority": (lambda f, v: integer(f, v, -MAX_PRIORITY, MAX_PRIORITY), False),
    "stdout": (_opt(_log_path), False),
    "stderr": (_opt(_log_path), False),
    "env_setup": (_opt(lambda f, v: text(f, v, limit=1 << 20)), False),
    "conda": (_opt(lambda f, v: text(f, v, limit=1024)), False),
    "after_ok": (lambda f, v: int_list(f, v, 1, MAX_ID, empty=True), False),
    "retries": (lambda f, v: integer(f, v, 0, MAX_RETRIES), False),
    "requeue": (_bool, False),
    "hold": (_bool, False),
    "pty": (_bool, False),
    "unique": (_bool, False),
    "umask": (lambda f, v: integer(f, v, 0, 0o777), False),
    "array": (_opt(_array), False),
    "array_argvs": (_opt(_argvs), False),
    "inject_arg": (_opt(_inject), False),
    "notify": (_opt(lambda f, v: text(f, v, limit=MAX_TEXT)), False),
    "mail_user": (_opt(_mail), False),
    "request_source": (_opt(lambda f, v: text(f, v, limit=1024)), False),
    "once": (_opt(lambda f, v: text(f, v, limit=256)), False),
}


def job_spec(raw: Any) -> dict[str, Any]:
    """The submitted job ``raw``, every field checked by exact type and range (see the
    module's docstring); returns a new dict (normalised: ``gpus`` 2.0 -> 2). Raises
    ProtocolError(BAD_REQUEST) naming the first bad field."""
    if type(raw) is not dict:
        raise _bad("job", raw, "must be an object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        entry = JOB_FIELDS.get(key)
        if entry is None:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"job: unknown field {key!r} (known: {', '.join(JOB_FIELDS)}); nothing was queued",
            )
        out[key] = entry[0](f"job field {key!r}", value)
    for key, (_, required) in JOB_FIELDS.items():
        if required and key not in out:
            raise ProtocolError(protocol.BAD_REQUEST, f"job: missing field {key!r}")
    if (out.get("argv") is None) == (out.get("wrap") is None):
        raise ProtocolError(
            protocol.BAD_REQUEST, "job: give a command (argv) or a shell string (wrap), one of them"
        )
    if out.get("inject_arg") is not None and out.get("wrap") is not None:
        raise _bad("job field 'inject_arg'", out["inject_arg"], "needs a command (argv), not "
                   "a shell string: in a --wrap string write {cuda} or {gpus} where the ids go")  # fmt: skip
    argvs = out.get("array_argvs")
    if argvs is not None:
        from berth.backends.base import ArraySpec

        n = len(ArraySpec.parse(out["array"]).indices) if out.get("array") else 0
        if n != len(argvs) or out.get("argv") is None:
            raise _bad("job field 'array_argvs'", f"{len(argvs)} commands",
                       f"needs an argv and an array of as many tasks (it has {n})")  # fmt: skip
    if out.get("once") is not None and out.get("unique"):
        raise _bad("job field 'once'", out["once"], "not with 'unique': one identity per job")
    ids = out.get("gpu_ids")
    if ids is not None and len(set(ids)) != len(ids):
        raise _bad("job field 'gpu_ids'", ids, "names a GPU twice")
    if ids is not None and "gpus" in out and out["gpus"] >= 1 and out["gpus"] > len(ids):
        raise _bad(
            "job field 'gpus'", out["gpus"], f"asks for more GPUs than gpu_ids allows ({ids})"
        )
    return out
