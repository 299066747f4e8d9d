"""The job, as one typed shape from the CLI to the launcher: :class:`JobSpec`.

``berth submit`` (and ``--file``, ``sweep``, ``watch``) builds a JobSpec with
:meth:`JobSpec.from_dict` and sends :meth:`JobSpec.to_dict`; the daemon's intake builds it
again from what arrived (it never trusts the client), adds what only it knows (log paths, the
``--unique`` key, an array task's place) with :meth:`JobSpec.replace`, and the store keeps
:meth:`JobSpec.to_dict`; the launcher and the Slurm mapping read its attributes.

:meth:`JobSpec.from_dict` is the only validator of a job. Every field is checked by exact
type and range (:mod:`berth.wire.checks`): a bool that passed an int check once made the daemon
accept ``after_ok: [true]`` and then fail at every start; an out-of-range value or an infinite
limit would fail far from the request, in a supervisor, with nobody to tell. Then the rules
between fields (a command or a shell string, one of them; ``gpus`` within ``gpu_ids``...). A
refusal is ``ProtocolError(BAD_REQUEST)`` naming the field and the value; the CLI shows the
same message as a usage error, before anything is sent. A GPU count follows the one rule of
:func:`berth.units.gpu_count`.

The JSON shape (:meth:`JobSpec.to_dict`) is the one the daemon has always stored: a field at
its default is left out, lists are lists, so rows written by earlier daemons load as they are.

A plain slotted class rather than a dataclass: ``dataclasses`` costs ~6 ms of import time on
``berth submit``'s path (see :mod:`berth.devices.model`). Standard library and ``berth.units``
only.
"""

from __future__ import annotations

from berth.errors import UsageError
from berth.units import MAX_GPU_INDEX, gpu_count
from berth.wire.checks import MAX_ID, MAX_TEXT, bad, int_list, integer, number, text
from berth.wire.protocol import BAD_REQUEST, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[str, Any], Any]

MAX_GPUS = 1024
MAX_MEM = 1 << 50  # 1 PiB of GPU memory per GPU
MAX_PRIORITY = 2**31 - 1  # as Slurm's nice range
MAX_RETRIES = 100
MAX_TIME_LIMIT = 366 * 86400.0  # a year: leave -t out for no limit
MAX_ARRAY_TASKS = 10_000  # tasks of one array (Slurm's MaxArraySize is 1001 by default)
MAX_PATH = 4096


# -- one check per kind of field: (field as named in messages, value) -> the attribute's value


def _gpus(field: str, v: Any) -> float:
    try:
        g = gpu_count(v, field)
    except UsageError as e:
        raise ProtocolError(BAD_REQUEST, f"{e}; nothing was changed") from None
    if g > MAX_GPUS:
        raise bad(field, v, f"must be at most {MAX_GPUS}")
    return g


def _log_path(field: str, v: Any) -> str:
    path = text(field, v, limit=MAX_PATH)
    if ".." in path.split("/"):
        raise bad(field, v, "must not have a '..' component: name the file by its real path")
    return path


def _abs_path(field: str, v: Any, limit: int = MAX_PATH) -> str:
    path = text(field, v, limit=limit)
    if not path.startswith("/"):
        raise bad(field, v, "must be an absolute path")
    return path


def _env(field: str, v: Any) -> dict[str, str]:
    if type(v) is not dict:
        raise bad(field, v, "must be an object of strings")
    for k, val in v.items():
        if type(k) is not str or not k or "=" in k or "\0" in k:
            raise bad(field, k, "a variable name must be a non-empty string without '=' or NUL")
        if type(val) is not str or "\0" in val:
            raise bad(f"{field} {k!r}", val, "must be a string without NUL")
    return dict(v)


def _argv(field: str, v: Any) -> tuple[str, ...]:
    if type(v) is not list or not v:
        raise bad(field, v, "must be a non-empty list of strings")
    for i, a in enumerate(v):  # (named as "job field 'argv[2]'")
        text(field.removesuffix("'") + f"[{i}]'", a, empty=i > 0, limit=1 << 24)
    return tuple(v)


