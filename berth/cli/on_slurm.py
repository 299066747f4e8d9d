"""`berth submit/sweep/queue/show/cancel/logs/wait` on Slurm (``--backend slurm``): the same
options and output as on the local queue, through :class:`berth.backends.slurm.Slurm`.
:mod:`berth.cli.backend` decides which backend a command goes to.
"""

from __future__ import annotations

import json
import shlex
import sys
import time

from berth import config
from berth.backends.base import ArraySpec
from berth.backends.slurm import Slurm, _user
from berth.cli import submit_file
from berth.cli.cancel import parse_signal
from berth.cli.logs import last_lines
from berth.cli.submit import job_spec
from berth.cli.sweep import grid
from berth.cli.sweep import show as show_grid
from berth.cli.wait import deadline_of
from berth.errors import EXIT_TIMEOUT, UsageError
from berth.units import format_duration, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, BinaryIO

    from berth.backends.base import JobInfo


def _backend(args: argparse.Namespace) -> Slurm:
    cfg = config.get()
    partition = getattr(args, "partition", None) or cfg.slurm_partition
    return Slurm(partition=partition, log_dir=cfg.slurm_log_dir)


def _status(info: JobInfo | None) -> int:
    """The exit status `--wait` and `logs -f` end with, as on the local queue."""
    if info is None or info.state == "COMPLETED":
        return 0
    code = info.exit_code
    return code if isinstance(code, int) and 0 < code < 256 else 1


# -- submit ------------------------------------------------------------------------------------


def submit(args: argparse.Namespace) -> int:
    backend = _backend(args)
    array = ArraySpec.parse(args.array) if args.array else None
    mem = parse_size(args.mem_per_gpu, what="--mem-per-gpu") if args.mem_per_gpu else None
    if args.file:
        if array is not None or args.wait or args.interactive:
            raise UsageError("--file: one job per line; not with --array, --wait or -i")
        specs = submit_file.jobs(args)  # all checked before any is submitted
        for _, spec in specs:
            _say(args, backend.submit(spec, mem_per_gpu=mem), None)
        return 0
    sub = backend.submit(job_spec(args), array=array, mem_per_gpu=mem)
    _say(args, sub, array)
    if args.interactive:
        return _follow(backend, sub.id, sub.stdout, sub.stderr, detach_hint=True)
    return _waited(args, backend, sub.id) if args.wait else 0


def _waited(args: argparse.Namespace, backend: Slurm, job_id: str) -> int:
    """--wait: until the job (all of an array) has ended; its outcome as the exit status."""
    info = backend.wait(job_id, float("inf"))
    if args.json:
        sys.stdout.write(json.dumps(info.to_dict() if info else None) + "\n")
    elif info is not None:
        sys.stderr.write(f"job {job_id} {info.state} (exit code {info.exit_code})\n")
    return _status(info)


# -- sweep -------------------------------------------------------------------------------------


def sweep(args: argparse.Namespace) -> int:
    """`berth sweep` on Slurm: one ``sbatch --array=0-(N-1)[%K]`` job whose batch script runs
    command i as task i (:mod:`berth.backends.slurm_script`)."""
    commands, axes = grid(args)
    n = len(commands)
    backend = _backend(args)
    array = ArraySpec.parse(f"0-{n - 1}" + (f"%{args.throttle}" if args.throttle else ""))
    mem = parse_size(args.mem_per_gpu, what="--mem-per-gpu") if args.mem_per_gpu else None
    args.argv = ["--", *commands[0]]
    job = job_spec(args, array=array.text, array_argvs=commands)
    if args.dry_run:
        p = backend.plan(job, array, mem)  # (what Slurm cannot do is refused here too)
        show_grid(commands, axes)
        call = shlex.join([*p.argv, backend.script_path(p.script)])
        sys.stdout.write(f"on Slurm, one job: {call}\n")
        return 0
    sub = backend.submit(job, array=array, mem_per_gpu=mem)
    _say(args, sub, array)
    return _waited(args, backend, sub.id) if args.wait else 0


