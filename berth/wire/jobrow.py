"""One job as `berth queue` lists it: the reply row the daemon answers (``queue``, ``wait``;
:mod:`berth.daemon.engine.views` builds it from a job), the dashboard shows, MCP hands out and
``berth queue --json`` prints, and the local backend reads (:mod:`berth.backends.local`).
Declared here, once, beside the requests (:mod:`berth.wire.protocol`): a row has exactly these
keys, :data:`FIELDS` always and :data:`PENDING_FIELDS` / :data:`EXTRA_FIELDS` where the queue
view adds them. Slurm's `queue --json` gives rows of this shape too
(:func:`berth.backends.base.as_row`), its own fields (``native``, ``where``...) after these.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Every row: (key, what it holds)
FIELDS = (
    "id",  # the job's id (an array's task has its own id: array_job/array_task name it 12_3;
    # on Slurm, Slurm's: a string, 1234 or 1234_5)
    "name", "user", "uid", "project",
    "state",  # PENDING, RUNNING, ... (Slurm's words)
    "st",  # its code: PD, R, ...
    "time",  # seconds it ran (None while pending)
    "gpus",  # how many GPUs it asked (a fraction: a share of one)
    "each",  # a share of each of several GPUs, or None
    "mem",  # memory it asked per GPU, bytes, or None
    "nodelist",  # the GPUs it runs on
    "reason",  # why it is pending, the short word (Resources, Priority, Held...)
    "reason_detail",  # ... and in full
    "priority", "submit_time", "exit_code",
    "array_job", "array_task",  # an array's task: its array's id and its index
    "group_limit",  # an array's %K: at most K tasks at once
    "pty",  # started with a terminal (`berth attach`)
    "dependency",  # as written (afterok:12:13)
    "depends_on",  # the job ids it names
)  # fmt: skip
# A pending job's row in the queue view: its place in line and what puts it there.
PENDING_FIELDS = ("order", "share_factor", "queued_at", "start_estimate")
# Where asked: an array's pending tasks folded into one row; the job's model (--what-if).
# A retry of an earlier job (--retry-oom): that job's id.
EXTRA_FIELDS = ("array_tasks", "model", "retry_of")
ALL_FIELDS = (*FIELDS, *PENDING_FIELDS, *EXTRA_FIELDS)


class JobRow:
    """A row: its fields as attributes (those a row did not carry: None)."""

    __slots__ = (*ALL_FIELDS, "_given")

    id: int | str  # (Slurm's: a string)
    name: str
    user: str
    uid: int
    project: str | None
    state: str
    st: str
    time: float | None
    gpus: float | str  # (a gres Slurm gave that berth cannot read: as it is)
    each: float | None
    mem: int | None
    nodelist: list[int]
    reason: str | None
    reason_detail: str | None
    priority: int | None
    submit_time: float
    exit_code: int | None
    array_job: int | str | None
    array_task: int | None
    group_limit: int | None
    pty: bool
    dependency: str | None
    depends_on: list[int]
    order: int | None
    share_factor: float | None
    queued_at: float | None
    start_estimate: Any
    array_tasks: list[int] | None
    model: dict[str, Any] | None
    retry_of: int | None

    def __init__(self, **fields: Any) -> None:
        unknown = sorted(set(fields) - set(ALL_FIELDS))
        if unknown:
            raise TypeError(f"JobRow: unknown field {unknown[0]!r}")
        missing = [k for k in FIELDS if k not in fields]
        if missing:
            raise TypeError(f"JobRow: field {missing[0]!r} missing")
        for key in ALL_FIELDS:
            object.__setattr__(self, key, fields.get(key))
        self._given = tuple(k for k in ALL_FIELDS if k in fields)

    def to_dict(self) -> dict[str, Any]:
        """The row as the wire carries it: the fields it was given, in declared order."""
        return {k: getattr(self, k) for k in self._given}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> JobRow:
        """A row as received; keys it does not declare (a newer daemon's) are left out, a
        declared one missing (an older daemon's) is None."""
        given = {k: raw[k] for k in ALL_FIELDS if k in raw}
        return cls(**{k: None for k in FIELDS if k not in given}, **given)
