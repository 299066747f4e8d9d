"""One check per kind of job field, for :data:`berth.wire.jobspec.FIELDS`: (the field as
messages name it, the value sent) -> the attribute's value, or ``ProtocolError(BAD_REQUEST)``
naming both. Exact types and ranges (:mod:`berth.wire.checks`). Standard library and
``berth.units`` only."""

from __future__ import annotations

from berth.errors import UsageError
from berth.units import MAX_GPU_INDEX, gpu_count
from berth.wire import keptenv
from berth.wire.checks import MAX_ID, bad, int_list, text
from berth.wire.protocol import BAD_REQUEST, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[str, Any], Any]

MAX_GPUS = 1024
MAX_PATH = 4096
MAX_ARRAY_TASKS = 10_000  # tasks of one array (Slurm's MaxArraySize is 1001 by default)


def gpus(field: str, v: Any) -> float:
    """A job's GPU count: :func:`berth.units.gpu_count`, or 0: no GPU (a CPU-only job)."""
    try:
        g = gpu_count(v, field, none=True)
    except UsageError as e:
        raise ProtocolError(BAD_REQUEST, f"{e}; nothing was changed") from None
    if g > MAX_GPUS:
        raise bad(field, v, f"must be at most {MAX_GPUS}")
    return g


def log_path(field: str, v: Any) -> str:
    path = text(field, v, limit=MAX_PATH)
    if ".." in path.split("/"):
        raise bad(field, v, "must not have a '..' component: name the file by its real path")
    return path


def abs_path(field: str, v: Any, limit: int = MAX_PATH) -> str:
    path = text(field, v, limit=limit)
    if not path.startswith("/"):
        raise bad(field, v, "must be an absolute path")
    return path


def env(field: str, v: Any) -> dict[str, str]:
    if keptenv.checked(v):  # (the daemon's own dict of its user's environment, checked once)
        return v  # type: ignore[no-any-return]
    if type(v) is not dict:
        raise bad(field, v, "must be an object of strings")
    names, values = list(v), list(v.values())
    if (  # the usual case at C speed; else each variable below, the first bad one named
        all(type(x) is str for x in names) and all(type(x) is str for x in values)
        and "" not in names and "\0" not in (joined := "=".join(names))
        and joined.count("=") == len(names) - 1 and "\0" not in "".join(values)
    ):  # fmt: skip
        return v  # (itself, never changed: the jobs of one request share their one environment)
    for k, val in v.items():
        if type(k) is not str or not k or "=" in k or "\0" in k:
            raise bad(field, k, "a variable name must be a non-empty string without '=' or NUL")
        if type(val) is not str or "\0" in val:
            raise bad(f"{field} {k!r}", val, "must be a string without NUL")
    return v  # (itself, never changed: the jobs of one request share their one environment)


def argv(field: str, v: Any) -> tuple[str, ...]:
    if type(v) is not list or not v:
        raise bad(field, v, "must be a non-empty list of strings")
    for i, a in enumerate(v):  # (named as "job field 'argv[2]'")
        text(field.removesuffix("'") + f"[{i}]'", a, empty=i > 0, limit=1 << 24)
    return tuple(v)


def boolean(field: str, v: Any) -> bool:
    if type(v) is not bool:
        raise bad(field, v, "must be true or false")
    return bool(v)


def array(field: str, v: Any) -> str:
    """``--array 0-9%2``, read by the same parser as the Slurm backend's."""
    from berth.wire.arrays import ArraySpec  # rare: --array

    spec = text(field, v, limit=4096)
    try:
        parsed = ArraySpec.parse(spec)
    except UsageError as e:
        raise bad(field, v, str(e)) from None
    if len(parsed.indices) > MAX_ARRAY_TASKS:
        raise bad(field, v, f"has {len(parsed.indices)} tasks; at most {MAX_ARRAY_TASKS}")
    return parsed.text


def argvs(field: str, v: Any) -> tuple[tuple[str, ...], ...]:
    """Each task's own command (`berth sweep`): a list of argv lists."""
    if type(v) is not list or not v or len(v) > MAX_ARRAY_TASKS:
        raise bad(field, v, f"must be a list of 1 to {MAX_ARRAY_TASKS} commands")
    return tuple(argv("job field 'argv'", a) for a in v)


def inject(field: str, v: Any) -> str:
    from berth.wire.inject import parse  # rare: --inject-arg

    try:
        parse(text(field, v, limit=256))
    except ValueError as e:
        raise bad(field, v, str(e)) from None
    return str(v)


def dependency(field: str, v: Any) -> str:
    """``--dependency``, read by :func:`berth.dependency.parse_dependency` and kept as it
    writes it back (``afterok:12:13``)."""
    from berth.dependency import parse_dependency  # rare: --dependency

    try:
        return str(parse_dependency(text(field, v, limit=4096)))
    except UsageError as e:
        raise bad(field, v, str(e)) from None


def mail(field: str, v: Any) -> str:
    addr = text(field, v, limit=256)
    if addr.startswith("-") or any(c.isspace() or c in "<>,;\"'()" for c in addr):
        raise bad(field, v, "must be one mail address (user or user@host)")
    return addr


MAIL_TYPES = ("BEGIN", "END", "FAIL", "REQUEUE")  # (ALL: the four; NONE: none)


def mail_types(text_: str) -> str:
    """``--mail-type``'s value normalised ("fail,begin" -> "BEGIN,FAIL"; ALL; NONE), or
    UsageError naming it. TIME_LIMIT and REQUEUE are sbatch's; a time limit's end is a FAIL."""
    words = {w.strip().upper() for w in text_.split(",") if w.strip()}
    words = {"FAIL" if w in ("TIME_LIMIT", "INVALID_DEPEND") else w for w in words}
    if "ALL" in words:
        words = (words - {"ALL"}) | set(MAIL_TYPES)
    unknown = sorted(words - {*MAIL_TYPES, "NONE"})
    if unknown or not words or ("NONE" in words and len(words) > 1):
        raise UsageError(
            f"--mail-type {text_!r}: give BEGIN, END, FAIL, REQUEUE, ALL or NONE, "
            "comma-separated (as sbatch)"
        )
    return ",".join(w for w in (*MAIL_TYPES, "NONE") if w in words)


def mail_type(field: str, v: Any) -> str:
    try:
        return mail_types(text(field, v, limit=128))
    except UsageError as e:
        raise bad(field, v, str(e).split(": ", 1)[1]) from None


PROJECT_RULE = (
    "a project name: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
)


def project(field: str, v: Any) -> str:
    """``--project`` (Slurm's account): a plain name; the daemon checks it is one of its
    projects and that the user may charge it."""
    name = text(field, v, limit=64)
    ok = name[0].isascii() and name[0].isalnum()
    if not ok or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise bad(field, v, f"must be {PROJECT_RULE}")
    return name


def array_task(field: str, v: Any) -> tuple[int, ...]:
    if type(v) is not list or len(v) != 5:
        raise bad(field, v, "must be [array id, task index, count, lowest, highest]")
    return tuple(int_list(field, v, 0, MAX_ID))


def optional(check: Check) -> Check:
    """``check``, or None passes (and the field takes its default)."""
    return lambda field, v: None if v is None else check(field, v)


def text_of(limit: int, empty: bool = False) -> Check:
    return optional(lambda f, v: text(f, v, limit=limit, empty=empty))


def gpu_list(empty: bool) -> Check:
    return optional(lambda f, v: tuple(int_list(f, v, 0, MAX_GPU_INDEX, empty=empty)))