def _say(args: argparse.Namespace, sub: Any, array: Any) -> None:
    for warning in sub.warnings:
        sys.stderr.write(f"berth: Slurm says: {warning}\n")
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


# -- queue -------------------------------------------------------------------------------------


def queue(args: argparse.Namespace) -> int:
    from berth.core.states import CODES, State  # heavy: berth.core (the scheduler)

    if args.start:
        raise UsageError("--start: not on Slurm; `squeue --start` gives Slurm's own estimate")
    wanted = None
    if args.states:
        try:
            wanted = {State.parse(s).value for s in args.states.split(",") if s.strip()}
        except ValueError as e:
            raise UsageError(str(e)) from None
    finished = args.all or bool(wanted and wanted - {"PENDING", "RUNNING", "COMPLETING"})
    rows = _backend(args).list(user=args.user, finished=finished)
    if wanted:
        rows = [r for r in rows if r.state in wanted]
    if args.json:
        sys.stdout.write(json.dumps([r.to_dict() for r in rows]) + "\n")
        return 0
    lines = [("JOBID", "NAME", "USER", "ST", "TIME", "GPUS", "NODELIST(REASON)")]
    for r in rows:
        where = f"({r.reason})" if r.state == "PENDING" else r.where
        lines.append(
            (r.id, r.name[:20], r.user[:12], CODES.get(State(r.state), "?"),
             format_duration(r.elapsed) if r.elapsed is not None else "0:00", r.gpus, where)
        )  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(6)]
    for line in lines:
        cells = [line[i].rjust(widths[i]) if i in (0, 4) else line[i].ljust(widths[i])
                 for i in range(6)]  # fmt: skip
        sys.stdout.write(" ".join(cells) + " " + line[6] + "\n")
    return 0


# -- show --------------------------------------------------------------------------------------


