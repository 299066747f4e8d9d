"""Examples:

  berth sweep --dry-run 'python train.py --lr {1e-3,1e-4} --seed {0..4}'   # the 10 commands, checked
  berth sweep 'python train.py --lr {1e-3,1e-4} --seed {0..4}'             # one array of 10
  berth sweep --throttle 2 -g 0.5 -t 2h 'python train.py --lr {1e-3,3e-4,1e-4}'
  berth sweep -- python train.py --lr '{1e-3,1e-4}'                        # words apart

A hyperparameter grid: every brace group of the template is an axis (a list {a,b,c}, or a
range of integers {0..4}, {0..10..2}), and each combination is one command, the first axis
varying slowest. Quote the template: an unquoted {a,b} would be expanded by your shell first.
The commands are queued as one array (`berth queue` shows it as one line, `berth cancel ID`
cancels it all, `berth wait ID` waits for it all); task i runs command i, without a shell,
and sees BERTH_ARRAY_TASK_ID=i. --throttle K runs at most K at once (as --array's %K).
Every option of `berth submit` applies to each task ({gpus} and {cuda} in the template are
the task's GPU ids: the machine's, and as the task sees them).

On Slurm the sweep is one `sbatch --array=0-(N-1)%K` job whose batch script picks task i's
command (quoted words, never re-parsed) by $SLURM_ARRAY_TASK_ID; --dry-run shows the sbatch
call too.
"""

from __future__ import annotations

import json
import shlex
import sys

from berth.cli.submit import _array_said, check_mail, job_spec
from berth.cli.submit_options import add_arguments as submit_arguments
from berth.client import Client
from berth.errors import UsageError
from berth.jobsfile.grid import expand

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

FAST_EXIT = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands and run every check; queue nothing")  # fmt: skip
    p.add_argument("--throttle", type=int, metavar="K", help="at most K tasks running at once")
    submit_arguments(p)


def grid(args: argparse.Namespace) -> tuple[list[list[str]], list[tuple[str, list[str]]]]:
    """The sweep's commands and axes from the template (checked, as is --throttle)."""
    if args.file or args.wrap or args.interactive or args.unique:
        raise UsageError("berth sweep takes one command template: no --file, --wrap, -i, --unique")
    template = list(args.argv[1:] if args.argv[:1] == ["--"] else args.argv)
    if len(template) == 1 and any(c.isspace() for c in template[0]):
        try:
            template = shlex.split(template[0])
        except ValueError as e:
            raise UsageError(f"berth sweep: {template[0]!r}: {e}") from None
    commands, axes = expand(template)
    if not axes:
        raise UsageError(
            f"berth sweep: {shlex.join(template)!r} has no brace group ({{a,b}} or {{0..4}}): "
            "nothing to sweep; use `berth submit` for one command"
        )
    if args.throttle is not None and args.throttle < 1:
        raise UsageError(f"--throttle {args.throttle}: must be 1 or more")
    return commands, axes


def show(commands: list[list[str]], axes: list[tuple[str, list[str]]]) -> None:
    """--dry-run: the grid's shape and every command."""
    shape = " x ".join(f"{len(v)} ({g})" for g, v in axes)
    sys.stdout.write(f"{len(commands)} commands: {shape}\n")
    for i, cmd in enumerate(commands):
        sys.stdout.write(f"{i:>4}  {shlex.join(cmd)}\n")


def run(args: argparse.Namespace) -> int:
    commands, axes = grid(args)
    n = len(commands)
    args.argv = ["--", *commands[0]]
    array = f"0-{n - 1}" + (f"%{args.throttle}" if args.throttle else "")
    job = job_spec(args, array=array, array_argvs=commands)
    check_mail(job)
    if args.dry_run:  # the grid, then every check of the array (the daemon's too)
        from berth.cli import submit_dry  # rare: --dry-run

        reply = submit_dry.ask("submit", job=job.to_dict())
        if args.json:
            sys.stdout.write(json.dumps(reply) + "\n")
            return 0
        show(commands, axes)
        sys.stdout.write(submit_dry.said(reply, cmd="task i runs command i") + submit_dry.footer(1))
        return 0
    with Client() as c:
        reply = c.call("submit", job=job.to_dict())
        if args.parsable:
            sys.stdout.write(f"{reply['job_id']}\n")
        elif args.json and not args.wait:
            sys.stdout.write(json.dumps(reply) + "\n")
        else:
            out = sys.stderr if args.wait else sys.stdout
            out.write(f"Submitted job {reply['job_id']}{_array_said(reply)}\n")
        sys.stdout.flush()
    if args.wait:
        from berth.backends.local import Local  # rare: --wait
        from berth.cli.logs import wait_end  # rare: --wait

        return wait_end(Local(), str(reply["job_id"]), args.json)
    return 0
