"""A job's :class:`~berth.wire.jobspec.JobSpec` from `berth submit`'s options (shared by
`berth sweep`, `berth watch`, jobs files' lines and the Slurm backend): what only the command
line can check (an option's syntax, a directory, a conda environment) is checked here; the
rest by :meth:`JobSpec.from_dict`, as the daemon checks it, so bad input is refused before
anything is sent, with the daemon's message."""

from __future__ import annotations

import os

from berth import config
from berth.cli.command import words
from berth.cli.submit_options import time_limit
from berth.errors import UsageError
from berth.units import parse_begin, parse_gpu_indices, parse_size
from berth.wire.env import export_env, sendmail
from berth.wire.jobsize import check_job_bytes, job_bytes
from berth.wire.jobspec import JobSpec, check_field
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def job_spec(
    args: argparse.Namespace, environ: dict[str, str] | None = None, **more: Any
) -> JobSpec:
    """The job to send, checked as the daemon will check it (:meth:`JobSpec.from_dict`, the
    one validator of a job): bad input is refused here, before anything is sent, with the
    daemon's message (as a usage error). ``environ``: the environment to export from (this
    process's, read once for a jobs file's lines); ``more``: fields the command adds
    (``array``, a sweep's ``array_argvs``). A job past ``[limits] max_job_bytes`` is refused
    here too, before it is sent (:mod:`berth.wire.jobsize`)."""
    raw = _fields(args, dict(os.environ) if environ is None else environ)
    raw.update(more)
    try:
        spec = JobSpec.from_dict(raw)
        check_job_bytes(job_bytes(spec), config.get().limit_max_job_bytes)  # (issue 41.4)
    except ProtocolError as e:
        raise UsageError(e.message) from None
    return spec


def _fields(args: argparse.Namespace, environ: dict[str, str]) -> dict[str, Any]:
    """The job's fields from submit's options; what only the command line can check (an
    option's syntax, a directory, a conda environment) is checked here."""
    command = words(args.argv, args.wrap, prog="berth submit")
    gpu_ids = None if args.gpu_ids is None else parse_gpu_indices(args.gpu_ids, what="--gpu-ids")
    choice = _requirement(args, command)
    text = args.gpus
    if text is None:  # (a the GPU Job Scheduler line: one GPU of its allowed_gpus, not all of them)
        text = getattr(args, "default_gpus", None) or str(len(gpu_ids) if gpu_ids else 1)
    if choice is not None:
        text = f"{choice.gpus:g}"
    try:  # (the job spec's check and refusal, as the daemon words it, whatever -g was)
        gpus = float(check_field("gpus", gpu_number(text)))
    except ProtocolError as e:
        raise UsageError(e.message) from None
    if gpu_ids and gpus > len(gpu_ids):
        raise UsageError(
            f"-g {text} --gpu-ids {args.gpu_ids}: asks for more GPUs than --gpu-ids names "
            f"({len(gpu_ids)}); leave out -g to take all of them"
            + (f" (-g {text} from {choice.source})" if choice is not None else "")
        )
    by_memory = (  # mgpu_srun's --mem alone: a share of each GPU, sized by the daemon
        args.mem is not None and args.gpus is None and choice is None
        and not getattr(args, "default_gpus", None)
    )  # fmt: skip
    job: dict[str, Any] = {
        "gpus": int(gpus) if gpus.is_integer() else gpus,
        **({"by_memory": True} if by_memory else {}),
        "env": export_env(args.export, environ),
        "cwd": os.path.abspath(args.chdir or os.getcwd()),
        "priority": args.priority,
    }
    if command:
        job["argv"] = command
    else:
        job["wrap"] = args.wrap
    if args.mem:
        job["mem"] = parse_size(args.mem, what="--mem")
    if choice is not None:
        job["request_source"] = choice.source
        if choice.mem is not None and not args.mem:
            job["mem"] = choice.mem
    limit = time_limit(args)
    if limit is not None:
        job["time_limit"] = limit
    if args.chdir and not os.path.isdir(job["cwd"]):
        raise UsageError(f"-D/--chdir {args.chdir!r} is not a directory")
    for key, value in (
        ("name", args.job_name), ("stdout", args.output), ("stderr", args.error),
        ("env_setup", args.env_setup), ("conda", args.conda), ("name_filter", args.gpu_name),
        ("project", getattr(args, "project", None)),
    ):  # fmt: skip
        if value:
            job[key] = value
    if gpu_ids is not None:
        job["gpu_ids"] = gpu_ids
    if args.prefer:
        job["prefer"] = parse_gpu_indices(args.prefer, what="--prefer")
    if args.dependency:
        from berth.dependency import parse_dependency  # rare: --dependency

        job["dependency"] = str(parse_dependency(args.dependency))
    if args.retries < 0:
        raise UsageError(f"invalid --retries {args.retries}: must be 0 or more")
    if args.retries:
        job["retries"] = args.retries
    for key in ("hold", "pty", "unique", "keep_idle", "retry_oom"):
        if getattr(args, key, False):
            job[key] = True
    job.update({"learn_mem": True} if _learns(args, choice is None and gpu_ids is None) else {})
    _requeue(args, job)
    _tasks(args, job)
    if getattr(args, "begin", None):
        import time  # rare: --begin

        job["begin"] = parse_begin(args.begin, time.time())
    _extras(args, job)
    return job