def show(args: argparse.Namespace) -> int:
    job = _backend(args).show(args.job_id)
    if args.json:
        sys.stdout.write(json.dumps(job) + "\n")
        return 0
    out = []
    for j in job["jobs"]:
        native = f" ({j['native']})" if j["native"] != j["state"] else ""
        reason = f" ({j['reason']})" if j.get("reason") else ""
        code = f", exit code {j['exit_code']}" if j.get("exit_code") is not None else ""
        out.append(f"Job {j['id']} ({j['name']}) of {j['user']} on Slurm: {j['state']}"
                   f"{native}{reason}{code}")  # fmt: skip
        out.append(f"  gpus: {j['gpus'] or '-'}   where: {j['where'] or '-'}")
    for rec in job["slurm"]:
        out.append("  slurm: " + " ".join(f"{k}={v}" for k, v in rec.items()))
    rec = job.get("berth")
    if rec:
        out.append(f"  logs:   {rec['stdout']}" + ("" if rec["stderr"] == rec["stdout"]
                   else f" (errors: {rec['stderr']})"))  # fmt: skip
        out.append(f"  script: {rec.get('script', '-')}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


# -- cancel ------------------------------------------------------------------------------------


def cancel(args: argparse.Namespace) -> int:
    if not args.job_ids and not args.all_mine:
        raise UsageError("name the jobs to cancel, or use --all-mine")
    backend = _backend(args)
    ids = list(args.job_ids)
    if args.all_mine:
        ids += [j.id for j in backend.list(user=_user()) if j.id not in ids]
    if args.state:
        from berth.core.states import State  # heavy: berth.core (the scheduler)

        try:
            wanted = {State.parse(s).value for s in args.state.split(",") if s.strip()}
        except ValueError as e:
            raise UsageError(str(e)) from None
        now = backend.status(ids)
        ids = [i for i in ids if any(j.state in wanted for k, j in now.items()
                                     if i in (k, j.array_job))]  # fmt: skip
    sig = parse_signal(args.signal) if args.signal else None
    done = backend.cancel(ids, sig) if ids else {}
    if args.json:
        sys.stdout.write(json.dumps(done) + "\n")
    else:
        for i, what in done.items():
            sys.stdout.write(f"job {i}: {what}\n")
    return 1 if any(w == "no such job" for w in done.values()) else 0


# -- wait --------------------------------------------------------------------------------------


def wait(args: argparse.Namespace) -> int:
    """`berth wait` on Slurm: as on the local queue (one line per job as it ends; the exit
    status is the outcome; 6 at --timeout), an array's id waiting for all of its tasks."""
    deadline = deadline_of(args)
    backend = _backend(args)
    status = 0
    for ref in (str(i) for i in args.job_ids):
        left = float("inf") if deadline is None else max(0.0, deadline - time.monotonic())
        info = backend.wait(ref, left)
        if info is None:
            raise UsageError(f"no Slurm job {ref}: see `berth queue --all --backend slurm`")
        if not info.finished:
            if not args.quiet:
                sys.stderr.write(f"berth wait: job {ref} has not ended (--timeout)\n")
            return EXIT_TIMEOUT
        if args.json:
            sys.stdout.write(json.dumps(info.to_dict()) + "\n")
        elif not args.quiet:
            code = "" if info.exit_code is None else f" (exit code {info.exit_code})"
            sys.stdout.write(f"job {ref}: {info.state}{code}\n")
        sys.stdout.flush()
        if status == 0 and info.state != "COMPLETED":
            status = _status(info)
    return status


# -- logs --------------------------------------------------------------------------------------


def logs(args: argparse.Namespace) -> int:
    if args.lines is not None and args.lines < 0:
        raise UsageError(f"invalid -n/--lines {args.lines}: give 0 or more")
    backend = _backend(args)
    out, err = backend.logs(args.job_id)
    path = err if args.err else out
    if args.err and err == out:
        sys.stderr.write(
            f"job {args.job_id} has one log for output and errors (submit with -e FILE to keep "
            "errors apart); showing it\n"
        )
    if args.follow:
        out_path, err_path = (None, path) if args.err else (path, None)
        return _follow(backend, args.job_id, out_path, err_path, lines=args.lines)
    try:
        with open(path, "rb") as f:
            if args.lines is not None:
                f.seek(last_lines(path, args.lines))
            data = f.read()
    except FileNotFoundError:
        data = b""
        sys.stderr.write(
            f"job {args.job_id} has written nothing yet ({path}); `berth logs -f "
            f"{args.job_id}` waits for it and follows\n"
        )
    if args.json:
        sys.stdout.write(json.dumps({"path": path, "text": data.decode("utf-8", "replace")}))
        sys.stdout.write("\n")
    else:
        sys.stdout.buffer.write(data)
    return 0


def _follow(
    backend: Slurm,
    job_id: str,
    stdout: str | None,
    stderr: str | None,
    detach_hint: bool = False,
    lines: int | None = None,
) -> int:
    """Stream the job's files until it ends (Slurm asked every half second at most)."""
    tails: list[tuple[str, BinaryIO, list[int]]] = []  # path, stream, [offset]
    for path, stream in ((stdout, sys.stdout), (stderr, sys.stderr)):
        if path and path not in [t[0] for t in tails]:
            start = 0 if lines is None else last_lines(path, lines)
            tails.append((path, stream.buffer, [start]))

    def pump() -> None:
        for path, stream, pos in tails:
            try:
                with open(path, "rb") as f:
                    f.seek(pos[0])
                    data = f.read()
            except FileNotFoundError:
                continue
            if data:
                pos[0] += len(data)
                stream.write(data)
                stream.flush()

    try:
        while True:
            pump()
            info = backend.wait(job_id, 0.5)
            if info is None or info.finished:
                pump()
                return _status(info)
    except KeyboardInterrupt:
        if detach_hint:
            sys.stderr.write(
                f"\ndetached; job {job_id} keeps running (`berth logs -f {job_id}` to follow, "
                f"`berth cancel {job_id}` to stop it)\n"
            )
        return 0
