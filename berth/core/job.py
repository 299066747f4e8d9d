"""The job model: a request, the job, its attempts and its history. JSON-ready.

Everything here is persisted state (what the store keeps and the simulator replays). Runtime
handles (pids, file descriptors, timers) belong to the daemon and never live on a Job; the
daemon may keep what it needs to re-create them (argv, cwd, env, log paths) in ``Job.extra``,
which the core never reads.

Jobs change state only through :func:`berth.core.transition.transition`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.core.states import State
from berth.errors import UsageError
from berth.units import gpu_count

DEPENDENCY_KINDS = ("after", "afterok", "afternotok", "afterany")


def _tuple_or_none(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(v) for v in value)


@dataclass(slots=True)
class Request:
    """What a job needs, per attempt.

    - ``gpus``: an integer >= 1 (whole, exclusive GPUs) or a fraction in (0, 1) (a share of one
      GPU, shared with other fractional holders); 0 means no GPU (simulated CPU-only pods).
      The one rule of a GPU count, :func:`berth.units.gpu_count`.
    - ``mem``: GPU memory per GPU in bytes, or None. A fractional job without ``mem`` is charged
      ``gpus x memory_total`` of its GPU, so shares never overcommit memory.
    - ``gpu_ids``: the only GPUs allowed (NVML indices), or None for any.
    - ``prefer``: GPUs to take first when several qualify.
    - ``name``: case-insensitive substring the GPU's name must contain (``"A100"``).
    - ``cpu`` / ``ram``: node resources (millicores, bytes); only the simulator's multi-node
      inventories declare node capacity, so on a plain host these are not checked.
    """

    gpus: float = 1
    mem: int | None = None
    gpu_ids: tuple[int, ...] | None = None
    prefer: tuple[int, ...] = ()
    name: str | None = None
    cpu: float | None = None
    ram: int | None = None

    def __post_init__(self) -> None:
        self.gpus = gpu_count(self.gpus, "gpus", none=True)
        if self.mem is not None and self.mem < 0:
            raise UsageError(f"invalid GPU memory {self.mem!r}: must not be negative")
        if self.gpu_ids is not None:
            self.gpu_ids = tuple(sorted(set(self.gpu_ids)))
            if self.whole and len(self.gpu_ids) < self.gpus:
                raise UsageError(
                    f"asked for {self.gpus} GPUs but allowed only {list(self.gpu_ids)}: "
                    "allow more GPUs or ask for fewer"
                )
        self.prefer = tuple(self.prefer)

    @property
    def whole(self) -> bool:
        """True for whole, exclusive GPUs (gpus >= 1)."""
        return self.gpus >= 1

    @property
    def count(self) -> int:
        """How many GPUs the job holds: gpus for whole jobs, 1 for a share, 0 for none."""
        return int(self.gpus) if self.gpus >= 1 else (1 if self.gpus > 0 else 0)

    @property
    def share(self) -> float:
        """Share of each held GPU: 1.0 for whole GPUs, the fraction otherwise."""
        return 1.0 if self.gpus >= 1 else float(self.gpus)

    @property
    def gpu_amount(self) -> float:
        """GPUs in use, counting fractions: 2 for two GPUs, 0.5 for half of one."""
        return float(self.gpus)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "mem": self.mem,
            "gpu_ids": None if self.gpu_ids is None else list(self.gpu_ids),
            "prefer": list(self.prefer),
            "name": self.name,
            "cpu": self.cpu,
            "ram": self.ram,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Request:
        return cls(
            gpus=d.get("gpus", 1),
            mem=d.get("mem"),
            gpu_ids=_tuple_or_none(d.get("gpu_ids")),
            prefer=tuple(int(v) for v in d.get("prefer") or ()),
            name=d.get("name"),
            cpu=d.get("cpu"),
            ram=d.get("ram"),
        )


@dataclass(frozen=True, slots=True)
class Dependency:
    """``afterok:12``: start only after job 12 COMPLETED. ``after`` = once 12 started;
    ``afterany`` = once 12 finished in any way; ``afternotok`` = once 12 finished unsuccessfully."""

    kind: str
    job_id: int

    def __post_init__(self) -> None:
        if self.kind not in DEPENDENCY_KINDS:
            raise UsageError(
                f"unknown dependency type {self.kind!r}: use one of {', '.join(DEPENDENCY_KINDS)}"
            )

    def __str__(self) -> str:
        return f"{self.kind}:{self.job_id}"

    @classmethod
    def parse_list(cls, text: str) -> tuple[Dependency, ...]:
        """``"afterok:1:2,afterany:3"`` (sbatch's syntax) -> dependencies."""
        out: list[Dependency] = []
        for part in text.replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            kind, _, ids = part.partition(":")
            if not ids:
                raise UsageError(f"invalid dependency {part!r}: expected e.g. afterok:12[:13]")
            for raw in ids.split(":"):
                try:
                    job_id = int(raw)
                except ValueError:
                    raise UsageError(
                        f"invalid job id {raw!r} in dependency {part!r}: expected an integer"
                    ) from None
                out.append(cls(kind.strip().lower(), job_id))
        return tuple(out)


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
    retries: int = 0
    retry_delay: float = 10.0  # first backoff; doubles per failed attempt
    requeue: bool = False
    max_requeues: int | None = None  # with ``requeue``: how many times at most (None: no end)
    held: bool = False
    state: State = State.PENDING
    queue_time: float = -1.0
    not_before: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    history: list[Event] = field(default_factory=list)
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
            self.history.append(Event(self.submit_time, None, State.PENDING, "submitted"))

    @property
    def attempt(self) -> Attempt | None:
        """The current (or last) attempt, or None if it never started."""
        return self.attempts[-1] if self.attempts else None

    @property
    def exit_code(self) -> int | None:
        a = self.attempt
        return None if a is None else a.exit_code

    @property
    def start_time(self) -> float | None:
        """Start of the first attempt."""
        return self.attempts[0].start if self.attempts else None

    @property
    def end_time(self) -> float | None:
        return self.attempts[-1].end if self.state.finished and self.attempts else None

    def deadline(self) -> float | None:
        """When the running attempt reaches its time limit, or None."""
        a = self.attempt
        if self.time_limit is None or a is None or a.end is not None:
            return None
        return a.start + self.time_limit

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
            "extra": self.extra,
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
