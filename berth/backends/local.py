"""The local berth daemon behind the backend interface (:mod:`berth.backends.base`): each
method is one request through :mod:`berth.client`, on one connection kept for the backend's
life (``berth logs -f`` asks every tenth of a second whether the job has ended). An answer due
at once is given up after the client's patience (:mod:`berth.client_wait`); a ``wait`` is
given the time it asks the daemon to wait on top of it.

Arrays are the daemon's own (:mod:`berth.daemon.engine.admission.arrays`), from the same :class:`ArraySpec`:
``submit(job, array=...)`` queues all tasks at once; a task's id is ``12_3`` as on Slurm.
What only the local daemon says (which daemon answered, each user's usage) is kept from the
last ``list`` in :attr:`Local.about`, for `berth queue`'s header and users' block.
"""

from __future__ import annotations

from berth.backends.base import JobInfo, Submitted, aggregate, by_name
from berth.client import Client, DaemonError
from berth.errors import UsageError
from berth.wire import cjson
from berth.wire.jobrow import JobRow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

    from berth.backends.base import ArraySpec
    from berth.wire.jobspec import JobSpec

LONGEST_WAIT = 3600.0  # the most one `wait` request asks the daemon for
_ROWS = b'{"ok":true,"jobs":['  # a streamed `queue` answer's frame of rows, as it starts
_END = b'{"ok":true,"end":true'  # ... its last frame


def _object(raw: bytes) -> dict[str, Any]:
    msg = cjson.loads(raw)
    assert isinstance(msg, dict)
    return msg


def _dump(value: Any) -> bytes:
    """``value`` encoded as the daemon encodes its answers (berth.wire.protocol.encode)."""
    return cjson.dumps(value).encode()


def _int(job_id: str) -> int | str:
    """A job id for the daemon: a number, or ``"12_3"`` (an array's task)."""
    head, us, task = job_id.partition("_")
    if head.isdigit() and (not us or task.isdigit()):
        return job_id if us else int(job_id)
    raise UsageError(f"invalid job id {job_id!r}: expected 12, or 12_3 for an array's task")


def info(raw: dict[str, Any]) -> JobInfo:
    """A row of the daemon's `queue` / `wait` answer (:class:`~berth.wire.jobrow.JobRow`) as a
    JobInfo."""
    row = JobRow.from_dict(raw)
    gpus, each = row.gpus, row.each
    nodelist = row.nodelist or []
    shown: Any = gpus
    if isinstance(gpus, (int, float)) and isinstance(each, (int, float)):
        shown = f"{gpus:g}x{each:g}"  # (a share of each of several GPUs: 2x0.098)
    array, task = row.array_job, row.array_task
    return JobInfo(
        f"{array}_{task}" if array is not None else str(row.id),
        str(row.name), str(row.user), str(row.state),
        reason=row.reason, exit_code=row.exit_code,
        gpus=f"{shown:g}" if isinstance(shown, (int, float)) else str(shown or ""),
        elapsed=row.time,
        where="gpu:" + ",".join(str(g) for g in nodelist) if nodelist else "",
        submit_time=row.submit_time,
        array_job=None if array is None else str(array),
        array_task=task, array_limit=row.group_limit if array is not None else None,
        extra={"raw_id": str(row.id), "pty": bool(row.pty),
               **{k: v for k in _EXTRA_FIELDS if (v := getattr(row, k)) is not None}},
    )  # fmt: skip


# What puts a pending job where it is in line (the daemon's queue rows, issue 27.3).
_ORDER_FIELDS = ("order", "priority", "share_factor", "queued_at", "project")
_EXTRA_FIELDS = (*_ORDER_FIELDS, "dependency", "depends_on", "array_tasks",  # (--tree, fold)
                 "retry_of")  # (--retry-oom)  # fmt: skip