def _learns(args: argparse.Namespace, free: bool) -> bool:
    """Whether the daemon may size the job's share from its earlier runs: nothing said how
    much GPU (no -g, --mem, requirement table, --gpu-ids, jobs file's GPUs;
    ``free``), and not --no-learned-mem."""
    return (free and args.gpus is None and args.mem is None
            and not getattr(args, "default_gpus", None)
            and not getattr(args, "no_learned_mem", False))  # fmt: skip


def _extras(args: argparse.Namespace, job: dict[str, Any]) -> None:
    """--conda, --inject-arg, --notify, --mail-user: checked here, where the user's
    environment is, so that nothing fails later as exit code 127."""
    if args.conda:
        from berth.jobsfile.checks import check_conda  # rare: --conda

        check_conda(args.conda, job["env"])
    if args.inject_arg:
        from berth.wire.inject import parse  # rare: --inject-arg

        if args.wrap:
            raise UsageError(
                "--inject-arg needs the command after --; in a --wrap string write {cuda} "
                "(or {gpus}: the machine's numbers) where the ids go"
            )
        try:
            parse(args.inject_arg)
        except ValueError as e:
            raise UsageError(str(e)) from None
        job["inject_arg"] = args.inject_arg
    if args.notify:
        job["notify"] = args.notify
    if args.mail_user:
        if args.mail_user.startswith("-") or any(c.isspace() for c in args.mail_user):
            raise UsageError(f"--mail-user {args.mail_user!r}: give one address (user@host)")
        job["mail_user"] = args.mail_user
    mail_type = getattr(args, "mail_type", None)
    if mail_type is not None:
        from berth.wire.fieldkinds import mail_types  # rare: --mail-type

        if not args.mail_user:
            raise UsageError(f"--mail-type {mail_type}: give --mail-user ADDR too (whom to mail)")
        job["mail_type"] = mail_types(mail_type)


def _tasks(args: argparse.Namespace, job: dict[str, Any]) -> None:
    """-N / --ntasks-per-node (checked by the job spec; the local queue refuses them)."""
    nodes = getattr(args, "nodes", 1)
    if nodes != 1:
        job["nodes"] = nodes
    per_node = getattr(args, "ntasks_per_node", None)
    if per_node is not None:
        job["ntasks_per_node"] = per_node


def gpu_number(text: str) -> object:
    """``-g``'s text as the number it is (``2``, ``0.5``), or the text itself when it is none:
    the job spec words its refusal the same for both."""
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _requeue(args: argparse.Namespace, job: dict[str, Any]) -> None:
    """--requeue / --no-requeue / --max-requeues N; none of them: the daemon's default."""
    requeue, most = getattr(args, "requeue", None), getattr(args, "max_requeues", None)
    if most is not None:
        if most < 0:
            raise UsageError(f"invalid --max-requeues {most}: must be 0 or more")
        if requeue is False:
            raise UsageError("--max-requeues with --no-requeue: give one of them")
        job["max_requeues"], requeue = most, True
    if requeue is not None:
        job["requeue"] = requeue


def check_mail(job: JobSpec) -> None:
    """--mail-user on this machine needs its MTA (on Slurm, Slurm mails)."""
    if job.mail_user and sendmail(job.env.get("PATH", "")) is None:
        raise UsageError(
            f"--mail-user {job.mail_user}: no mail transfer agent here (no sendmail in "
            "PATH, /usr/sbin or /usr/lib): use --notify with a command that tells you"
        )


def _requirement(args: argparse.Namespace, command: list[str]) -> Any:
    """What the requirement table (--requirements, else the config's) says of ``command``,
    when -g is not given; None otherwise."""
    if args.gpus is not None:
        return None
    path = args.requirements
    if path is None:
        path = config.get().requirements
        if path is None:
            return None
    from berth.jobsfile.requirements import cached  # rare: a requirement table

    if not command:
        import shlex  # rare: with --wrap

        try:
            command = shlex.split(args.wrap or "")
        except ValueError:
            return None
    return cached(path).choose(command)
