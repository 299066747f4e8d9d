"""Examples:

  berth submit -- python train.py --epochs 10        # 1 GPU; prints the job id
  berth submit -g 2 -t 2:00:00 -J big -- torchrun --nproc_per_node=2 train.py
  berth submit -g 0.5 --mem 12G -- python eval.py    # half a GPU, 12 GiB of its memory
  berth submit --gpu-ids 2 -p 10 -- python urgent.py # only GPU 2; higher priority first
  berth submit --gpu-ids 0,1 -- torchrun --nproc_per_node=2 train.py   # GPUs 0 and 1, both
  berth submit -g 1 --gpu-ids 0-3 -- python train.py # one GPU, any of 0,1,2,3
  berth submit --dependency afterok:41 -- python report.py
  berth submit --conda myenv -- python inference.py
  berth submit --env-setup "source venv/bin/activate" -- python train.py
  berth submit --wrap "python a.py && python b.py"   # the explicit shell form
  berth submit --wait -- python test.py              # block; exit with the job's status
  berth submit -i -- python train.py                 # stream its output; Ctrl-C detaches
  ID=$(berth submit --parsable -- python x.py)
  berth submit --dry-run -g 2 -- python train.py     # every check, the daemon's too; queues nothing
  berth submit --unique --file jobs.txt              # one job per line; again: only new lines
  berth submit --file jobs.txt                       # the GPU Job Scheduler's CSV jobs file, as it is
  berth submit --requirements llm_config.json -- python eval.py --llm qwen2.5-3b-inst  # 0.5 GPU
  berth submit --inject-arg --cuda -- python train.py   # adds or rewrites --cuda <its GPU ids>
  berth submit -- python train.py --device cuda:{cuda}  # {cuda}: 0..n-1; {gpus}: the machine's
  berth submit --array 0-9%2 -- python task.py       # 10 tasks, 2 at once; $BERTH_ARRAY_TASK_ID
  berth submit --notify 'notify-send "job $BERTH_JOB_ID: $BERTH_JOB_STATE"' -- python x.py

Output and errors go to one log, <state>/logs/ID.out in the daemon's state dir, unless -o
names another (as sbatch); -e keeps errors apart. %j in a name is the job id, %u the user.
The command runs without a shell, in the current directory (or -D DIR), with the environment
of this shell (--export NONE|ALL|VAR,VAR), plus CUDA_VISIBLE_DEVICES,
CUDA_DEVICE_ORDER=PCI_BUS_ID, BERTH_JOB_ID, BERTH_GPUS, BERTH_GPU_UUIDS, BERTH_ATTEMPT (2 and
up when it runs again after --requeue or --retries).

The job is checked here as the daemon checks it (berth/wire/jobspec.py): a value it would
refuse is refused before anything is sent, with the daemon's message. --dry-run then asks the
daemon to run its own checks (this machine's GPUs, limits, dependencies, project) and says
what it would queue (the id it would get, GPUs, time limit, logs), queueing nothing, with the
real submit's refusal and exit status; it never prints the environment. Without a daemon it
exits 5 and says the daemon's checks were not run.

--gpu-ids without -g asks for exactly those GPUs (--gpu-ids 0,1: two GPUs, 0 and 1); with -g N
it is N GPUs out of them. GPU lists take ranges: 0-3, 0-3,6. A time limit above the daemon's
--max-job-time is refused at submit (`berth show ID` shows the limit in force).

--requirements FILE (or `requirements = "FILE"` under [queue] in the config) is the GPU Job Scheduler's
llm_config.json: the GPUs (and optionally memory) a command gets from its --llm argument,
when -g is not given; `berth show ID` says where the request came from. --inject-arg --cuda
puts the job's GPU ids in its --cuda option, as the job sees them (0..n-1, since
CUDA_VISIBLE_DEVICES holds its GPUs); --inject-arg --cuda=machine the machine's numbers
(what the GPU Job Scheduler passed, for scripts that set CUDA_VISIBLE_DEVICES themselves). An --array's
tasks see BERTH_ARRAY_JOB_ID, BERTH_ARRAY_TASK_ID (and SLURM_ARRAY_*), BERTH_JOB_ID=ID_TASK;
%A and %a in -o/-e are the array's id and the task's index (default log: %A_%a.out).
--notify CMD runs the shell command CMD as you when the job has ended (its record is written),
with BERTH_JOB_ID, BERTH_JOB_NAME, BERTH_JOB_STATE, BERTH_JOB_EXIT_CODE, BERTH_JOB_REASON in
its environment; --mail-user ADDR mails the same through the local sendmail (refused at
submit if there is none), --mail-type BEGIN,END,FAIL,REQUEUE (or ALL, NONE) says when, as
sbatch's. docs/jobs-file.md has the details.

mgpu_srun's option names work too: --time-limit (-t), --env-setup-cmd (--env-setup),
--interactive (-i); gpuselect's --count is -g. A command given as one quoted string
("python train.py --x 5", as scheduler.py took it) is refused with the two ways to write it:
the words apart after --, or --wrap "python train.py --x 5" to run it through /bin/sh.
"""

