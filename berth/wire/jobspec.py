"""The job, as one typed shape from the CLI to the launcher: :class:`JobSpec`.

``berth submit`` (and ``--file``, ``sweep``, ``watch``) builds a JobSpec with
:meth:`JobSpec.from_dict` and sends :meth:`JobSpec.to_dict`; the daemon's intake builds it
again from what arrived (it never trusts the client), adds what only it knows (log paths, the
``--unique`` key, an array task's place) with :meth:`JobSpec.replace`, and the store keeps
:meth:`JobSpec.to_dict`; the launcher and the Slurm mapping read its attributes.

:meth:`JobSpec.from_dict` is the only validator of a job. Every field is checked by exact
type and range (:mod:`berth.wire.checks`): a bool that passed an int check once made the daemon
accept a dependency on job ``true`` and then fail at every start; an out-of-range value or an infinite
limit would fail far from the request, in a supervisor, with nobody to tell. Then the rules
between fields (a command or a shell string, one of them; ``gpus`` within ``gpu_ids``...). A
refusal is ``ProtocolError(BAD_REQUEST)`` naming the field and the value; the CLI shows the
same message as a usage error, before anything is sent. A GPU count follows the one rule of
:func:`berth.units.gpu_count`.

The JSON shape (:meth:`JobSpec.to_dict`) is the one the daemon has always stored: a field at
its default is left out, lists are lists, so rows written by earlier daemons load as they are.

A tuple of its fields, each read by name through a property, rather than a dataclass:
``dataclasses`` costs ~6 ms of import time on ``berth submit``'s path (see
:mod:`berth.devices.model`), and a tuple is made or copied by one call (the daemon makes three
a submit: slots set one by one cost ~8% of a pipelined submit, issue 21). Standard library
and ``berth.units`` only.
"""

from __future__ import annotations

import operator

from berth.units import MAX_TIME_LIMIT
from berth.wire import fieldkinds as k
from berth.wire.checks import MAX_ID, MAX_TEXT, bad, int_list, integer, number
from berth.wire.protocol import BAD_REQUEST, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Check = Callable[[str, Any], Any]

MAX_MEM = 1 << 50  # 1 PiB of GPU memory per GPU
MAX_PRIORITY = 2**31 - 1  # as Slurm's nice range
MAX_RETRIES = 100
MAX_NODES = 65536  # nodes of one job (Slurm: -N)
MAX_TASKS_PER_NODE = 1024


def _legacy(raw: dict[str, Any]) -> dict[str, Any]:
    """``after_ok: [12, 13]`` (the only dependency of earlier berths' clients and rows) is
    ``dependency: "afterok:12:13"``."""
    from berth.dependency import from_after_ok  # rare: an earlier berth's job

    raw = dict(raw)
    ids = raw.pop("after_ok")
    if "dependency" in raw:
        raise bad("job field 'after_ok'", ids, "is the old form of 'dependency': give one")
    ids = int_list("job field 'after_ok'", ids, 1, MAX_ID, empty=True)
    if ids:
        raw["dependency"] = str(from_after_ok(ids))
    return raw


_REQUIRED: Any = object()

