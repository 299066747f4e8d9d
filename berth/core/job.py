"""The job model: a request, the job, its attempts and its history. JSON-ready.

Everything here is persisted state (what the store keeps and the simulator replays). Runtime
handles (pids, file descriptors, timers) belong to the daemon and never live on a Job; the
daemon may keep what it needs to re-create them (argv, cwd, env, log paths) in ``Job.extra``,
which the core never reads.

Jobs change state only through :func:`berth.core.transition.transition`. ``Request`` lives
in :mod:`berth.core.request` and is re-exported here.

A queue of 100,000 pending jobs keeps 100,000 of these (issue 35: the daemon's memory), so a
pending job's lists cost nothing of their own: its attempts are the one empty :class:`Shared`
list, and its history the one ``submitted`` event that every job submitted at the same time
(an array's tasks, a jobs file's lines) shares. A :class:`Shared` list refuses to change:
whoever adds to a job's history or attempts assigns it a new list
(:func:`berth.core.transition.transition` does). Its ``extra`` may be one that equal jobs
share too (:class:`SharedExtra`): it is changed through :meth:`Job.note` and
:meth:`Job.unnote` only.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from dataclasses import dataclass, field
from typing import Any

from berth.core.request import Request as Request  # (re-exported)
from berth.core.states import State
from berth.dependency import Dependency
from berth.errors import UsageError


class Shared(list):  # type: ignore[type-arg]
    """A list that many jobs share (their empty attempts, their one ``submitted`` event):
    it refuses to change; a job given more gets a list of its own (``job.history =
    [*job.history, event]``)."""

    __slots__ = ()

    def _refused(self, *_: object, **__: object) -> None:
        raise TypeError("a list jobs share: assign a new one ([*job.history, event])")

    append = extend = insert = pop = remove = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused  # type: ignore[assignment]

    def __copy__(self) -> Shared:
        return self

    def __deepcopy__(self, memo: object) -> Shared:
        return self

    def __reduce__(self) -> tuple[type[Shared], tuple[list[object]]]:
        return (Shared, (list(self),))


@dataclass(slots=True)
class Attempt:
    """One execution of a job: its GPUs, its times, how it ended."""

    number: int
    start: float
    gpus: tuple[int, ...] = ()
    share: float = 1.0
    mem: int | None = None  # GPU memory charged per GPU (bytes), as placed
    node: str = ""
    end: float | None = None
    outcome: State | None = None
    exit_code: int | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "start": self.start,
            "gpus": list(self.gpus),
            "share": self.share,
            "mem": self.mem,
            "node": self.node,
            "end": self.end,
            "outcome": None if self.outcome is None else self.outcome.value,
            "exit_code": self.exit_code,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        out = d.get("outcome")
        return cls(
            number=int(d["number"]),
            start=float(d["start"]),
            gpus=tuple(int(g) for g in d.get("gpus") or ()),
            share=float(d.get("share", 1.0)),
            mem=d.get("mem"),
            node=d.get("node") or "",
            end=d.get("end"),
            outcome=None if out is None else State(out),
            exit_code=d.get("exit_code"),
            reason=d.get("reason") or "",
        )


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a job's history: at ``at`` it went from ``prev`` to ``state`` (``detail``)."""

    at: float
    prev: State | None
    state: State
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "prev": None if self.prev is None else self.prev.value,
            "state": self.state.value,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        prev = d.get("prev")
        return cls(float(d["at"]), None if prev is None else State(prev), State(d["state"]),
                   d.get("detail") or "")  # fmt: skip


class SharedExtra(dict):  # type: ignore[type-arg]
    """A job's ``extra`` that equal jobs share (the daemon's job table gives them one): it
    refuses to change; :meth:`Job.note` and :meth:`Job.unnote` give the job its own first."""

    __slots__ = ()
    _WHAT = "an extra jobs share"

    def _refused(self, *_: object, **__: object) -> None:
        raise TypeError(f"{self._WHAT}: change it through job.note() / job.unnote()")

    __setitem__ = __delitem__ = __ior__ = _refused  # type: ignore[assignment]
    update = setdefault = pop = popitem = clear = _refused  # type: ignore[assignment]

    def __copy__(self) -> SharedExtra:
        return self

    def __deepcopy__(self, memo: object) -> SharedExtra:
        return self

    def __reduce__(self) -> tuple[type[SharedExtra], tuple[dict[str, Any]]]:
        return (SharedExtra, (dict(self),))


