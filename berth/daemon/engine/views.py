"""Jobs as the client sees them: JSON rows for `berth queue` and `berth show`."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from berth.core.runtimes import unnamed
from berth.core.states import CODES, State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from berth.core.job import Job
    from berth.wire.jobspec import JobSpec


def row(job: Job, reason: str | None) -> dict[str, Any]:
    """One line of `berth queue`: a :class:`~berth.wire.jobrow.JobRow`'s fields (its
    ``FIELDS``, in order; built as a plain dict: one per job of a long queue)."""
    a = job.attempts[-1] if job.attempts else None
    now = time.time()
    elapsed = None
    if a is not None and job.state is not State.PENDING:
        elapsed = (a.end or now) - a.start
    if job.state is State.PENDING and job.held:
        reason = "Held"
    short = reason.split(":", 1)[0] if reason else None
    array = job.extra.get("array")
    out: dict[str, Any] = {
        "id": job.id,
        "name": job.name,
        "user": job.user,
        "uid": job.uid,
        "project": job.project or None,
        "state": job.state.value,
        "st": CODES[job.state],
        "time": elapsed,
        "gpus": job.request.gpus,
        "each": job.request.each if job.request.each != 1 else None,  # (a share of each GPU)
        "mem": job.request.mem,
        "nodelist": list(a.gpus) if a is not None and job.state is not State.PENDING else [],
        "reason": short if job.state is State.PENDING else None,
        "reason_detail": reason if job.state is State.PENDING else None,
        "priority": job.priority,
        "submit_time": job.submit_time,
        "exit_code": job.exit_code,
        "array_job": array[0] if array else None,
        "array_task": array[1] if array else None,
        "group_limit": job.group_limit or None,
        "pty": bool(job.extra.get("pty")),
        "dependency": dependency(job),
        "depends_on": sorted({d.job_id for d in job.dependencies if d.job_id}),
    }
    if "retry_of" in job.extra:  # (--retry-oom's retry: rare, so only then)
        out["retry_of"] = job.extra["retry_of"]
    return out


def dependency(job: Job) -> str | None:
    """The job's dependency as written (``afterok:12:13``, ``@`` made the id), or None; a
    job of an earlier daemon: its terms, ``,``-joined."""
    text = job.extra.get("dependency")
    if text is None and job.dependencies:
        text = ",".join(str(d) for d in job.dependencies)
    return None if text is None else str(text)


def detail(
    job: Job, reason: str | None, spec: JobSpec, max_job_time: float | None = None
) -> dict[str, Any]:
    """Everything of one job, for `berth show`; ``time_limit`` is what the job asked for,
    ``limit_in_force`` what stops it (the smaller of that and the daemon's ``max_job_time``)."""
    out = job.to_dict()
    limits = [t for t in (job.time_limit, max_job_time) if t]
    out["max_job_time"] = max_job_time
    out["limit_in_force"] = min(limits) if limits else None
    out.pop("extra", None)
    out["dependency"] = dependency(job)
    out["reason"] = reason if job.state is State.PENDING else None
    out["st"] = CODES[job.state]
    out["exit_code"] = job.exit_code
    out["command"] = spec.wrap or (list(spec.argv) if spec.argv else None)
    out["cwd"] = spec.cwd
    out["stdout"] = spec.stdout_path
    out["stderr"] = spec.stderr_path
    out["env_setup"] = spec.env_setup
    out["conda"] = spec.conda
    out["pty"] = spec.pty
    array = spec.array_task
    out["array_job"], out["array_task"] = (array[0], array[1]) if array else (None, None)
    out["array_spec"] = job.extra.get("array_spec")
    out["request_source"] = spec.request_source  # where -g/--mem came from
    out["by_memory"] = spec.by_memory  # --mem without -g: shares sized by memory
    out["inject_arg"] = spec.inject_arg
    out["notify"] = spec.notify
    out["mail_user"] = spec.mail_user
    out["mail_type"] = spec.mail_type  # --mail-type (None: END,FAIL)
    out["resubmitted_from"] = job.extra.get("resubmitted_from")  # (`berth resubmit`)
    out["learned"] = job.extra.get("learned")  # (no -g, no --mem: admission/learned.py)
    out["peak_mem"] = job.extra.get("peak_mem")  # (the most GPU memory it used, by NVML)
    out["retry_oom"] = bool(job.extra.get("retry_oom"))
    out["retry_of"] = job.extra.get("retry_of")  # (--retry-oom: admission/oom_retry.py)
    out["retry_why"] = job.extra.get("retry_why")
    out["oom_retried"] = job.extra.get("oom_retried")
    return out


PRIVATE = "(private)"
_PRIVATE_FIELDS = (
    "command", "cwd", "stdout", "stderr", "env_setup", "conda", "notify", "mail_user",
    "request_source", "learned",
)  # fmt: skip


def redact(job: dict[str, Any]) -> dict[str, Any]:
    """A job's detail (or model) as others see it under ``--private``: no command, directory,
    log paths or setup, and no free-text reasons (they may name paths); states, times, GPUs
    and the request stay."""
    out = dict(job)
    for key in _PRIVATE_FIELDS:
        if out.get(key) is not None:
            out[key] = PRIVATE
    if "attach" in out:
        out["attach"] = None
    if out.get("start_estimate"):  # (what a learned run time rests on names a script)
        out["start_estimate"] = unnamed(out["start_estimate"])
    out["attempts"] = [
        {**a, "reason": PRIVATE if a.get("reason") else a.get("reason")}
        for a in out.get("attempts") or ()
    ]
    out["history"] = [
        {**e, "detail": PRIVATE if e.get("detail") else e.get("detail")}
        for e in out.get("history") or ()
    ]
    return out


_JOB = re.compile(r"\bjob (\d+)\b")


class TaskIds(Mapping[int, str]):
    """Array tasks' ids as the CLI writes them (``12_3``), by their internal job id, looked
    up in ``jobs`` (the unfinished ones) as asked: a reason names a job or two, and a queue
    of 100,000 jobs is not walked to find them."""

    def __init__(self, jobs: Mapping[int, Job]) -> None:
        self._jobs = jobs

    def __getitem__(self, job_id: int) -> str:
        job = self._jobs.get(job_id)
        array = None if job is None else job.extra.get("array")
        if not array:
            raise KeyError(job_id)
        return f"{array[0]}_{array[1]}"

    def get(self, job_id: int, default: Any = None) -> Any:
        job = self._jobs.get(job_id)
        array = None if job is None else job.extra.get("array")
        return f"{array[0]}_{array[1]}" if array else default

    def __iter__(self) -> Iterator[int]:
        return (i for i, j in self._jobs.items() if j.extra.get("array"))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def with_task_ids(text: str | None, ids: Mapping[int, str]) -> str | None:
    """``text`` (a pending reason the scheduler wrote: "held by job 18") naming array tasks
    as the CLI does ("held by job 17_1")."""
    if not text or "job " not in text:
        return text
    return _JOB.sub(lambda m: f"job {ids.get(int(m[1]), m[1])}", text)
