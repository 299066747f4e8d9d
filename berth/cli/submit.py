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

import sys

from berth.cli import submit_options
from berth.cli.escape import shown
from berth.cli.submit_spec import check_mail, job_spec
from berth.client import Client
from berth.errors import UsageError
from berth.units import (
    format_duration,
)

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
    if args.file:
        from berth.cli import submit_file  # rare: --file

        return submit_file.run(args)
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
