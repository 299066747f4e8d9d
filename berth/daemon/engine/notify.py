"""``--notify CMD`` and ``--mail-user ADDR``: tell the user a job has ended.

When a job's final state is durable (committed: a `berth wait` or `queue` would say the
same), the daemon hands a ``notify`` order to a supervisor of the job's owner (the pool's:
:meth:`berth.daemon.procs.pool.Pool.notify`), which runs it as that user, exactly as it runs an
attempt (own session, the job's working directory, environment and umask, output appended
to the job's error log, at most :data:`NOTIFY_SECONDS`, leftovers killed), then is free for
the next job. What the command does, or how it fails, never changes the job's record; a
notification lost to a daemon crash before the hand-over is not sent again.

- ``--notify CMD``: the user's shell command, run by ``/bin/sh -c`` (they asked for a shell),
  with the job's facts in its environment: ``BERTH_JOB_ID`` (``12_3`` for an array's task),
  ``BERTH_JOB_NAME``, ``BERTH_JOB_STATE`` (COMPLETED, FAILED, CANCELLED, TIMEOUT, LOST),
  ``BERTH_JOB_EXIT_CODE`` (empty if none), ``BERTH_JOB_REASON``, ``BERTH_JOB_USER``,
  ``BERTH_JOB_STDOUT``, ``BERTH_JOB_STDERR``, ``BERTH_JOB_GPUS`` (the last attempt's).
- ``--mail-user ADDR``: a mail through the local MTA (``sendmail -i -- ADDR``, the message on
  its input); ``berth submit`` refuses it where no ``sendmail`` exists. The shell text that
  pipes it is berth's own; the address and the message reach it only as variables.
"""

from __future__ import annotations

import logging
import os

from berth.wire.env import sendmail
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.ports import Processes
    from berth.daemon.store.store import Store
    from berth.wire.jobspec import JobSpec

log = logging.getLogger("berth.daemon")

NOTIFY_SECONDS = 60.0
MAIL_SCRIPT = 'printf "%s\\n" "$BERTH_MAIL_TEXT" | "$BERTH_SENDMAIL" -i -- "$BERTH_MAIL_USER"'


def facts(job: Job, spec: JobSpec) -> dict[str, str]:
    """The job's end as environment variables."""
    a = job.attempt
    array = spec.array_task
    return {
        "BERTH_JOB_ID": f"{array[0]}_{array[1]}" if array else str(job.id),
        "BERTH_JOB_NAME": job.name,
        "BERTH_JOB_USER": job.user,
        "BERTH_JOB_STATE": job.state.value,
        "BERTH_JOB_EXIT_CODE": "" if job.exit_code is None else str(job.exit_code),
        "BERTH_JOB_REASON": a.reason if a is not None else "",
        "BERTH_JOB_STDOUT": spec.stdout_path or "",
        "BERTH_JOB_STDERR": spec.stderr_path or "",
        "BERTH_JOB_GPUS": ",".join(str(g) for g in a.gpus) if a is not None else "",
    }


def _base(job: Job, spec: JobSpec) -> dict[str, Any]:
    """A notification's launch spec but its command: as the job's, the facts added."""
    env = dict(spec.env)
    env.update(facts(job, spec))
    return {
        "env": env,
        "cwd": spec.cwd,
        "stdout": spec.stderr_path or os.devnull,
        "stderr": spec.stderr_path or os.devnull,
        "time_limit": NOTIFY_SECONDS,
        "kill_after": 5.0,
        "pty": False,
        "umask": 0o077 if spec.umask is None else spec.umask,
    }


def runs(job: Job, spec: JobSpec, end: bool = True) -> list[dict[str, Any]]:
    """What the supervisor runs: one launch spec per notification (as an attempt's); at the
    job's ``end`` the mail only where ``--mail-type`` asks for it (a notice: always)."""
    base = _base(job, spec)
    env = base["env"]
    out = []
    if spec.notify:
        out.append({**base, "argv": ["/bin/sh", "-c", spec.notify], "command": "notify"})
    if spec.mail_user and (not end or mailed(spec.mail_type, job.state.value)):
        state = env["BERTH_JOB_STATE"]
        code = env["BERTH_JOB_EXIT_CODE"]
        subject = f"berth job {env['BERTH_JOB_ID']} ({job.name}) {state}"
        text = (
            f"Job {env['BERTH_JOB_ID']} ({job.name}) of {job.user} ended: {state}"
            + (f", exit code {code}" if code else "")
            + (f" ({env['BERTH_JOB_REASON']})" if env["BERTH_JOB_REASON"] else "")
            + f".\nOutput: {env['BERTH_JOB_STDOUT']}\n"
        )
        out += _mail(job, spec, base, subject, text)
    return out


