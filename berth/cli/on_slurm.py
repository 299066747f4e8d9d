"""`berth submit` and `berth sweep` on Slurm (``--backend slurm``): the same options and
output as on the local queue, through :class:`berth.backends.slurm.Slurm`, plus what only Slurm
takes (--partition, --mem-per-gpu, --sbatch-arg; sweep --dry-run shows the sbatch call). `--wait` and `-i`
end as `berth wait` and `berth logs -f` do (:mod:`berth.cli.logs`, on any backend).
queue, show, cancel, logs and wait have no Slurm copy: their modules act through whichever
backend :func:`berth.cli.backend_choice.of` gives. :mod:`berth.cli.backend` decides which backend a
command goes to.
"""

from __future__ import annotations

import json
import shlex
import sys

from berth.backends.base import ArraySpec
from berth.backends.slurm import Slurm
from berth.cli import submit_file
from berth.cli.backend_choice import of
from berth.cli.logs import follow, wait_end
from berth.cli.submit_spec import job_spec
from berth.cli.sweep import grid
from berth.cli.sweep import show as show_grid
from berth.errors import UsageError
from berth.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _backend(args: argparse.Namespace) -> Slurm:
    backend = of(args)
    assert isinstance(backend, Slurm)  # (berth.cli.backend sends only Slurm runs here)
    return backend


# -- submit ------------------------------------------------------------------------------------


def submit(args: argparse.Namespace) -> int:
    backend = _backend(args)
    array = ArraySpec.parse(args.array) if args.array else None
    mem = parse_size(args.mem_per_gpu, what="--mem-per-gpu") if args.mem_per_gpu else None
    extra = args.sbatch_arg or []
    if args.file:
        if array is not None or args.wait or args.interactive:
            raise UsageError("--file: one job per line; not with --array, --wait or -i")
        specs = submit_file.jobs(args)  # all checked before any is submitted
        for _, spec in specs:
            _say(args, backend.submit(spec, mem_per_gpu=mem, extra=extra), None)
        return 0
    sub = backend.submit(job_spec(args), array=array, mem_per_gpu=mem, extra=extra)
    _say(args, sub, array)
    if args.interactive:
        return follow(backend, sub.id, sub.stdout, sub.stderr, detach_hint=True)
    return wait_end(backend, sub.id, args.json) if args.wait else 0


# -- sweep -------------------------------------------------------------------------------------


def sweep(args: argparse.Namespace) -> int:
    """`berth sweep` on Slurm: one ``sbatch --array=0-(N-1)[%K]`` job whose batch script runs
    command i as task i (:mod:`berth.backends.slurm_script`)."""
    commands, axes = grid(args)
    n = len(commands)
    backend = _backend(args)
    array = ArraySpec.parse(f"0-{n - 1}" + (f"%{args.throttle}" if args.throttle else ""))
    mem = parse_size(args.mem_per_gpu, what="--mem-per-gpu") if args.mem_per_gpu else None
    extra = args.sbatch_arg or []
    args.argv = ["--", *commands[0]]
    job = job_spec(args, array=array.text, array_argvs=commands)
    if args.dry_run:
        p = backend.plan(job, array, mem, extra)  # (what Slurm cannot do is refused here too)
        show_grid(commands, axes)
        call = shlex.join([*p.argv, backend.script_path(p.script)])
        sys.stdout.write(f"on Slurm, one job: {call}\n")
        return 0
    sub = backend.submit(job, array=array, mem_per_gpu=mem, extra=extra)
    _say(args, sub, array)
    return wait_end(backend, sub.id, args.json) if args.wait else 0


def _say(args: argparse.Namespace, sub: Any, array: Any) -> None:
    for warning in sub.warnings:
        sys.stderr.write(f"berth: {warning}\n")
    if args.parsable:
        sys.stdout.write(f"{sub.id}\n")
    elif args.json and not (args.wait or args.interactive):
        sys.stdout.write(json.dumps(sub.to_dict()) + "\n")
    else:
        out = sys.stderr if (args.wait or args.interactive) else sys.stdout
        what = ""
        if array is not None:
            at_once = f", at most {array.throttle} at once" if array.throttle else ""
            what = (
                f": an array of {len(sub.tasks)} tasks ({sub.tasks[0]}..{sub.tasks[-1]}{at_once})"
            )
        out.write(f"Submitted job {sub.id} to Slurm{what}\n")
    sys.stdout.flush()
