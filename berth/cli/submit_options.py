"""The options of `berth submit` (shared by `berth watch`, `sweep` and jobs files' lines), and
the readings only options need: the time limit (``-t`` as sbatch, ``--time-limit`` as
mgpu_srun) and ``--dependency``.

The options are declared once, as data (:func:`declared`: each option's flags and
``add_argument``'s keywords): :func:`add_arguments` gives them to argparse, and
:mod:`berth.cli.quickargs` reads submit's common form from the same list without importing
argparse (issue 21: argparse, gettext and ``re`` are most of submit's start-up)."""

from __future__ import annotations

import os
import sys

from berth.errors import UsageError
from berth.units import MAX_TIME_LIMIT, NO_LIMIT, parse_duration, parse_slurm_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

# One option: its flags (or a positional's name) and add_argument's keywords.
Option = tuple[tuple[str, ...], dict[str, object]]


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter without ``shutil`` (it imports bz2, lzma... to read the terminal
    width when a parser is merely built); help uses $COLUMNS or 100 columns."""
    import argparse  # (only to build a parser: --help, errors, the unusual forms)

    width = int(os.environ.get("COLUMNS", "0") or 0) or 100
    return argparse.RawDescriptionHelpFormatter(prog, width=width - 2)


def add_arguments(p: argparse.ArgumentParser, command: bool = True) -> None:
    """submit's options (``command``: and the command after them; `berth watch` takes its
    commands from a file), as :func:`declared` says."""
    p.formatter_class = _formatter
    _glue(p)
    for flags, kw in declared(command, dry_run="--dry-run" not in p._option_string_actions):
        p.add_argument(*flags, **kw)  # type: ignore[arg-type]


def declared(command: bool = True, dry_run: bool = True) -> list[Option]:
    """submit's options, in order, as ``(flags, add_argument's keywords)`` (``dry_run``:
    with --dry-run; `berth sweep` has its own)."""
    out: list[Option] = []

    def a(*flags: str, **kw: object) -> None:
        out.append((flags, kw))

    a(
        "-g",
        "--gpus",
        "--count",
        dest="gpus",
        help="GPUs: an integer, a fraction below 1 (0.5), or 0 (CPU only: a CPU slot); "
        "default 1, or every GPU of --gpu-ids",
    )
    a("--mem", help="GPU memory per GPU the job needs, e.g. 12G or 8000 (MiB)")
    a("-N", "--nodes", type=int, default=1, metavar="N",
      help="Slurm: run across N nodes, -g GPUs on each; the command runs under srun, once "
      "per task (docs/slurm.md)")  # fmt: skip
    a("--ntasks-per-node", type=int, metavar="N",
      help="Slurm: srun tasks per node (default 1)")  # fmt: skip
    a(
        "-t",
        "--time",
        dest="time",
        help="time limit as sbatch reads it: a bare number is MINUTES (90 = 1:30:00); also "
        "MM:SS, H:MM:SS, D-HH[:MM[:SS]], or with a unit: 90s, 15m, 2h "
        "(at most the daemon's --max-job-time)",
    )
    a(
        "--time-limit",
        metavar="SECONDS",
        dest="time_limit",
        help="time limit in SECONDS, as mgpu_srun's --time-limit (90 = 1:30); not with -t",
    )
    _where(a)
    _behaviour(a, command, dry_run)
    return out


def _where(a: Any) -> None:
    """What the job is called, where it runs, on which GPUs, with what around it."""
    a("-J", "--job-name", help="job name (default: the command)")
    a("-p", "--priority", type=int, default=0, help="higher runs first (default 0)")
    a(
        "--gpu-ids",
        metavar="IDS",
        help="these GPUs, e.g. 0,1 or 0-3: all of them, or -g N out of them",
    )
    a("--prefer", metavar="IDS", help="take these GPUs first when several qualify, e.g. 3")
    a("--gpu-name", help="only GPUs whose name contains this (e.g. A100)")
    a("-o", "--output", help="stdout file (%%j = job id)")
    a("-e", "--error", help="stderr file (%%j = job id)")
    a("-D", "--chdir", help="working directory (default: the current one)")
    a(
        "--env-setup",
        "--env-setup-cmd",
        dest="env_setup",
        help='shell setup run before the command, e.g. "source venv/bin/activate"',
    )
    a("--conda", help="conda environment to activate")
    a("--export", default="ALL", help="environment to pass: ALL (default), NONE, or VAR,VAR")
    a("-d", "--dependency", metavar="EXPR",
      help="start after other jobs, as sbatch: afterok:ID[:ID...], afterany:, afternotok:, "
      "after:ID[+MIN], singleton; ',' all of, '?' any of; ID 12, 12_3 or @ (your last job)")  # fmt: skip
    a("-A", "--project", "--account", dest="project", metavar="NAME",
      help="charge the job to project NAME (Slurm's account; docs/admin.md \"Projects\")")  # fmt: skip



def _behaviour(a: Any, command: bool, dry_run: bool) -> None:
    """What happens around the job, and how submit answers."""
    a("--retries", type=int, default=0, help="retry a failed job N times (backoff doubles)")
    a("--retry-oom", action="store_true",
      help="if it dies of CUDA out of memory (its log says so), queue it once more with a "
      "whole GPU (docs/daemon.md \"Learned memory\")")  # fmt: skip
    a("--no-learned-mem", action="store_true",
      help="without -g and --mem, a whole GPU, not a share sized by earlier runs of the job")  # fmt: skip
    a(
        "--requeue",
        action="store_true",
        default=None,
        help="at the time limit, requeue it at the end of the queue instead of TIMEOUT "
        "(mgpu_srun's context switch; default: as the daemon says, --on-time-limit)",
    )
    a("--no-requeue", dest="requeue", action="store_false", help="at the time limit: TIMEOUT")
    a(
        "--max-requeues",
        type=int,
        metavar="N",
        help="requeue at the time limit at most N times, then TIMEOUT (implies --requeue)",
    )
    a("--hold", action="store_true", help="queue it held (`berth release-job ID` to start)")
    a(
        "--begin",
        metavar="TIME",
        help="not before TIME (as sbatch): now+2h, 14:00 (today, else tomorrow), "
        "2026-12-01T09:00",
    )
    a("--pty", action="store_true", help="run under a pseudo-terminal (for `berth attach`)")
    a("--keep-idle", action="store_true",
      help="never released for idle GPUs (where the admin allows: docs/admin.md)")  # fmt: skip
    a(
        "--unique",
        action="store_true",
        help="not if the same job is queued, running or completed (prints its id instead)",
    )
    a(
        "--requirements",
        metavar="FILE",
        help="GPUs per --llm model (the GPU Job Scheduler's llm_config.json), when -g is not given",
    )
    a(
        "--inject-arg",
        metavar="OPT[=job|machine]",
        help="set the command's option OPT (--cuda) to the job's GPU ids: as it sees them "
        "(0..n-1, default) or the machine's",
    )
    a("--notify", metavar="CMD", help="run this shell command as you when the job has ended")
    a("--mail-user", metavar="ADDR", help="mail ADDR when the job has ended (local sendmail)")
    a("--mail-type", metavar="TYPES",
      help="when --mail-user is mailed: BEGIN, END, FAIL, REQUEUE, ALL or NONE, comma-separated "
      "(as sbatch; default END,FAIL: every end)")  # fmt: skip
    a("--wrap", help="a shell command string, run by /bin/sh -c")
    a("--wait", action="store_true", help="wait for the job to end; exit with its status")
    a("-i", "--interactive", action="store_true", help="stream its output; Ctrl-C detaches")
    a("--file", metavar="FILE", help="one job per line of FILE: [options] [--] command")
    a("--parsable", action="store_true", help="print only the job id")
    if dry_run:  # (`berth sweep` has its own)
        a(
            "--dry-run",
            action="store_true",
            help="run every check (the daemon's too) and say what would be queued; queue nothing",
        )
    a("--json", action="store_true", help="machine-readable output")
    if command:
        a("argv", nargs="...", metavar="COMMAND", help="the command and its arguments (after --)")


def _glue(p: argparse.ArgumentParser) -> None:
    """``--inject-arg --cuda``: argparse takes a value that starts with ``-`` for an option
    and refuses it; before the command (``--``, or the first word that is not an option or an
    option's value) it is read as ``--inject-arg=--cuda``."""
    parse = p.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        out: list[str] = []
        i = 0
        while i < len(words):
            w = words[i]
            if w == "--inject-arg" and i + 1 < len(words):
                out.append("--inject-arg=" + words[i + 1])
                i += 2
                continue
            if w == "--" or not w.startswith("-"):  # the command starts here
                out += words[i:]
                break
            out.append(w)
            i += 1
            action = p._option_string_actions.get(w)
            if action is not None and action.nargs != 0 and i < len(words):  # its value
                out.append(words[i])
                i += 1
        return parse(out, namespace)

    setattr(p, "parse_known_args", parse_known_args)  # noqa: B010


def time_limit(args: argparse.Namespace) -> float | None:
    """The job's time limit in seconds from ``-t`` (sbatch's reading: a bare number is
    minutes) or ``--time-limit`` (mgpu_srun's: seconds); None for none."""
    given = getattr(args, "time", None)
    seconds = getattr(args, "time_limit", None)
    if given and seconds:
        raise UsageError(
            f"-t {given!r} and --time-limit {seconds!r} both set a time limit: give one "
            "(-t 90 is 90 minutes, as in sbatch; --time-limit 90 is 90 seconds, as in mgpu_srun)"
        )
    if given:
        what, limit = "-t/--time", parse_slurm_time(given)
    elif seconds:
        what, limit = "--time-limit", parse_duration(seconds, what="--time-limit")
    else:
        return None
    typed = given or seconds
    if limit <= 0:
        raise UsageError(f"invalid {what} {typed!r}: must be positive")
    if limit > MAX_TIME_LIMIT and str(typed).strip().lower() not in NO_LIMIT:  # (1e400: inf)
        raise UsageError(
            f"invalid {what} {typed!r}: at most {MAX_TIME_LIMIT / 86400:.0f} days; leave it "
            "out for no limit"
        )
    return None if limit == float("inf") else limit


# Options that mean nothing given empty ('' from a script's unset variable): what to do instead.
_NOT_EMPTY = (
    ("-J/--job-name", "job_name", "give the job a name, or leave -J out (the command names it)"),
    ("-A/--project", "project", "name a project, or leave -A out"),
    ("--gpu-name", "gpu_name", "give part of a GPU's name (e.g. A100), or leave it out"),
    ("-D/--chdir", "chdir", "give a directory, or leave -D out (the current one)"),
    ("-o/--output", "output", "give a file, or leave -o out"),
    ("-e/--error", "error", "give a file, or leave -e out"),
    ("--conda", "conda", "name a conda environment, or leave --conda out"),
    ("-t/--time", "time", "give a time limit (2h, 1:30:00), or leave -t out for none"),
    ("--time-limit", "time_limit", "give seconds (or 2h), or leave it out for no limit"),
    ("--begin", "begin", "give a time (now+2h, 14:00), or leave --begin out to start at once"),
    ("--env-setup", "env_setup", "give a shell line, or leave --env-setup out"),
    ("--prefer", "prefer", "name GPUs (0,2), or leave --prefer out"),
    ("--inject-arg", "inject_arg", "name an option of your command (--cuda), or leave it out"),
    ("--notify", "notify", "give a command, or leave --notify out"),
    ("--mail-user", "mail_user", "give an address, or leave --mail-user out"),
    ("--export", "export", "give ALL, NONE or VAR,VAR (NONE for none)"),
)


def check_places(args: argparse.Namespace, cwd: str) -> None:
    """Refuse, before anything is queued, an option given empty, an ``--export`` name that is
    none (``VAR=1``: the job ran without it), a ``-D`` that is no directory and an
    ``-o``/``-e`` that is one (the job would only fail when it starts)."""
    for flag, key, todo in _NOT_EMPTY:
        if getattr(args, key, None) == "":
            raise UsageError(f"{flag} '': empty; {todo}")
    export = getattr(args, "export", None) or "ALL"
    if export.upper() not in ("ALL", "NONE"):
        for name in export.split(","):
            if not name.strip().replace("_", "a").isalnum() or name.strip()[:1].isdigit():
                raise UsageError(
                    f"--export {export!r}: {name.strip()!r} is not a variable's name; give "
                    "ALL, NONE or names (VAR,VAR), and set a value in your shell (VAR=1 berth ...)"
                )
    chdir = getattr(args, "chdir", None)
    if chdir and not os.path.isdir(cwd):
        why = "is not a directory" if os.path.exists(cwd) else "does not exist"
        raise UsageError(f"-D/--chdir {chdir!r} {why}; give an existing directory")
    for flag, key in (("-o/--output", "output"), ("-e/--error", "error")):
        path = getattr(args, key, None)
        if path and "%" not in path and os.path.isdir(os.path.join(cwd, path)):
            raise UsageError(
                f"{flag} {path!r} is a directory; give a file in it, e.g. "
                f"{os.path.join(path, '%j.out')}"
            )
