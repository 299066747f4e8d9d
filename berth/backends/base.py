"""The backend interface: what `berth submit/queue/show/cancel/logs/wait` need from whatever
runs the jobs. Two backends satisfy it: the local berth daemon (:mod:`berth.backends.local`)
and Slurm (:mod:`berth.backends.slurm`). `berth queue/show/cancel/logs/wait` go through it on
both (one command module each, whichever backend); one conformance suite
(tests/slurm/test_slurm_conformance.py) runs against both, and tests/slurm/test_slurm_one_rule.py
runs the same commands against both and compares.

The rules the commands apply whatever the backend, kept here once: :func:`exit_status` (what
`berth wait` and `logs -f` exit with) and :func:`aggregate` (an array's tasks as one job); the
ST column is ``berth/state_codes.py``'s.

A job is submitted as the :class:`~berth.wire.jobspec.JobSpec` ``berth submit`` builds and
comes back as a :class:`JobInfo`. Job ids are
strings: ``"12"``, or ``"12_3"`` for task 3 of array job 12 (Slurm's notation).

Arrays: ``submit(job, array=ArraySpec.parse("0-9%2"))`` queues one job of N tasks, at most
``throttle`` running at once; each task sees ``BERTH_ARRAY_JOB_ID`` and ``BERTH_ARRAY_TASK_ID``
and ``%A`` / ``%a`` in its log names are the array's id and the task's index. A backend that
has no arrays yet raises :class:`Unsupported` (the local daemon, until it queues arrays
itself: it would take the same :class:`ArraySpec`).
"""

from __future__ import annotations

from berth.errors import BerthError

# ``--array``'s parser, shared with the daemon's job spec (re-exported here for the backends)
from berth.wire.arrays import MAX_ARRAY_INDEX as MAX_ARRAY_INDEX
from berth.wire.arrays import ArraySpec as ArraySpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Protocol

    from berth.wire.jobspec import JobSpec

    class Backend(Protocol):
        name: str

        def submit(self, job: JobSpec, array: ArraySpec | None = None) -> Submitted:
            """Queue the job (all of its tasks, for an array); durable once this returns."""

        def cancel(self, ids: Sequence[str], signal: int | None = None) -> dict[str, str]:
            """Cancel these jobs (or only send them ``signal``): id -> what happened
            (``already CANCELLED`` for one that had ended). An id the backend does not know
            is a UsageError naming it, and nothing is cancelled."""

        def cancel_mine(self, states: Sequence[str], signal: int | None = None) -> dict[str, str]:
            """Cancel (or signal) every unfinished job of the caller (only those in
            ``states``, if any): id -> what happened, as :meth:`cancel`; in one request where
            the backend can (`berth cancel --all-mine`: linear in the jobs)."""

        def status(self, ids: Sequence[str]) -> dict[str, JobInfo]:
            """The jobs named, in one query (an unknown id is left out). An array's id gives
            its tasks."""

        def list(
            self,
            *,
            user: str | None = None,
            finished: bool = False,
            states: Sequence[str] = (),
        ) -> list[JobInfo]:
            """Unfinished jobs (of ``user``, else everyone's), one per array task;
            ``finished``: also recently ended ones; ``states``: only these (``PD``,
            ``RUNNING``: berth's names or codes; a finished state implies ``finished``)."""

        def show(self, job_id: str) -> dict[str, Any]:
            """Everything the backend says of one job (its own shape: `berth show` formats
            each backend's); a UsageError if it knows no such job."""

        def logs(self, job_id: str) -> tuple[str, str]:
            """The paths of the job's stdout and stderr (the same file unless -e)."""

        def watch(self, job_ids: Sequence[str]) -> None:
            """The jobs :meth:`wait` will be asked for, one after another (`berth wait A B C`):
            a backend that polls asks of them all at once."""

        def wait(self, job_id: str, timeout: float) -> JobInfo | None:
            """The job once it has ended, or as it is after ``timeout`` seconds; None if the
            backend does not know it."""


class Unsupported(BerthError):
    """The backend cannot do what the job asks; the message says why and what to do."""

    exit_code = 2


class SubmitRefused(BerthError):
    """The backend (e.g. Slurm's controller) refused the job; the message gives its reason."""