from __future__ import annotations

import os
import sys

from berth import config
from berth.cli import submit_options
from berth.cli.command import words
from berth.cli.escape import shown
from berth.cli.submit_options import time_limit
from berth.client import Client
from berth.errors import UsageError
from berth.units import format_duration, parse_begin, parse_gpu_indices, parse_size
from berth.wire.env import export_env, sendmail
from berth.wire.jobsize import check_job_bytes, job_bytes
from berth.wire.jobspec import JobSpec, check_field
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

# Nothing is held once the daemon has answered (the job is durable there): main() may skip
# interpreter teardown (output is flushed first).
FAST_EXIT = True


def add_arguments(p: argparse.ArgumentParser, command: bool = True) -> None:
    """submit's options: :func:`berth.cli.submit_options.add_arguments`."""
    submit_options.add_arguments(p, command)


def _array_said(reply: dict[str, Any]) -> str:
    tasks = reply.get("tasks")
    if not tasks:
        return ""
    throttle = str(reply.get("array", "")).partition("%")[2]
    at_once = f", at most {throttle} at once" if throttle else ""
    return f": an array of {len(tasks)} tasks ({tasks[0]}..{tasks[-1]}{at_once})"


def run(args: argparse.Namespace) -> int:
    array = getattr(args, "array", None)  # (`--array`: berth.cli.backend adds it)
    if array:
        from berth.wire.arrays import ArraySpec  # rare: --array

        if args.unique or args.interactive:
            raise UsageError("--array: not with --unique or -i (each task has its own log)")
        array = ArraySpec.parse(array).text
    job = job_spec(args, array=array)
    check_mail(job)
    if args.dry_run:  # every check, the daemon's too; nothing queued
        from berth.cli import submit_dry  # rare: --dry-run

        submit_dry.show(submit_dry.ask("submit", job=job.to_dict()), args.json)
        return 0
    with Client() as c:
        c.send("submit", job=job.to_dict())
        if args.interactive or args.wait:
            _ready_to_follow(args.interactive)  # (while the daemon queues and starts the job)
        reply = c.receive()
        job_id = reply["job_id"]
        if reply.get("duplicate"):
            sys.stderr.write(
                f"job {job_id} is the same job ({reply['state']}); not submitted again (--unique)\n"
            )
        if args.parsable:
            sys.stdout.write(f"{job_id}\n")
        elif args.json and not (args.wait or args.interactive):
            import json  # rare: --json

            sys.stdout.write(json.dumps(reply) + "\n")
        elif not reply.get("duplicate"):
            out = sys.stderr if (args.wait or args.interactive) else sys.stdout
            out.write(f"Submitted job {job_id}{_array_said(reply)}\n")
            sys.stderr.write(_limit_said(reply))  # (stdout stays one line, for scripts)
            if reply.get("learned"):  # (no -g, no --mem: sized from earlier runs)
                sys.stderr.write(f"  {shown(reply['learned']['said'])}\n")
            if job.request_source:
                out.write(f"  GPUs from {job.request_source}\n")
        sys.stdout.flush()
    if args.interactive or args.wait:
        from berth.backends.local import Local  # rare: -i, --wait
        from berth.cli.logs import follow, wait_end  # rare: -i, --wait

        if args.interactive:
            return follow(Local(), str(job_id), reply["stdout"], reply["stderr"], True)
        return wait_end(Local(), str(job_id), args.json)
    return 0


def _ready_to_follow(interactive: bool) -> None:
    """Import what -i and --wait run once the job is queued (~5 ms), while the daemon
    commits it: its first line comes that much sooner."""
    import berth.backends.local  # rare: -i, --wait
    import berth.cli.logs  # rare: -i, --wait

    if interactive:
        import berth.cli.logs_follow  # noqa: F401  rare: -i (ctypes)


def _limit_said(reply: dict[str, Any]) -> str:
    """The line of submit's reply that says what time limit stops the job (older daemons do
    not say: nothing then)."""
    if "limit_in_force" not in reply:
        return ""
    limit = reply["limit_in_force"]
    if limit is None:
        return "  no time limit\n"
    src = "-t" if reply.get("limit_from") == "job" else "the daemon's --max-job-time"
    return f"  time limit {format_duration(limit)} ({src})\n"


# -- the job: its JobSpec from the options ---------------------------------------------------
# A job's :class:`~berth.wire.jobspec.JobSpec` from `berth submit`'s options (shared by
# `berth sweep`, `berth watch`, jobs files' lines and the Slurm backend): what only the command
# line can check (an option's syntax, a directory, a conda environment) is checked here; the
# rest by :meth:`JobSpec.from_dict`, as the daemon checks it, so bad input is refused before
# anything is sent, with the daemon's message.


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
    submit_options.check_places(args, job["cwd"])
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