def _bool(field: str, v: Any) -> bool:
    if type(v) is not bool:
        raise bad(field, v, "must be true or false")
    return bool(v)


def _array(field: str, v: Any) -> str:
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


def _argvs(field: str, v: Any) -> tuple[tuple[str, ...], ...]:
    """Each task's own command (`berth sweep`): a list of argv lists."""
    if type(v) is not list or not v or len(v) > MAX_ARRAY_TASKS:
        raise bad(field, v, f"must be a list of 1 to {MAX_ARRAY_TASKS} commands")
    return tuple(_argv("job field 'argv'", a) for a in v)


def _inject(field: str, v: Any) -> str:
    from berth.wire.inject import parse  # rare: --inject-arg

    try:
        parse(text(field, v, limit=256))
    except ValueError as e:
        raise bad(field, v, str(e)) from None
    return str(v)


def _mail(field: str, v: Any) -> str:
    addr = text(field, v, limit=256)
    if addr.startswith("-") or any(c.isspace() or c in "<>,;\"'()" for c in addr):
        raise bad(field, v, "must be one mail address (user or user@host)")
    return addr


PROJECT_RULE = (
    "a project name: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
)


def _project(field: str, v: Any) -> str:
    """``--project`` (Slurm's account): a plain name; the daemon checks it is one of its
    projects and that the user may charge it."""
    name = text(field, v, limit=64)
    ok = name[0].isascii() and name[0].isalnum()
    if not ok or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise bad(field, v, f"must be {PROJECT_RULE}")
    return name


def _array_task(field: str, v: Any) -> tuple[int, ...]:
    if type(v) is not list or len(v) != 5:
        raise bad(field, v, "must be [array id, task index, count, lowest, highest]")
    return tuple(int_list(field, v, 0, MAX_ID))


def _opt(check: Check) -> Check:
    """``check``, or None passes (and the field takes its default)."""
    return lambda field, v: None if v is None else check(field, v)


def _text(limit: int, empty: bool = False) -> Check:
    return _opt(lambda f, v: text(f, v, limit=limit, empty=empty))


def _ints(empty: bool) -> Check:
    return _opt(lambda f, v: tuple(int_list(f, v, 0, MAX_GPU_INDEX, empty=empty)))


_REQUIRED: Any = object()

# What a client may send: field -> (check, default); a field at its default is left out of
# to_dict(). The order is the wire's (and the one listed in an unknown field's refusal).
FIELDS: dict[str, tuple[Check, Any]] = {
    "argv": (_argv, None),
    "wrap": (_text(1 << 24), None),
    "env": (_env, _REQUIRED),
    "cwd": (_abs_path, _REQUIRED),
    "name": (_text(1024, empty=True), None),
    "gpus": (_gpus, 1),
    "mem": (_opt(lambda f, v: integer(f, v, 1, MAX_MEM)), None),
    "gpu_ids": (_ints(empty=False), None),
    "prefer": (_ints(empty=True), ()),
    "name_filter": (_text(256), None),
    "time_limit": (_opt(lambda f, v: number(f, v, 0, MAX_TIME_LIMIT)), None),
    "priority": (lambda f, v: integer(f, v, -MAX_PRIORITY, MAX_PRIORITY), 0),
    "stdout": (_opt(_log_path), None),
    "stderr": (_opt(_log_path), None),
    "env_setup": (_text(1 << 20), None),
    "conda": (_text(1024), None),
    "after_ok": (lambda f, v: tuple(int_list(f, v, 1, MAX_ID, empty=True)), ()),
    "retries": (lambda f, v: integer(f, v, 0, MAX_RETRIES), 0),
    "by_memory": (_bool, False),  # --mem without -g: a share of one GPU sized by memory
    "requeue": (_opt(_bool), None),  # None: as the daemon's --on-time-limit says
    "max_requeues": (_opt(lambda f, v: integer(f, v, 0, MAX_RETRIES)), None),
    "begin": (_opt(lambda f, v: number(f, v, 0, 1e11)), None),  # Unix time (--begin)
    "hold": (_bool, False),
    "pty": (_bool, False),
    "unique": (_bool, False),
    "keep_idle": (_bool, False),
    "umask": (lambda f, v: integer(f, v, 0, 0o777), None),
    "array": (_opt(_array), None),
    "array_argvs": (_opt(_argvs), None),
    "inject_arg": (_opt(_inject), None),
    "notify": (_text(MAX_TEXT), None),
    "mail_user": (_opt(_mail), None),
    "request_source": (_text(1024), None),
    "once": (_text(256), None),
    "project": (_opt(_project), None),
}
# What the daemon adds when it accepts a job (never sent by a client; stored with the job).
DAEMON_FIELDS: dict[str, tuple[Check, Any]] = {
    "stdout_path": (_opt(lambda f, v: _abs_path(f, v, 1 << 16)), None),
    "stderr_path": (_opt(lambda f, v: _abs_path(f, v, 1 << 16)), None),
    "pty_dir": (_opt(_abs_path), None),
    "unique_key": (_text(256), None),
    "array_task": (_opt(_array_task), None),  # [array id, index, count, lowest, highest]
}
_ALL = {**FIELDS, **DAEMON_FIELDS}