class JobInfo:
    """One job as a backend reports it. ``state`` is berth's (Slurm's vocabulary: PENDING,
    RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, LOST); ``native``
    is the backend's own word for it (e.g. Slurm's OUT_OF_MEMORY)."""

    __slots__ = (
        "id", "name", "user", "state", "native", "reason", "exit_code", "gpus", "elapsed",
        "where", "stdout", "stderr", "submit_time", "array_job", "array_task", "array_limit",
        "extra",
    )  # fmt: skip

    def __init__(
        self,
        id: str,
        name: str,
        user: str,
        state: str,
        *,
        native: str | None = None,
        reason: str | None = None,
        exit_code: int | None = None,
        gpus: str = "",
        elapsed: float | None = None,
        where: str = "",
        stdout: str | None = None,
        stderr: str | None = None,
        submit_time: float | None = None,
        array_job: str | None = None,
        array_task: int | None = None,
        array_limit: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.user = user
        self.state = state
        self.native = native or state
        self.reason = reason  # why it is pending
        self.exit_code = exit_code
        self.gpus = gpus  # how many GPUs it asked: "2", "0.5" (on both backends)
        self.elapsed = elapsed
        self.where = where  # the node(s) or GPUs it runs on
        self.stdout = stdout
        self.stderr = stderr
        self.submit_time = submit_time
        self.array_job = array_job
        self.array_task = array_task
        self.array_limit = array_limit  # an array's %K: at most K tasks at once
        self.extra = extra or {}

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return f"JobInfo({self.id!r}, {self.state!r}, exit={self.exit_code!r})"


FINISHED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"})


# What a row of `queue --json` holds on a backend that is not the local daemon (Slurm), after
# the row's own keys: the backend's word for the state, the nodes, its logs, and ``extra``.
ROW_OWN = ("native", "where", "stdout", "stderr")


def as_row(info: JobInfo) -> dict[str, Any]:
    """The job as a row of `berth queue --json`, in the one row shape
    (:class:`~berth.wire.jobrow.JobRow`: the local daemon's keys, in its order), the backend's
    own fields after them (:data:`ROW_OWN`, then ``extra``: Slurm's ``raw_id``, ``nodes``,
    ``partition``). The id is the backend's (Slurm's ``1234`` or ``1234_5``: a string); what
    the backend does not say is None (``uid`` of a user this machine does not know, ``mem``)."""
    from berth.state_codes import CODES  # rare: --json on Slurm
    from berth.wire.jobrow import JobRow  # rare: --json on Slurm

    fields: dict[str, Any] = {
        "id": info.id, "name": info.name, "user": info.user, "uid": _uid(info.user),
        "project": None, "state": info.state, "st": CODES.get(info.state, info.state),
        "time": info.elapsed, "gpus": _count(info.gpus), "each": None, "mem": None,
        "nodelist": [], "reason": info.reason, "reason_detail": info.reason,
        "priority": None, "submit_time": info.submit_time, "exit_code": info.exit_code,
        "array_job": info.array_job, "array_task": info.array_task,
        "group_limit": info.array_limit, "pty": False, "dependency": None, "depends_on": [],
    }  # fmt: skip
    out = JobRow(**fields).to_dict()
    out.update((k, getattr(info, k)) for k in ROW_OWN)
    out.update((k, v) for k, v in info.extra.items() if k not in out)
    return out


def _uid(user: str) -> int | None:
    import pwd  # rare: --json on Slurm

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def _count(gpus: str) -> float | str:
    """``"2"`` -> 2, ``"0.5"`` -> 0.5 (the local row's number); a gres berth cannot read, as
    it is."""
    try:
        n = float(gpus)
    except ValueError:
        return gpus
    return int(n) if n.is_integer() else n


def exit_status(info: JobInfo | None) -> int:
    """What `berth wait` (and `logs -f`, `submit --wait`) exit with for a job that ended, on
    every backend: 0 if it COMPLETED (or the backend has forgotten it), its exit code (1..255)
    if it FAILED, else 1 (CANCELLED, TIMEOUT, LOST: whatever signal ended it)."""
    if info is None or info.state == "COMPLETED":
        return 0
    code = info.exit_code
    if info.state == "FAILED" and isinstance(code, int) and 0 < code < 256:
        return code
    return 1


def named(job: JobInfo, job_id: str) -> bool:
    """Whether ``job_id`` names the job: its id, its raw id, or its array's id."""
    return job_id in (job.id, job.extra.get("raw_id"), job.array_job)


def by_name(jobs: Iterable[JobInfo]) -> dict[str, list[JobInfo]]:
    """Each id that names some of ``jobs`` (:func:`named`: its id, raw id, array's id) ->
    those jobs: one walk of the jobs, then a look-up per id (not a walk per id)."""
    out: dict[str, list[JobInfo]] = {}
    for j in jobs:
        for key in {j.id, j.extra.get("raw_id"), j.array_job}:
            if key is not None:
                out.setdefault(str(key), []).append(j)
    return out


def cancel_listed(
    backend: Backend, user: str, states: Sequence[str], signal: int | None
) -> dict[str, str]:
    """`berth cancel --all-mine` where the backend has no request for it: ``user``'s
    unfinished jobs (in ``states``) listed once, then cancelled by id."""
    ids = list(dict.fromkeys(j.id for j in backend.list(user=user, states=states)
                             if not j.finished))  # fmt: skip
    return backend.cancel(ids, signal) if ids else {}


def aggregate(job_id: str, jobs: list[JobInfo]) -> JobInfo:
    """One job, or an array's tasks as one: finished when all are; COMPLETED if all did,
    else the first other outcome."""
    exact = [j for j in jobs if j.id == job_id or j.extra.get("raw_id") == job_id]
    if len(exact) == 1 and exact[0].array_job != job_id:
        return exact[0]
    tasks = [j for j in jobs if j.array_job == job_id] or jobs
    tasks = sorted(tasks, key=lambda t: -1 if t.array_task is None else t.array_task)
    first = tasks[0]
    code: int | None = None
    if not all(t.finished for t in tasks):
        st = "RUNNING" if any(t.state == "RUNNING" for t in tasks) else "PENDING"
    else:
        worst = next((t for t in tasks if t.state != "COMPLETED"), None)
        st, code = (worst.state, worst.exit_code) if worst else ("COMPLETED", 0)
    return JobInfo(job_id, first.name, first.user, st, exit_code=code, gpus=first.gpus,
                   extra={"tasks": [t.id for t in tasks]})  # fmt: skip


class Submitted:
    """What ``submit`` answers: the job's id, its log paths (patterns for an array: ``%a`` is
    each task's index), and the ids of an array's tasks."""

    __slots__ = ("id", "stderr", "stdout", "tasks", "warnings")

    def __init__(
        self,
        id: str,
        stdout: str | None,
        stderr: str | None,
        tasks: Sequence[str] = (),
        warnings: Sequence[str] = (),
    ) -> None:
        self.id = id
        self.stdout = stdout
        self.stderr = stderr
        self.tasks = list(tasks)
        self.warnings = list(warnings)  # what the backend said while accepting it

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}