# What a client may send: field -> (check, default); a field at its default is left out of
# to_dict(). The order is the wire's (and the one listed in an unknown field's refusal).
FIELDS: dict[str, tuple[Check, Any]] = {
    "argv": (k.argv, None),
    "wrap": (k.text_of(1 << 24), None),
    "env": (k.env, _REQUIRED),
    "cwd": (k.abs_path, _REQUIRED),
    "name": (k.text_of(1024, empty=True), None),
    "gpus": (k.gpus, 1),  # (per node, with nodes)
    "nodes": (lambda f, v: integer(f, v, 1, MAX_NODES), 1),
    "ntasks_per_node": (k.optional(lambda f, v: integer(f, v, 1, MAX_TASKS_PER_NODE)), None),
    "mem": (k.optional(lambda f, v: integer(f, v, 1, MAX_MEM)), None),
    "gpu_ids": (k.gpu_list(empty=False), None),
    "prefer": (k.gpu_list(empty=True), ()),
    "name_filter": (k.text_of(256), None),
    "time_limit": (k.optional(lambda f, v: number(f, v, 0, MAX_TIME_LIMIT)), None),
    "priority": (lambda f, v: integer(f, v, -MAX_PRIORITY, MAX_PRIORITY), 0),
    "stdout": (k.optional(k.log_path), None),
    "stderr": (k.optional(k.log_path), None),
    "env_setup": (k.text_of(1 << 20), None),
    "conda": (k.text_of(1024), None),
    "dependency": (k.optional(k.dependency), None),  # --dependency, normalised (berth.dependency)
    "retries": (lambda f, v: integer(f, v, 0, MAX_RETRIES), 0),
    "by_memory": (k.boolean, False),  # --mem without -g: a share of each GPU sized by memory
    "requeue": (k.optional(k.boolean), None),  # None: as the daemon's --on-time-limit says
    "max_requeues": (k.optional(lambda f, v: integer(f, v, 0, MAX_RETRIES)), None),
    "begin": (k.optional(lambda f, v: number(f, v, 0, 1e11)), None),  # Unix time (--begin)
    "hold": (k.boolean, False),
    "pty": (k.boolean, False),
    "unique": (k.boolean, False),
    "keep_idle": (k.boolean, False),
    "umask": (lambda f, v: integer(f, v, 0, 0o777), None),
    "array": (k.optional(k.array), None),
    "array_argvs": (k.optional(k.argvs), None),
    "inject_arg": (k.optional(k.inject), None),
    "notify": (k.text_of(MAX_TEXT), None),
    "mail_user": (k.optional(k.mail), None),
    "mail_type": (k.optional(k.mail_type), None),  # None: END,FAIL's mails (every end)
    "request_source": (k.text_of(1024), None),
    "once": (k.text_of(256), None),
    "project": (k.optional(k.project), None),
    "learn_mem": (k.boolean, False),  # no -g/--mem typed: a share sized by earlier runs' peak
    "retry_oom": (k.boolean, False),  # --retry-oom: once more, with more, after CUDA OOM
}
# What the daemon adds when it accepts a job (never sent by a client; stored with the job).
DAEMON_FIELDS: dict[str, tuple[Check, Any]] = {
    "stdout_path": (k.optional(lambda f, v: k.abs_path(f, v, 1 << 16)), None),
    "stderr_path": (k.optional(lambda f, v: k.abs_path(f, v, 1 << 16)), None),
    "pty_dir": (k.optional(k.abs_path), None),
    "unique_key": (k.text_of(256), None),
    "array_task": (k.optional(k.array_task), None),  # [array id, index, count, lowest, highest]
}
_ALL = {**FIELDS, **DAEMON_FIELDS}


def one_machine(nodes: int, ntasks_per_node: int | None) -> str | None:
    """Why the local queue (one machine, the command run once) cannot run a job of ``nodes``
    nodes and ``ntasks_per_node`` tasks on each, or None when it can: those are for Slurm."""
    if nodes > 1:
        return (f"-N {nodes}: the local queue runs on one machine; use --backend slurm to "
                "run a job across nodes")  # fmt: skip
    if (ntasks_per_node or 1) > 1:
        return (f"--ntasks-per-node {ntasks_per_node}: the local queue runs the command once "
                "(one task); use --backend slurm, where srun starts the tasks")  # fmt: skip
    return None


def check_field(key: str, value: Any) -> Any:
    """One field checked alone, as :meth:`JobSpec.from_dict` checks it (its message too)."""
    return _ALL[key][0](f"job field {key!r}", value)