class TaskExtra(SharedExtra):
    """An array task's ``extra`` without a dict of its own (issue 35: 100,000 queued tasks):
    what its array's tasks share (``common``, one :class:`SharedExtra`) and its own
    ``"array": [A, index]``, made when read. It reads as that dict (``get``, ``in``, ``[]``,
    iteration, ``items``, ``dict(extra)``, ``==``) and refuses to change, as a
    :class:`SharedExtra` does (its refusals, copies that are itself): :meth:`Job.note` gives
    the job a dict of its own first; :meth:`Job.to_dict` writes the whole."""

    __slots__ = ("array_id", "common", "index")
    _WHAT = "an array task's extra"

    def __init__(self, common: dict[str, Any], array_id: int, index: int) -> None:
        super().__init__()  # (nothing in the dict's own table: the one thing it saves)
        self.common, self.array_id, self.index = common, array_id, index

    def whole(self) -> dict[str, Any]:
        """The dict it reads as (a new one)."""
        return {**self.common, "array": [self.array_id, self.index]}

    def __getitem__(self, key: str) -> Any:
        return [self.array_id, self.index] if key == "array" else self.common[key]

    def get(self, key: str, default: Any = None) -> Any:
        return [self.array_id, self.index] if key == "array" else self.common.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key == "array" or key in self.common

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.common) + ("array" not in self.common)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return self.whole().keys()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return self.whole().values()

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return self.whole().items()

    def copy(self) -> dict[str, Any]:
        return self.whole()

    def __eq__(self, other: object) -> bool:
        return self.whole() == other

    def __ne__(self, other: object) -> bool:
        return self.whole() != other

    def __repr__(self) -> str:
        return repr(self.whole())

    def __reduce__(self) -> tuple[type[TaskExtra], tuple[dict[str, Any], int, int]]:  # type: ignore[override]
        return (TaskExtra, (self.common, self.array_id, self.index))


NO_ATTEMPTS: list[Attempt] = Shared()
_last: list[tuple[float, list[Event]]] = []  # (submit time, its shared history), the last


def _history(at: float) -> list[Event]:
    """The history of a job submitted at ``at``: the one ``submitted`` event, shared by the
    jobs submitted at that time. (One tuple read and one written: a thread that reads jobs
    meanwhile, `berth report`'s, gets its own time's, whatever the other does.)"""
    last = _last[0] if _last else None
    if last is not None and last[0] == at:
        return last[1]
    made: list[Event] = Shared([Event(at, None, State.PENDING, "submitted")])
    _last[:] = [(at, made)]
    return made