def check_field(key: str, value: Any) -> Any:
    """One field checked alone, as :meth:`JobSpec.from_dict` checks it (its message too)."""
    return _ALL[key][0](f"job field {key!r}", value)


class JobSpec:
    """One job as submitted (and, once accepted, as the daemon keeps it). Frozen: change a
    copy with :meth:`replace`. ``env`` is a dict that must not be changed either."""

    __slots__ = tuple(_ALL)

    argv: tuple[str, ...] | None  # the command, run without a shell (or ``wrap``)
    wrap: str | None  # a shell string for /bin/sh -c (``--wrap``)
    env: dict[str, str]  # the environment captured at submit (``--export``)
    cwd: str  # absolute
    name: str | None
    gpus: float  # an integer >= 1, or a share below 1 (units.gpu_count)
    mem: int | None  # GPU memory per GPU, bytes
    gpu_ids: tuple[int, ...] | None  # only these GPUs (``--gpu-ids``)
    prefer: tuple[int, ...]
    name_filter: str | None  # ``--gpu-name``
    time_limit: float | None  # seconds
    priority: int
    stdout: str | None  # as given (``-o``: %j, %u, %A, %a), relative to cwd
    stderr: str | None
    env_setup: str | None  # shell text run before the command
    conda: str | None
    after_ok: tuple[int, ...]  # job ids
    retries: int
    by_memory: bool  # the daemon sizes the share: mem / the GPU's memory (mgpu_srun's habit)
    requeue: bool | None  # at the time limit: requeue (True), end (False), the daemon's (None)
    max_requeues: int | None  # with requeue: at most this many times (None: the daemon's)
    begin: float | None  # not before this Unix time (--begin)
    hold: bool
    pty: bool
    unique: bool
    keep_idle: bool  # never released as idle (issue 25), where [enforce] idle_opt_out allows
    umask: int | None  # the submitter's (the client adds it; the daemon's default: 077)
    array: str | None  # ``0-9%2``, normalised
    array_argvs: tuple[tuple[str, ...], ...] | None  # `berth sweep`: task i's command
    inject_arg: str | None  # ``--cuda`` or ``--cuda=machine``
    notify: str | None  # shell command run as the user when the job has ended
    mail_user: str | None
    request_source: str | None  # where -g/--mem came from (the requirement table)
    once: str | None  # `berth watch`'s key of the line
    project: str | None  # --project (Slurm's account); the daemon may give its default_project
    # set by the daemon:
    stdout_path: str | None  # the log files, patterns expanded
    stderr_path: str | None
    pty_dir: str | None  # where a --pty attempt's terminal listens (a root daemon's)
    unique_key: str | None  # the --unique / once identity (berth.daemon.requests.unique)
    array_task: tuple[int, ...] | None  # (array id, task index, count, lowest, highest)

    @classmethod
    def from_dict(cls, raw: Any, *, stored: bool = False) -> JobSpec:
        """The job in ``raw`` (a submitted JSON object; with ``stored``, a row of the store,
        which may also hold the daemon's own fields), every field checked, then the rules
        between them. Raises ProtocolError(BAD_REQUEST) naming the first bad field."""
        if type(raw) is not dict:
            raise bad("job", raw, "must be an object")
        known = _ALL if stored else FIELDS
        values: dict[str, Any] = {}
        for key, value in raw.items():
            entry = known.get(key)
            if entry is None:
                raise ProtocolError(
                    BAD_REQUEST,
                    f"job: unknown field {key!r} (known: {', '.join(FIELDS)}); nothing was queued",
                )
            values[key] = entry[0](f"job field {key!r}", value)
        for key, (_, default) in FIELDS.items():
            if default is _REQUIRED and key not in values:
                raise ProtocolError(BAD_REQUEST, f"job: missing field {key!r}")
        spec = cls._make(values)
        spec._check_together()
        return spec

    @classmethod
    def _make(cls, values: dict[str, Any]) -> JobSpec:
        spec = object.__new__(cls)
        for key, (_, default) in _ALL.items():
            value = values.get(key)
            object.__setattr__(spec, key, default if value is None else value)
        return spec

    def _check_together(self) -> None:
        """The rules between fields."""
        if (self.argv is None) == (self.wrap is None):
            raise ProtocolError(
                BAD_REQUEST, "job: give a command (argv) or a shell string (wrap), one of them"
            )
        if self.inject_arg is not None and self.wrap is not None:
            raise bad("job field 'inject_arg'", self.inject_arg, "needs a command (argv), not "
                      "a shell string: in a --wrap string write {cuda} or {gpus} where the ids go")  # fmt: skip
        if self.array_argvs is not None:
            from berth.wire.arrays import ArraySpec  # rare: berth sweep

            n = len(ArraySpec.parse(self.array).indices) if self.array else 0
            if n != len(self.array_argvs) or self.argv is None:
                raise bad("job field 'array_argvs'", f"{len(self.array_argvs)} commands",
                          f"needs an argv and an array of as many tasks (it has {n})")  # fmt: skip
        if self.array is not None and (self.unique or self.once is not None):
            raise ProtocolError(BAD_REQUEST, "--unique is for one job, not an --array")
        if self.by_memory and (self.mem is None or self.gpus != 1):
            raise bad("job field 'by_memory'", True, "goes with 'mem' and one GPU ('gpus' 1)")
        ids = self.gpu_ids
        if ids is not None and len(set(ids)) != len(ids):
            raise bad("job field 'gpu_ids'", list(ids), "names a GPU twice")
        if ids is not None and self.gpus >= 1 and self.gpus > len(ids):
            raise bad("job field 'gpus'", self.gpus,
                      f"asks for more GPUs than gpu_ids allows ({list(ids)})")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The JSON object for the wire and the store: fields at their default left out."""
        out: dict[str, Any] = {}
        for key, (_, default) in _ALL.items():
            value = getattr(self, key)
            if default is not _REQUIRED and value == default and type(value) is type(default):
                continue
            if type(value) is tuple:
                value = [list(v) if type(v) is tuple else v for v in value]
            elif type(value) is dict:
                value = dict(value)
            out[key] = value
        return out

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with ``changes`` (the daemon's own fields, its defaults); not checked again:
        what comes from a client goes through :meth:`from_dict`."""
        unknown = set(changes) - set(_ALL)
        if unknown:
            raise TypeError(f"JobSpec has no field {', '.join(sorted(unknown))}")
        spec = object.__new__(JobSpec)
        for key in _ALL:
            object.__setattr__(spec, key, changes[key] if key in changes else getattr(self, key))
        return spec

    @property
    def command(self) -> str:
        """The command as the user gave it (for logs and `berth show`)."""
        return self.wrap if self.wrap is not None else " ".join(self.argv or ())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"JobSpec is frozen: use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("JobSpec is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not JobSpec:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in _ALL)

    __hash__ = None  # type: ignore[assignment]  # (env is a dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"JobSpec({shown})"
