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
(``submit_all``): a bad line, named as ``FILE:LINE:COLUMN``, queues nothing. A file of more
than 10,000 jobs goes in several requests (:mod:`berth.cli.submit_bulk`: in bounded memory,
with a progress line), each all or none: a refusal names its line and says which were queued. With ``--unique``,
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

from berth.cli import submit_bulk
from berth.cli.submit import check_mail, job_spec
from berth.cli.submit_options import add_arguments
from berth.client import Client, DaemonError
from berth.errors import UsageError
from berth.jobsfile import checks, detect, gjs_line
from berth.jobsfile.detect import column

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
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
    return list(each_job(args, path, notes))


def each_job(
    args: argparse.Namespace, path: str | None = None, notes: list[str] | None = None
) -> Iterator[tuple[int, JobSpec]]:
    """:func:`jobs`, one at a time (a file of any length in bounded memory)."""
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
        return _gjs_jobs(args, path, job_lines)
    return _berth_jobs(args, path, job_lines)


def berth_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> list[tuple[int, JobSpec]]:
    return list(_berth_jobs(args, path, job_lines))


_SPECIAL = re.compile(r"['\"\\#]|[^\S \t]")  # what shlex reads unlike str.split


def _berth_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> Iterator[tuple[int, JobSpec]]:
    parser = _parser()
    defaults, given = _given(args, parser)
    environ = dict(os.environ)  # read once for the file, not once a line
    found: set[tuple[Any, ...]] = set()  # programs found (the same command on many lines)
    options: dict[tuple[str, ...], argparse.Namespace] = {}  # lines' options, read once
    for n, text in job_lines:
        where = f"{path}:{n}"
        try:
            words = (
                text.split() if _SPECIAL.search(text) is None else shlex.split(text, comments=True)
            )
        except ValueError as e:
            raise UsageError(f"{where}:{column(text, None)}: {e} in {text.strip()!r}") from None
        parser.where = where
        try:
            line = _parse(parser, words, options)
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
            spec = job_spec(line, environ=environ)
        except UsageError as e:
            raise UsageError(f"{where}:{column(text, str(e))}: {e}") from None
        _check_command(spec, f"{where}:{column(text, (spec.argv or [''])[0])}", found)
        yield n, spec


def _parse(
    parser: Any, words: list[str], options: dict[tuple[str, ...], argparse.Namespace]
) -> argparse.Namespace:
    """A line's words read by submit's parser; the options before its command (up to
    ``--``, or none) are read once for all the lines that give the same ones."""
    if not words or not words[0].startswith("-"):
        i = 0  # no options: the command from the first word
    elif "--" in words:
        i = words.index("--")
    else:  # options, but no `--` to say where they end
        return _parse_all(parser, words)
    key = tuple(words[:i])
    ns = options.get(key)
    if ns is None:
        ns = _parse_all(parser, [*key, "--", "."])
        if ns.argv != ["--", "."]:  # `--` was an option's value: no shortcut
            return _parse_all(parser, words)
        if len(options) < 64:  # (lines that each give their own options: not kept)
            options[key] = ns
    line = argparse.Namespace(**{k: list(v) if type(v) is list else v for k, v in vars(ns).items()})
    line.argv = words[i:]
    return line


def _parse_all(parser: Any, words: list[str]) -> argparse.Namespace:
    line: argparse.Namespace = parser.parse_args(words)
    return line


def _check_command(spec: JobSpec, where: str, found: set[tuple[Any, ...]]) -> None:
    """The command's program exists for the job (unless a setup script may bring it);
    ``found``: what was found already, for the same program, PATH and directory."""
    argv = spec.argv
    if not argv or spec.env_setup:
        return
    key = (argv[0], spec.env.get("PATH"), spec.cwd, spec.conda, spec.env.get("CONDA_EXE"))
    if key in found:
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
    found.add(key)


def gjs_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> list[tuple[int, JobSpec]]:
    """The GPU Job Scheduler's lines as job specs (see the module's docstring)."""
    return list(_gjs_jobs(args, path, job_lines))


def _gjs_jobs(
    args: argparse.Namespace, path: str, job_lines: list[tuple[int, str]]
) -> Iterator[tuple[int, JobSpec]]:
    parser = _parser()
    given = _given(args, parser)[1]
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
            spec = job_spec(ns, environ=env)
        except UsageError as e:
            raise UsageError(f"{where}:{col[4] if len(col) > 4 else 1}: {e}") from None
        yield n, spec


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
    dry = bool(getattr(args, "dry_run", False))  # every line checked, the daemon's too
    spool = submit_bulk.Spool()
    try:
        for n, spec in each_job(args, notes=notes):  # all checked before any is sent
            check_mail(spec)
            spool.add(n, spec.to_dict())
        if dry:
            from berth.cli import submit_dry  # rare: --dry-run

            submit_dry.lines(args.json, spool, _failed(args.file, spool, dry))
        else:
            with Client(timeout=600.0) as c:  # (a request of 10,000 jobs may take a while)
                new = _report(args, submit_bulk.send(c, spool, _failed(args.file, spool)))
    finally:
        spool.close()
    for note in notes:
        sys.stderr.write(note + "\n")
    if dry:
        return 0
    if not (args.json or args.parsable) and new != len(spool):
        sys.stdout.write(f"{new} of {len(spool)} submitted\n")
    return 0


def _report(args: argparse.Namespace, replies: Iterator[dict[str, Any]]) -> int:
    """Say what became of each job, as its reply comes; how many were new."""
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
    return new


def _failed(path: str, spool: submit_bulk.Spool, dry: bool = False) -> Any:
    """The error for a refused request (whose first job is job ``start`` of the file): it
    names the line; the requests before it stay queued, and it says so (``dry``: a dry
    run's, which queued none)."""

    def failed(start: int, e: DaemonError) -> DaemonError:
        m = re.match(r"job (\d+) of \d+: (.*)", str(e), re.S)
        k, why = (int(m.group(1)), m.group(2)) if m else (1, str(e))
        if m is None and len(spool) != 1:
            return e
        if start == 0 or dry:
            after = "nothing was queued"
        else:
            after = (
                f"the first {start} jobs were queued, nothing from line {spool.lines[start]} "
                "on (submit the file again with --unique to queue only the rest)"
            )
        return type(e)(e.code, f"{path}:{spool.lines[start + k - 1]}: {why}; {after}")

    return failed
