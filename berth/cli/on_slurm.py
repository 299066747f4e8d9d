"""`berth submit` and `berth sweep` on Slurm (``--backend slurm``): the same options and
output as on the local queue, through :class:`berth.backends.slurm.Slurm`, plus what only Slurm
takes (--partition, --mem-per-gpu, --sbatch-arg). `--wait` and `-i` end as `berth wait` and
`berth logs -f` do (:mod:`berth.cli.logs`, on any backend). ``--dry-run`` (submit, ``--file``,
sweep) runs berth's checks, then the planned call as ``sbatch --test-only`` (Slurm's own
checks, and when and where it would start the job), and shows the call; nothing is written or
submitted, and Slurm's refusal is the real submit's.
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
from berth.cli.submit import job_spec
from berth.cli.sweep import grid
from berth.cli.sweep import show as show_grid
from berth.errors import UsageError
from berth.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from berth.wire.jobspec import JobSpec


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
        if args.dry_run:
            return _dry(args, backend, list(specs), None, mem, extra)
        for _, spec in specs:
            _say(args, backend.submit(spec, mem_per_gpu=mem, extra=extra), None)
        return 0
    if args.dry_run:
        return _dry(args, backend, [(None, job_spec(args))], array, mem, extra)
    if getattr(args, "script_file", None):  # (copied to the log dir: the nodes run the copy)
        from berth.jobsfile import snapshot  # rare: a submitted script

        snapshot.apply(args, backend.log_dir)
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
        return _dry(args, backend, [(None, job)], array, mem, extra, (commands, axes))
    sub = backend.submit(job, array=array, mem_per_gpu=mem, extra=extra)
    _say(args, sub, array)
    return wait_end(backend, sub.id, args.json) if args.wait else 0


def _dry(
    args: argparse.Namespace, backend: Slurm, jobs: list[tuple[int | None, JobSpec]],
    array: ArraySpec | None, mem: int | None, extra: list[str], sweep: Any = None,
) -> int:  # fmt: skip
    """--dry-run on Slurm: each job (``(line, spec)``; line None: not from a file) checked by
    berth and by ``sbatch --test-only``, all before anything is printed; what it would
    submit. Never the environment: how many variables it exports."""
    checked = [(line, job, *backend.test_only(job, array, mem, extra)) for line, job in jobs]
    if sweep is not None and not args.json:
        show_grid(*sweep)
    for line, job, p, said in checked:
        call = [*p.argv, backend.script_path(p.script), *p.args]
        if args.json:
            row = {"dry_run": True, "backend": "slurm", "sbatch": call, "script": p.script,
                   "slurm": said, "notes": p.notes, "env_vars": len(job.env)}  # fmt: skip
            sys.stdout.write(json.dumps(row if line is None else {**row, "line": line}) + "\n")
            continue
        where = f"line {line}: " if line is not None else ""
        out = [f"{where}would submit to Slurm: {shlex.join(call)}"]
        out += [f"  Slurm says: {s}" for s in said] + [f"  berth: {n}" for n in p.notes]
        out.append(f"  environment: {len(job.env)} variables exported (not shown)")
        sys.stdout.write("\n".join(out) + "\n")
    if not args.json:
        n = "1 job" if len(checked) == 1 else f"{len(checked)} jobs"
        sys.stdout.write(
            f"dry run: {n} checked by berth and by Slurm (sbatch --test-only); nothing was "
            "submitted, no script written\n"
        )
    return 0


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