@dataclass(slots=True)
class Job:
    """A job and everything the store keeps of it.

    ``queue_time`` orders jobs of equal priority (submit time at first; a requeue moves the job
    to the end of the queue). ``not_before``: not before then (``--begin``, a retry backoff). ``retries`` is how many times
    a FAILED attempt is retried; ``requeue`` turns a TIMEOUT into PREEMPTED + requeue, at most
    ``max_requeues`` times (None: with no end), after which the time limit ends it TIMEOUT.
    ``tenant`` groups jobs for fair share (defaults to ``user``); ``project``: the project
    (Slurm's account) the job is charged to, "" for none: fair share compares projects first,
    then tenants within one (:mod:`berth.core.fairshare`). ``group`` / ``group_limit``:
    at most that many jobs of the group run at once (an array's ``%K``; 0 = no limit,
    :mod:`berth.core.groups`).
    """

    id: int
    submit_time: float
    request: Request = field(default_factory=Request)
    name: str = ""
    user: str = ""
    uid: int = -1
    gid: int = -1
    tenant: str = ""
    project: str = ""
    priority: int = 0
    time_limit: float | None = None  # seconds; None = no limit
    dependencies: tuple[Dependency, ...] = ()
    dependency_any: bool = False  # any one of the dependencies (sbatch's '?'), not all
    retries: int = 0
    retry_delay: float = 10.0  # first backoff; doubles per failed attempt
    requeue: bool = False
    max_requeues: int | None = None  # with ``requeue``: how many times at most (None: no end)
    held: bool = False
    state: State = State.PENDING
    queue_time: float = -1.0
    not_before: float | None = None
    attempts: list[Attempt] = field(default_factory=lambda: NO_ATTEMPTS)
    history: list[Event] = field(default_factory=list)  # (none given: the shared one)
    extra: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    group_limit: int = 0

    def __post_init__(self) -> None:
        if self.group_limit < 0:
            raise UsageError(f"invalid group limit {self.group_limit!r}: must be 0 or more")
        if self.queue_time < 0:
            self.queue_time = self.submit_time
        if not self.tenant:
            self.tenant = self.user
        if self.max_requeues is not None and self.max_requeues < 0:
            raise UsageError(f"invalid max_requeues {self.max_requeues!r}: must be 0 or more")
        if self.time_limit is not None and not self.time_limit > 0:
            raise UsageError(f"invalid time limit {self.time_limit!r}: must be positive")
        if not self.history:
            self.history = _history(self.submit_time)
        if not self.attempts:
            self.attempts = NO_ATTEMPTS

    @property
    def attempt(self) -> Attempt | None:
        """The current (or last) attempt, or None if it never started."""
        return self.attempts[-1] if self.attempts else None

    @property
    def exit_code(self) -> int | None:
        a = self.attempt
        return None if a is None else a.exit_code

    def deadline(self) -> float | None:
        """When the running attempt reaches its time limit, or None."""
        a = self.attempt
        if self.time_limit is None or a is None or a.end is not None:
            return None
        return a.start + self.time_limit

    def note(self, key: str, value: Any) -> None:
        """``extra[key] = value``, in an ``extra`` of its own (it may share one)."""
        extra = self.extra
        if type(extra) is not dict:
            extra = self.extra = dict(extra)
        extra[key] = value

    def unnote(self, key: str) -> Any:
        """``extra.pop(key, None)``, in an ``extra`` of its own (it may share one)."""
        if key not in self.extra:
            return None
        if type(self.extra) is not dict:
            self.extra = dict(self.extra)
        return self.extra.pop(key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "user": self.user,
            "uid": self.uid,
            "gid": self.gid,
            "tenant": self.tenant,
            "project": self.project,
            "submit_time": self.submit_time,
            "priority": self.priority,
            "request": self.request.to_dict(),
            "time_limit": self.time_limit,
            "dependencies": [str(d) for d in self.dependencies],
            "dependency_any": self.dependency_any,
            "retries": self.retries,
            "retry_delay": self.retry_delay,
            "requeue": self.requeue,
            "max_requeues": self.max_requeues,
            "held": self.held,
            "state": self.state.value,
            "queue_time": self.queue_time,
            "not_before": self.not_before,
            "attempts": [a.to_dict() for a in self.attempts],
            "history": [e.to_dict() for e in self.history],
            "extra": self.extra.whole() if type(self.extra) is TaskExtra else self.extra,
            "group": self.group,
            "group_limit": self.group_limit,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Job:
        deps: list[Dependency] = []
        for text in d.get("dependencies") or ():
            deps.extend(Dependency.parse_list(str(text)))
        return cls(
            id=int(d["id"]),
            submit_time=float(d["submit_time"]),
            request=Request.from_dict(d.get("request") or {}),
            name=d.get("name") or "",
            user=d.get("user") or "",
            uid=int(d.get("uid", -1)),
            gid=int(d.get("gid", -1)),
            tenant=d.get("tenant") or "",
            project=d.get("project") or "",
            priority=int(d.get("priority", 0)),
            time_limit=d.get("time_limit"),
            dependencies=tuple(deps),
            dependency_any=bool(d.get("dependency_any", False)),
            retries=int(d.get("retries", 0)),
            retry_delay=float(d.get("retry_delay", 10.0)),
            requeue=bool(d.get("requeue", False)),
            max_requeues=None if d.get("max_requeues") is None else int(d["max_requeues"]),
            held=bool(d.get("held", False)),
            state=State(d.get("state", "PENDING")),
            queue_time=float(d.get("queue_time", -1.0)),
            not_before=d.get("not_before"),
            attempts=[Attempt.from_dict(a) for a in d.get("attempts") or ()],
            history=[Event.from_dict(e) for e in d.get("history") or ()],
            extra=dict(d.get("extra") or {}),
            group=d.get("group") or "",
            group_limit=int(d.get("group_limit") or 0),
        )