def mailed(mail_type: str | None, state: str) -> bool:
    """Whether a job that ended ``state`` mails its ``--mail-user`` (``--mail-type``: END
    any end; FAIL one that did not complete; none given: END,FAIL)."""
    types = (mail_type or "END,FAIL").split(",")
    return "END" in types or ("FAIL" in types and state != "COMPLETED")


def _mail(
    job: Job, spec: JobSpec, base: dict[str, Any], subject: str, text: str
) -> list[dict[str, Any]]:
    """The run that mails ``spec.mail_user`` (none where this host has no sendmail)."""
    env = base["env"]
    exe = sendmail(env.get("PATH", ""))
    if exe is None or not spec.mail_user:
        log.warning("job %d: no sendmail to mail %s", job.id, spec.mail_user)
        return []
    subject = "".join(c if c.isprintable() else "?" for c in subject)  # (one header line)
    mail_env = {**env, "BERTH_MAIL_TEXT": f"Subject: {subject}\n\n{text}", "BERTH_SENDMAIL": exe,
                "BERTH_MAIL_USER": spec.mail_user}  # fmt: skip
    return [{**base, "env": mail_env, "argv": ["/bin/sh", "-c", MAIL_SCRIPT], "command": "mail"}]


def mail(store: Store, pool: Processes, job: Job, event: str) -> None:
    """``--mail-type BEGIN`` / ``REQUEUE``: mail the job's ``--mail-user`` that it began (or
    was requeued), once that is durable, as its end's mail is sent (``event``: job_begin or
    job_requeue)."""
    try:
        spec = store.spec(job.id)
        if not spec.mail_user or not spec.mail_type:
            return
        word = "BEGIN" if event == "job_begin" else "REQUEUE"
        if word not in spec.mail_type.split(","):
            return
        base = _base(job, spec)
        env = base["env"]
        did = "began" if word == "BEGIN" else "was requeued"
        gpus = f" on GPU(s) {env['BERTH_JOB_GPUS']}" if word == "BEGIN" else ""
        why = env["BERTH_JOB_REASON"] if word == "REQUEUE" else ""
        subject = f"berth job {env['BERTH_JOB_ID']} ({job.name}) {did}"
        text = f"Job {env['BERTH_JOB_ID']} ({job.name}) of {job.user} {did}{gpus}"
        text += (f" ({why})" if why else "") + ".\n"
        orders = _mail(job, spec, base, subject, text)
        if orders:
            pool.notify((job.uid, job.gid, job.user), {"job": job.id, "runs": orders})
    except (OSError, ValueError, TypeError, ProtocolError) as e:  # (a spec it cannot read)
        log.error("job %d: cannot hand over its mail: %s", job.id, e)


def send(store: Store, pool: Processes, job: Job) -> None:
    """The job's end is durable: hand its notifications to a supervisor of its owner."""
    try:
        spec = store.spec(job.id)
        orders = runs(job, spec)
        if orders:
            pool.notify((job.uid, job.gid, job.user), {"job": job.id, "runs": orders})
    except (OSError, ValueError, TypeError, ProtocolError) as e:  # (a spec it cannot read)
        log.error("job %d: cannot hand over its notification: %s", job.id, e)


def warn(store: Store, pool: Processes, job: Job, text: str) -> None:
    """Tell a running job's owner something through its ``--notify``/``--mail-user``
    (enforcement, issue 25: its GPU taken by another, the job idle): the same runs as at its
    end, with ``BERTH_JOB_STATE`` its state now and ``BERTH_ENFORCE`` the message, which is
    also the mail's subject and text."""
    try:
        orders = runs(job, store.spec(job.id), end=False)
    except (OSError, ValueError, TypeError, ProtocolError) as e:
        log.error("job %d: cannot hand over its notification: %s", job.id, e)
        return
    for order in orders:
        order["env"] = {**order["env"], "BERTH_ENFORCE": text}
        if order["command"] == "mail":
            subject = f"berth job {job.id} ({job.name}): {text.splitlines()[0]}"
            order["env"]["BERTH_MAIL_TEXT"] = f"Subject: {subject}\n\n{text}\n"
    if orders:
        pool.notify((job.uid, job.gid, job.user), {"job": job.id, "runs": orders})