def _queue_fields(user: str | None, finished: bool, states: Sequence[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {"all": finished}
    if user is not None:
        import pwd  # rare: --user

        try:
            fields["uid"] = int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid
        except KeyError:
            raise UsageError(f"no user {user!r} on this machine") from None
    if states:
        fields["states"] = list(states)
    return fields


def _names(j: JobInfo) -> tuple[str | None, ...]:
    """What names a job (:func:`berth.backends.base.named`)."""
    return (j.id, j.extra.get("raw_id"), j.array_job)


class Local:
    name = "local"

    def __init__(self, socket: str | None = None) -> None:
        self.socket = socket
        self.about: dict[str, Any] = {}  # the last `queue` answer but its jobs
        self._client: Client | None = None

    def _conn(self) -> Client:
        if self._client is None:
            self._client = Client(self.socket)  # (answers due at once: its patience)
        return self._client

    def _call(self, kind: str, **fields: Any) -> dict[str, Any]:
        return self._conn().call(kind, **fields)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def submit(self, job: JobSpec, array: ArraySpec | None = None) -> Submitted:
        if array is not None:
            job = job.replace(array=array.text)  # (a parsed ArraySpec's normalised text)
        reply = self._call("submit", job=job.to_dict())
        return Submitted(
            str(reply["job_id"]), reply.get("stdout"), reply.get("stderr"), reply.get("tasks", ())
        )

    def cancel(self, ids: Sequence[str], signal: int | None = None) -> dict[str, str]:
        rows = by_name(self._rows(ids))  # every id checked before anything is cancelled
        out: dict[str, str] = {}
        live: list[int | str] = []
        for i in ids:
            mine = rows.get(i, [])
            if not mine:
                raise UsageError(f"no job {i}: see `berth queue --all`")
            if all(j.finished for j in mine):
                out[i] = f"already {aggregate(i, mine).state}"
            else:
                live.append(_int(i))
        if live:
            fields: dict[str, Any] = {"job_ids": live}
            if signal is not None:
                fields["signal"] = signal
            try:
                done = self._call("cancel", **fields)["cancelled"]
            except DaemonError as e:  # it ended meanwhile
                if e.code != "INVALID_STATE":
                    raise
                done = {str(live[0]): str(e)}
            out.update({str(k): str(v) for k, v in done.items()})
        return out

    def cancel_mine(self, states: Sequence[str], signal: int | None = None) -> dict[str, str]:
        """One request: the daemon cancels every unfinished job of the caller (its socket's
        uid) in ``states``, and says what happened to each."""
        fields: dict[str, Any] = {"all_mine": True}
        if states:
            fields["states"] = list(states)
        if signal is not None:
            fields["signal"] = signal
        done = self._call("cancel", **fields)["cancelled"]
        return {str(k): str(v) for k, v in done.items()}

    def _rows(self, ids: Sequence[str]) -> list[JobInfo]:
        """Every job the ids name (an array's id: all its tasks), finished ones too."""
        wanted = {str(_int(i)) for i in ids}
        rows = [info(r) for r in self._call("queue", all=True)["jobs"]]
        return [j for j in rows if not wanted.isdisjoint(_names(j))]

    def status(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        """By the ids asked: ``12`` (a job, or every task of array 12) or ``12_3``."""
        wanted = {str(_int(i)) for i in ids}
        out = {}
        for j in self._rows(ids):
            raw = j.extra["raw_id"]
            key = raw if raw in wanted and raw != j.array_job else j.id
            out[key] = j
        return out

    def lines(
        self, *, user: str | None = None, finished: bool = False, states: Sequence[str] = (),
        limit: int | None = None, project: str | None = None, fold: bool = False,
    ) -> list[JobInfo]:  # fmt: skip
        """`berth queue`'s lines (:mod:`berth.daemon.requests.queueview`): the first
        ``limit`` (None: all), only ``project``'s jobs, an array's pending tasks as one line
        (``fold``: its row's ``extra["array_tasks"]``); the answer's other fields, and
        ``left`` (by state, the jobs no line shows), go to :attr:`about`."""
        fields = {**_queue_fields(user, finished, states), "limit": limit, "fold": fold}
        if project is not None:
            fields["project"] = project
        frames = self._frames(fields)
        self.about = _object(next(frames))
        rows: list[JobInfo] = []
        for raw in frames:
            msg = _object(raw)
            if msg.get("end"):
                self.about.update(dependency_states=msg.get("dependency_states") or {},
                                  left=msg.get("left") or {})  # fmt: skip
            else:
                rows += [info(r) for r in msg.get("jobs") or ()]
        return rows

    def _frames(self, fields: dict[str, Any]) -> Iterator[bytes]:
        """A streamed `queue` answer's frames as they come: its head, its rows' frames
        (``{"ok":true,"jobs":[...]}``), its end."""
        c = self._conn()
        c.send("queue", stream=True, **fields)
        while True:
            raw = c.receive_raw()
            yield raw
            if raw.startswith(_END):
                return

    def queue_json(
        self, *, user: str | None = None, finished: bool = False, states: Sequence[str] = (),
        project: str | None = None,
    ) -> Iterator[bytes]:  # fmt: skip
        """`berth queue --json`: ``{"daemon": {...}, "jobs": [...], "dependency_states":
        {...}, "users": [...], "projects": [...], "fairshare": {...}, "reservations": [...],
        "estimates": {...}}`` (how good the last week's start estimates were),
        the document one unstreamed answer gives (without its ``"ok":true``), in pieces as
        the daemon's frames come: each frame's rows are passed on as the daemon encoded them,
        not decoded and encoded again, and no more than a frame is held."""
        fields = _queue_fields(user, finished, states)
        if project is not None:
            fields["project"] = project
        frames = self._frames(fields)
        head = _object(next(frames))
        yield b'{"daemon":' + _dump(head.get("daemon")) + b',"jobs":['
        sep = b""
        end: dict[str, Any] = {}
        for raw in frames:
            if raw.startswith(_ROWS) and raw.endswith(b"]}"):
                body = raw[len(_ROWS) : -2]
            elif raw.startswith(_END):
                end = _object(raw)
                continue
            else:  # some other layout: decode it after all
                body = b",".join(_dump(r) for r in _object(raw).get("jobs") or ())
            if body:
                yield sep + body
                sep = b","
        tail = {"dependency_states": end.get("dependency_states") or {},
                **{k: head.get(k) for k in ("users", "projects", "fairshare", "reservations",
                                            "estimates")}}  # fmt: skip
        yield b"]," + _dump(tail)[1:]

    def list(
        self, *, user: str | None = None, finished: bool = False, states: Sequence[str] = ()
    ) -> list[JobInfo]:
        return self.lines(user=user, finished=finished, states=states)

    def show(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._call("show", job_id=_int(job_id))["job"]
        return job

    def logs(self, job_id: str) -> tuple[str, str]:
        job = self._call("logs", job_id=_int(job_id))["job"]  # its owner's or an admin's
        return str(job["stdout"]), str(job["stderr"])

    def watch(self, job_ids: Sequence[str]) -> None:
        """(The daemon answers each `wait` when its job ends: nothing to ask ahead.)"""

    def wait(self, job_id: str, timeout: float) -> JobInfo | None:
        left = timeout
        while True:
            step = min(max(left, 0.0), LONGEST_WAIT)
            c = self._conn()
            usual = c.timeout
            c.settimeout(None if usual is None else step + usual)  # (answered by then)
            try:
                reply = c.call("wait", job_id=_int(job_id), timeout=step)
            except DaemonError as e:
                if e.code == "NO_SUCH_JOB":
                    return None
                raise
            finally:
                c.settimeout(usual)
            left -= step
            if reply["finished"] or left <= 0:
                return info(reply["job"])
