"""``berth submit --file FILE``: one job per line, in one of two formats, recognised by the
file itself (:mod:`berth.jobsfile.detect`):

- berth's own: ``[submit options] [--] command args``, split as a shell would (quotes, ``#``
  comments) but never run by one;
- the GPU Job Scheduler's CSV: ``priority,script_path,conda_env,arguments,allowed_gpus``
  (:mod:`berth.jobsfile.gjs_line`): each line runs ``python -u SCRIPT ARGUMENTS`` in its conda
  environment, on one GPU out of ``allowed_gpus`` (or what the requirement table gives its
  ``--llm``), with ``--cuda`` set to its GPUs as the GPU Job Scheduler did (the machine's numbers:
  ``--inject-arg --cuda=machine``); the GPU Job Scheduler's priority ``p`` is berth priority ``-p`` (lower first,
  as the GPU Job Scheduler), and berth says so.

Options on berth's own command line apply to every line (a line's own options win). Every
line is checked before anything is submitted (its syntax, its conda environment, that its
script or program exists; every job as the daemon will check it: berth/wire/jobspec.py),
then the daemon checks them all again and queues all or none
(``submit_all``): a bad line, named as ``FILE:LINE:COLUMN``, queues nothing. With ``--unique``,
submitting the file again after appending lines queues only the new ones (and the ones whose
last run failed); ``berth watch FILE`` does that as lines are appended.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys

from berth.cli.submit_options import add_arguments
from berth.cli.submit_spec import check_mail, job_spec
from berth.client import Client, DaemonError
from berth.errors import UsageError
from berth.jobsfile import checks, detect, gjs_line
from berth.jobsfile.detect import column

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.wire.jobspec import JobSpec


def read_lines(path: str) -> list[tuple[int, str]]:
    """(number, text) of every line of the file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read --file {path!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--file {path!r} is not UTF-8 text") from None
    return list(enumerate(text.splitlines(), 1))


def _parser() -> Any:
    """submit's parser, raising (naming the line in ``where``) instead of exiting; built once
    for the whole file."""

    class Parser(argparse.ArgumentParser):
        where = ""

        def error(self, message: str) -> Any:  # not exit: say which line
            raise UsageError(f"{self.where}: {message}")

    p = Parser(prog="berth submit --file", add_help=False)
    add_arguments(p)
    return p


def _given(args: argparse.Namespace, parser: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(submit's defaults, the options given on berth's own command line)."""
    defaults = vars(parser.parse_args([]))
    given = {k: v for k, v in vars(args).items() if k in defaults and v != defaults[k]}
    for k in ("argv", "file"):
        given.pop(k, None)
    return defaults, given


def jobs(
    args: argparse.Namespace, path: str | None = None, notes: list[str] | None = None
) -> list[tuple[int, JobSpec]]:
    """(line number, job spec) of every job line of the file (or of ``path``); ``notes``
    gets what the user should be told once they are queued (how the GPU Job Scheduler's lines map)."""
    path = path or args.file
    lines = read_lines(path)
    kind, job_lines = detect.detect(path, lines)
    if not job_lines:
        raise UsageError(f"--file {path!r} has no job (one command per line)")
    if kind == detect.GJS:
        if notes is not None:
            notes.append(
                f"{path}: the GPU Job Scheduler's format ({gjs_line.HEADER}): priority P is berth priority -P "
                "(lower first, as the GPU Job Scheduler); --cuda is set to each job's GPUs (the machine's "
                "numbers)"
            )
        return gjs_jobs(args, path, job_lines)
    return berth_jobs(args, path, job_lines)


def berth_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> list[tuple[int, JobSpec]]:
    parser = _parser()
    defaults, given = _given(args, parser)
    out = []
    for n, text in job_lines:
        where = f"{path}:{n}"
        try:
            words = shlex.split(text, comments=True)
        except ValueError as e:
            raise UsageError(f"{where}:{column(text, None)}: {e} in {text.strip()!r}") from None
        parser.where = where
        try:
            line = parser.parse_args(words)
        except UsageError as e:
            raise UsageError(
                f"{where}:{column(text, str(e))}: {str(e)[len(where) + 2 :]}"
            ) from None
        for k, v in given.items():
            if getattr(line, k) == defaults[k]:
                setattr(line, k, v)
        if line.file or line.wait or line.interactive:
            raise UsageError(f"{where}:1: --file, --wait and -i are not for a line of a file")
        try:
            spec = job_spec(line)
        except UsageError as e:
            raise UsageError(f"{where}:{column(text, str(e))}: {e}") from None
        _check_command(spec, f"{where}:{column(text, (spec.argv or [''])[0])}")
        out.append((n, spec))
    return out


def _check_command(spec: JobSpec, where: str) -> None:
    """The command's program exists for the job (unless a setup script may bring it)."""
    argv = spec.argv
    if not argv or spec.env_setup:
        return
    conda = checks.conda_dir(spec.conda, spec.env) if spec.conda else None
    try:
        checks.check_program(argv[0], spec.env, spec.cwd, where, conda)
    except UsageError as e:
        if "," not in argv[0]:
            raise
        raise UsageError(
            f"{e}; nor is the line in the GPU Job Scheduler's format ({gjs_line.HEADER}: the first field "
            "is an integer priority)"
        ) from None


def gjs_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> list[tuple[int, JobSpec]]:
    """The GPU Job Scheduler's lines as job specs (see the module's docstring)."""
    parser = _parser()
    given = _given(args, parser)[1]
    out = []
    env = dict(os.environ)
    for n, text in job_lines:
        where = f"{path}:{n}"
        line = gjs_line.parse(text, n, where)
        col = line.columns
        ns = parser.parse_args(["--", "python"])
        for k, v in given.items():
            setattr(ns, k, v)
        if "priority" not in given:
            ns.priority = gjs_line.berth_priority(line.priority)
        if line.conda:
            ns.conda = line.conda
        if line.gpu_ids is not None:
            ns.gpu_ids = ",".join(str(i) for i in line.gpu_ids)
        ns.default_gpus = "1"  # one GPU of allowed_gpus, as the GPU Job Scheduler (not all of them)
        if "inject_arg" not in given:
            ns.inject_arg = "--cuda=machine"
        if "job_name" not in given:
            ns.job_name = os.path.basename(line.script)
        cwd = os.path.abspath(ns.chdir or os.getcwd())
        conda = None
        if line.conda:
            conda = checks.check_conda(line.conda, env, what=f"{where}:{col[2]}: conda_env")
        checks.check_script(line.script, cwd, f"{where}:{col[1]}")
        python = _python(env, cwd, conda, f"{where}:{col[1]}")
        ns.argv = ["--", python, "-u", line.script, *line.args]
        try:
            spec = job_spec(ns)
        except UsageError as e:
            raise UsageError(f"{where}:{col[4] if len(col) > 4 else 1}: {e}") from None
        out.append((n, spec))
    return out


def _python(env: dict[str, str], cwd: str, conda: str | None, where: str) -> str:
    """``python`` for the job (in its conda environment, else on PATH), else ``python3``."""
    for name in ("python", "python3"):
        if checks.find_program(name, env, cwd, conda) is not None:
            return name
    inside = f" in conda environment {conda} or" if conda else ""
    raise UsageError(f"{where}: no python{inside} on PATH to run the script with")


def run(args: argparse.Namespace) -> int:
    if args.wait or args.interactive or args.argv or args.wrap:
        raise UsageError(
            "--file takes the commands from the file: no command, --wrap, --wait or -i"
        )
    if getattr(args, "array", None):
        raise UsageError("--file: one job per line; not with --array")
    notes: list[str] = []
    specs = jobs(args, notes=notes)  # all checked before any is sent
    for _, spec in specs:
        check_mail(spec)
    with Client() as c:
        replies = submit_all(c, args.file, specs)
    for note in notes:
        sys.stderr.write(note + "\n")
    new = 0
    for reply in replies:
        job_id = reply["job_id"]
        if args.json:
            sys.stdout.write(json.dumps(reply) + "\n")
        elif args.parsable:
            sys.stdout.write(f"{job_id}\n")
        elif reply.get("duplicate"):
            sys.stdout.write(f"Job {job_id} is already there ({reply['state']}): not again\n")
        else:
            sys.stdout.write(f"Submitted job {job_id}\n")
        new += not reply.get("duplicate")
    if not (args.json or args.parsable) and new != len(specs):
        sys.stdout.write(f"{new} of {len(specs)} submitted\n")
    return 0


def submit_all(c: Any, path: str, specs: list[tuple[int, JobSpec]]) -> list[Any]:
    """Queue every spec, all or none; a refusal names its line."""
    try:
        jobs = [s.to_dict() for _, s in specs]
        replies: list[Any] = c.call("submit_all", jobs=jobs)["replies"]
    except DaemonError as e:
        m = re.match(r"job (\d+) of \d+: (.*)", str(e), re.S)
        k, why = (int(m.group(1)), m.group(2)) if m else (1, str(e))
        if m is None and len(specs) != 1:
            raise
        n = specs[k - 1][0]
        raise type(e)(e.code, f"{path}:{n}: {why}; nothing was queued") from None
    return replies
