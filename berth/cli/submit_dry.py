"""``--dry-run`` on the local queue (`berth submit`, ``--file``, `berth sweep`): every check a
real submit runs, and what it would queue; nothing is queued.

The client's checks run first (the job's fields, the jobs file's lines: as for a real submit);
then the daemon runs its own over the socket (``submit``/``submit_all`` with ``dry_run``:
:mod:`berth.daemon.engine.admission.dryrun`): this machine's GPUs, the daemon's and the user's limits,
dependencies, ``--unique``, the project, the log directory. Its refusal is the real submit's,
with the same message and exit status. Without a daemon the dry run says that its checks
could not be run and exits as a real submit would (5, daemon unreachable): a "yes" that the
real submit would not honour is worse than no answer.

What it shows: the id the job would get (the next one, unless another job is submitted
first), its GPUs (and what they were sized from: earlier runs of the same job), what
``--retry-oom`` would do, its time limit, project, the reason it would wait with where that is known before
a pass, and its log files; ``--json``: the daemon's answer as it is. Never the environment
(the daemon does not send it back): how many variables the job would export, instead.
"""

from __future__ import annotations

import shlex
import sys

from berth.cli.escape import shown
from berth.client import Client
from berth.errors import DaemonUnreachable
from berth.units import format_duration, format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NOT_RUN = (
    "dry run: berth's own checks passed, but the daemon's were not run (no daemon to ask), so "
    "nothing says it would queue this: start the daemon and try again"
)


def ask(kind: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
    """The daemon's dry-run answer to a ``kind`` request (``submit``, ``submit_all``)."""
    try:
        with Client(timeout=timeout) as c:
            reply: dict[str, Any] = c.call(kind, dry_run=True, **fields)
    except DaemonUnreachable as e:
        raise DaemonUnreachable(f"{e}\n{NOT_RUN}") from None
    return reply  # (a daemon before dry runs refuses the field: nothing queued)


def said(reply: dict[str, Any], line: int | None = None, cmd: str | None = None) -> str:
    """One dry-run answer in words (``line``: the jobs file's line it came from; ``cmd``: what
    to call its command, if not its words)."""
    where = f"line {line}: " if line is not None else ""
    if reply.get("duplicate"):
        same = reply.get("job_id", reply.get("would_be"))
        state = reply["state"]
        return f"{where}job {same} is the same job ({state}): not queued again (--unique)\n"
    job = reply["job"]
    if cmd is None:
        argv = job.get("argv")
        cmd = shlex.join(argv) if argv else f"--wrap {shlex.quote(job['wrap'])}"
    n = reply["would_be"]
    tasks = reply.get("tasks")
    what = f"an array of {len(tasks)} tasks ({tasks[0]}..{tasks[-1]})" if tasks else f"job {n}"
    out = [f"{where}would queue {what}: {cmd}"]
    out.append(f"  GPUs: {_gpus(reply)}")
    if reply.get("learned"):
        out.append(f"  {shown(reply['learned']['said'])}")
    if job.get("retry_oom"):
        out.append(f"  if it dies of CUDA out of memory: {_retry_said(reply)} (--retry-oom)")
    limit = reply.get("limit_in_force")
    src = "-t" if reply.get("limit_from") == "job" else "the daemon's --max-job-time"
    out.append(f"  time limit {format_duration(limit)} ({src})" if limit else "  no time limit")
    if job.get("project"):
        out.append(f"  project {job['project']}")
    if job.get("dependency"):
        out.append(f"  dependency {job['dependency']}")
    if reply.get("reason"):
        out.append(f"  would wait first: {reply['reason']}")
    err = reply["stderr"]
    out.append(
        f"  output {reply['stdout']}" + (f", errors {err}" if err != reply["stdout"] else "")
    )
    out.append(f"  environment: {reply['env_vars']} variables exported (not shown)")
    return "\n".join(out) + "\n"


def _retry_said(reply: dict[str, Any]) -> str:
    """What --retry-oom would queue (the daemon's rule: admission/oom_retry.py)."""
    job = reply["job"]
    if float(reply["gpus"]) < 1 or job.get("by_memory"):
        return "queued once more, with whole GPUs"
    if job.get("mem") is not None:
        return "queued once more, on the GPUs of the most memory here (if it has more)"
    return "not queued again: it has whole GPUs, nothing more to give"


def _gpus(reply: dict[str, Any]) -> str:
    job = reply["job"]
    amount = float(reply["gpus"])
    text = f"{amount:g}" if amount >= 1 else f"{amount:g} of one"
    if job.get("mem") is not None:
        each = " of each" if job.get("by_memory") else ""
        text += f", {format_size(job['mem'])} of memory{each}"
    if job.get("gpu_ids") is not None:
        text += f", out of {','.join(str(i) for i in job['gpu_ids'])}"
    return text


def lines(as_json: bool, spool: Any, failed: Any) -> None:
    """``--file --dry-run``: the jobs file's checked jobs (a :class:`submit_bulk.Spool`) sent
    to the daemon's dry run; each one's answer with its line (``failed``: as for a real
    submit)."""
    from berth.cli import submit_bulk  # rare: --file

    count = 0
    try:
        with Client(timeout=600.0) as c:  # (a request of 10,000 jobs may take a while)
            for k, reply in enumerate(submit_bulk.send(c, spool, failed, dry=True)):
                count += 1
                if as_json:
                    import json  # rare: --json

                    sys.stdout.write(json.dumps({**reply, "line": spool.lines[k]}) + "\n")
                else:
                    sys.stdout.write(said(reply, spool.lines[k]))
    except DaemonUnreachable as e:
        raise DaemonUnreachable(f"{e}\n{NOT_RUN}") from None
    if not as_json:
        sys.stdout.write(footer(count))


def footer(count: int) -> str:
    """The last line of a dry run's words."""
    jobs = "1 job" if count == 1 else f"{count} jobs"
    return (
        f"dry run: {jobs} checked by berth and the daemon; nothing was queued (the id is the "
        "next one now, unless another job is submitted first)\n"
    )


def show(reply: dict[str, Any], as_json: bool) -> None:
    """One job's dry run on stdout."""
    if as_json:
        import json  # rare: --json (json imports `re`: not on the common path)

        sys.stdout.write(json.dumps(reply) + "\n")
        return
    sys.stdout.write(said(reply) + footer(1))
