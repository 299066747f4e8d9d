"""The local berth daemon behind the backend interface (:mod:`berth.backends.base`): each
method is one request through :mod:`berth.client`.

Arrays are the daemon's own (:mod:`berth.daemon.requests.arrays`), from the same :class:`ArraySpec`:
``submit(job, array=...)`` queues all tasks at once; a task's id is ``12_3`` as on Slurm.
"""

from __future__ import annotations

from berth.backends.base import JobInfo, Submitted
from berth.client import Client, DaemonError
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.backends.base import ArraySpec
    from berth.wire.jobspec import JobSpec


def _int(job_id: str) -> int | str:
    """A job id for the daemon: a number, or ``"12_3"`` (an array's task)."""
    head, us, task = job_id.partition("_")
    if head.isdigit() and (not us or task.isdigit()):
        return job_id if us else int(job_id)
    raise UsageError(f"invalid job id {job_id!r}: expected 12, or 12_3 for an array's task")


def info(row: dict[str, Any]) -> JobInfo:
    """A row of the daemon's `queue` / `wait` answer as a JobInfo."""
    gpus = row.get("gpus")
    nodelist = row.get("nodelist") or []
    array, task = row.get("array_job"), row.get("array_task")
    return JobInfo(
        f"{array}_{task}" if array is not None else str(row["id"]),
        str(row.get("name")), str(row.get("user")), str(row["state"]),
        reason=row.get("reason"), exit_code=row.get("exit_code"),
        gpus=f"{gpus:g}" if isinstance(gpus, (int, float)) else str(gpus or ""),
        elapsed=row.get("time"),
        where="gpu:" + ",".join(str(g) for g in nodelist) if nodelist else "",
        submit_time=row.get("submit_time"),
        array_job=None if array is None else str(array),
        array_task=task, extra={"raw_id": str(row["id"])},
    )  # fmt: skip


class Local:
    name = "local"

    def __init__(self, socket: str | None = None) -> None:
        self.socket = socket

    def _call(self, kind: str, **fields: Any) -> dict[str, Any]:
        with Client(self.socket) as c:
            return c.call(kind, **fields)

    def submit(self, job: JobSpec, array: ArraySpec | None = None) -> Submitted:
        if array is not None:
            job = job.replace(array=array.text)  # (a parsed ArraySpec's normalised text)
        reply = self._call("submit", job=job.to_dict())
        return Submitted(
            str(reply["job_id"]), reply.get("stdout"), reply.get("stderr"), reply.get("tasks", ())
        )

    def cancel(self, ids: Sequence[str], signal: int | None = None) -> dict[str, str]:
        known = self.status(ids)  # the daemon refuses a request naming an unknown job
        out: dict[str, str] = {}
        live: list[int | str] = []
        for i in ids:
            job = known.get(str(_int(i)))
            if job is None:
                out[i] = "no such job"
            elif job.finished:
                out[i] = f"already {job.state}"
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

    def status(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        """By the ids asked: ``12`` (a job, or the first task of array 12) or ``12_3``."""
        wanted = {str(_int(i)) for i in ids}
        out = {}
        for r in self._call("queue", all=True)["jobs"]:
            task = f"{r['array_job']}_{r['array_task']}" if r.get("array_job") else None
            for key in (str(r["id"]), task):
                if key in wanted:
                    out[key] = info(r)
        return out

    def list(self, *, user: str | None = None, finished: bool = False) -> list[JobInfo]:
        fields: dict[str, Any] = {"all": finished}
        if user is not None:
            import pwd  # rare: --user

            try:
                fields["uid"] = int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid
            except KeyError:
                raise UsageError(f"no user {user!r} on this machine") from None
        return [info(r) for r in self._call("queue", **fields)["jobs"]]

    def logs(self, job_id: str) -> tuple[str, str]:
        job = self._call("show", job_id=_int(job_id))["job"]
        return str(job["stdout"]), str(job["stderr"])

    def wait(self, job_id: str, timeout: float) -> JobInfo | None:
        with Client(self.socket, timeout=timeout + 30) as c:
            try:
                reply = c.call("wait", job_id=_int(job_id), timeout=timeout)
            except DaemonError as e:
                if e.code == "NO_SUCH_JOB":
                    return None
                raise
        return info(reply["job"])