class JobSpec(tuple):  # type: ignore[type-arg]
    """One job as submitted (and, once accepted, as the daemon keeps it). Frozen: change a
    copy with :meth:`replace`. ``env`` is a dict that must not be changed either. Its fields
    are the items of a tuple, in the order of ``_ALL`` (read by name: properties below)."""

    __slots__ = ()

    argv: tuple[str, ...] | None  # the command, run without a shell (or ``wrap``)
    wrap: str | None  # a shell string for /bin/sh -c (``--wrap``)
    env: dict[str, str]  # the environment captured at submit (``--export``)
    cwd: str  # absolute
    name: str | None
    gpus: float  # an integer >= 1, a share below 1 (units.gpu_count), or 0: none; per node
    nodes: int  # nodes the job spans (Slurm's -N; the local queue runs on one)
    ntasks_per_node: int | None  # tasks (srun) per node (Slurm's --ntasks-per-node)
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
    dependency: str | None  # ``afterok:12:13``, ``singleton``... (berth.dependency)
    retries: int
    by_memory: bool  # the daemon sizes the share of each GPU: mem / its memory (mgpu_srun's)
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
    mail_type: str | None  # --mail-type, normalised: "BEGIN,END,FAIL,REQUEUE", "NONE"
    request_source: str | None  # where -g/--mem came from (the requirement table)
    once: str | None  # `berth watch`'s key of the line
    project: str | None  # --project (Slurm's account); the daemon may give its default_project
    learn_mem: bool  # the client typed no -g/--mem: the daemon may size a share from history
    retry_oom: bool  # --retry-oom (berth.daemon.engine.admission.oom_retry)
    # set by the daemon:
    stdout_path: str | None  # the log files, patterns expanded
    stderr_path: str | None
    pty_dir: str | None  # where a --pty attempt's terminal listens (a root daemon's)
    unique_key: str | None  # the --unique / once identity (berth.daemon.engine.admission.unique)
    array_task: tuple[int, ...] | None  # (array id, task index, count, lowest, highest)

    @classmethod
    def from_dict(cls, raw: Any, *, stored: bool = False) -> JobSpec:
        """The job in ``raw`` (a submitted JSON object; with ``stored``, a row of the store,
        which may also hold the daemon's own fields), every field checked, then the rules
        between them. Raises ProtocolError(BAD_REQUEST) naming the first bad field."""
        if type(raw) is not dict:
            raise bad("job", raw, "must be an object")
        known = _CHECKS_ALL if stored else _CHECKS
        if "after_ok" in raw:
            raw = _legacy(raw)
        values = list(_DEFAULT_VALUES)  # (each field given set in its place: None is its default)
        for key, value in raw.items():
            entry = known.get(key)
            if entry is None:
                raise ProtocolError(
                    BAD_REQUEST,
                    f"job: unknown field {key!r} (known: {', '.join(FIELDS)}); nothing was queued",
                )
            check, label, i = entry
            if (v := check(label, value)) is not None:
                values[i] = v
        for key in _REQUIRED_KEYS:
            if key not in raw:
                raise ProtocolError(BAD_REQUEST, f"job: missing field {key!r}")
        spec: JobSpec = tuple.__new__(cls, values)
        spec._check_together()
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
        if self.array is not None and self.retry_oom:
            raise ProtocolError(BAD_REQUEST, "--retry-oom is for one job, not an --array (a "
                                "task retried alone would be no array's): submit it without")  # fmt: skip
        if self.by_memory and (self.mem is None or self.gpus < 1 or self.gpus != int(self.gpus)):
            raise bad("job field 'by_memory'", True,
                      "goes with 'mem' and a whole number of GPUs ('gpus' 1 or more)")  # fmt: skip
        if self.gpus == 0:  # (a CPU-only job: nothing of a GPU to choose)
            for field, value in (("gpu_ids", self.gpu_ids), ("prefer", self.prefer),
                                 ("mem", self.mem), ("name_filter", self.name_filter),
                                 ("inject_arg", self.inject_arg),
                                 ("retry_oom", self.retry_oom)):  # fmt: skip
                if value:
                    raise bad(f"job field '{field}'", value, "is about GPUs, and this job asks "
                              "for none ('gpus' 0: CPU only): drop it, or ask for GPUs")  # fmt: skip
        ids = self.gpu_ids
        if ids is not None and len(set(ids)) != len(ids):
            raise bad("job field 'gpu_ids'", list(ids), "names a GPU twice")
        if ids is not None and self.gpus >= 1 and self.gpus > len(ids):
            raise bad("job field 'gpus'", self.gpus,
                      f"asks for more GPUs than gpu_ids allows ({list(ids)})")  # fmt: skip

    def to_dict(self, env: bool = True) -> dict[str, Any]:
        """The JSON object for the wire and the store: fields at their default left out
        (``env=False``: and the environment, which the store and a job's size take apart)."""
        out: dict[str, Any] = {}
        for (key, default), value in zip(_DEFAULTS, self, strict=True):
            if value is default or (
                default is not _REQUIRED and value == default and type(value) is type(default)
            ):
                continue  # (most fields of most jobs: their default, the same object)
            if type(value) is tuple:
                value = [list(v) if type(v) is tuple else v for v in value]
            elif type(value) is dict:  # (env, the one field that is a dict)
                if not env:
                    continue
                value = dict(value)
            out[key] = value
        return out

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with ``changes`` (the daemon's own fields, its defaults); not checked again:
        what comes from a client goes through :meth:`from_dict`."""
        unknown = changes.keys() - _INDEX.keys()
        if unknown:
            raise TypeError(f"JobSpec has no field {', '.join(sorted(unknown))}")
        values = list(self)
        for key, value in changes.items():
            values[_INDEX[key]] = value
        return tuple.__new__(JobSpec, values)

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
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if type(other) is not JobSpec:
            return NotImplemented
        return tuple.__ne__(self, other)

    __hash__ = None  # type: ignore[assignment]  # (env is a dict)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"JobSpec({shown})"


# Each field's name and default, in the tuple's order; each field's place in it; and each
# field read by name (a property of its item).
_DEFAULTS: tuple[tuple[str, Any], ...] = tuple((key, d) for key, (_, d) in _ALL.items())
_DEFAULT_VALUES: tuple[Any, ...] = tuple(d for _, d in _DEFAULTS)
_INDEX: dict[str, int] = {key: i for i, key in enumerate(_ALL)}
# What from_dict reads a field with: its check, its name in messages, its place in the tuple
_CHECKS_ALL: dict[str, tuple[Check, str, int]] = {
    key: (check, f"job field {key!r}", _INDEX[key]) for key, (check, _) in _ALL.items()
}
_CHECKS = {key: _CHECKS_ALL[key] for key in FIELDS}
_REQUIRED_KEYS = tuple(key for key, (_, d) in FIELDS.items() if d is _REQUIRED)
for _key, _i in _INDEX.items():
    setattr(JobSpec, _key, property(operator.itemgetter(_i), doc=f"the job's {_key}"))
del _key, _i
