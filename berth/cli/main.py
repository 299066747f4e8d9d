"""The `berth` command: a thin dispatcher that imports only the command it runs.

Each command is a module in ``berth.cli`` exposing::

    def add_arguments(p: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int   # the exit code

Its line in `berth help` is in :data:`COMMANDS` (so the list of commands imports no command
module); long help and examples go in the module docstring, which `berth help CMD` prints.
Errors are raised as ``berth.errors.BerthError``; this module turns them into one line on
stderr and the exit code of their kind.
"""

from __future__ import annotations

import os
import sys

from berth import __version__
from berth.errors import EXIT_USAGE, BerthError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import ModuleType
    from typing import NoReturn

# command -> (its module, its line in `berth help`). A command's module is imported only when
# that command runs (or shows its --help): the list of commands imports none of them.
COMMANDS: dict[str, tuple[str, str]] = {
    "status": ("berth.cli.status", "show GPUs, their processes and who holds them"),
    "select": ("berth.cli.select", "pick idle GPUs and print their ids (for CUDA_VISIBLE_DEVICES)"),
    "run": ("berth.cli.run", "wait for GPUs, claim them, run a command on them"),
    "release": ("berth.cli.release", "end the claims on GPUs (admin; or your own)"),
    "daemon": (
        "berth.cli.daemon",
        "run the job queue daemon (your own, or --system: the machine's; jobs survive restarts)",
    ),
    "submit": ("berth.cli.submit", "queue a job with the daemon (like sbatch)"),
    "queue": ("berth.cli.queue", "list queued and running jobs (like squeue)"),
    "show": ("berth.cli.show", "show one job in full, with its attempts and history"),
    "cancel": ("berth.cli.cancel", "cancel jobs (or send them a signal), like scancel"),
    "logs": ("berth.cli.logs", "print a job's output (its log; --err: its -e file); -f follows it"),
    "attach": (
        "berth.cli.attach",
        "attach to the terminal of a job started with --pty (Ctrl-] detaches)",
    ),
    "wait": ("berth.cli.wait", "wait until jobs end; exit with their outcome"),
    "mcp": ("berth.cli.mcp", "serve berth's commands to a coding agent (MCP, over stdio)"),
    "watch": (
        "berth.cli.watch",
        "queue the lines of a jobs file once each, as they are appended (the GPU Job Scheduler's jobs.txt)",
    ),
    "sweep": (
        "berth.cli.sweep",
        "queue a grid of commands (brace groups are the axes) as one array",
    ),
    "hold": ("berth.cli.hold", "keep pending jobs from starting (berth release-job lets them go)"),
    "release-job": (
        "berth.cli.hold",
        "let held jobs start (they were held by berth hold or submit --hold)",
    ),
    "update": (
        "berth.cli.update",
        "change a pending job: -g, -t, -p, -J, --dependency (like scontrol update)",
    ),
    "resubmit": (
        "berth.cli.resubmit",
        "queue an ended job again, same spec (--cascade: and its failed dependents)",
    ),
    "pause": (
        "berth.cli.pause",
        "drain GPUs: no queued job starts there; running ones go on (survives restarts)",
    ),
    "resume": (
        "berth.cli.pause",
        "let queued jobs use paused GPUs again (--all: and a paused queue)",
    ),
    "report": (
        "berth.cli.report",
        "GPU-hours, waiting and efficiency by user, project, model, day (like sreport)",
    ),
    "admin": (
        "berth.cli.admin",
        "admin: install, doctor, backup; per-user limits, drain, reservations, projects, log",
    ),
    "simulate": (
        "berth.cli.simulate",
        "replay GPU-cluster traces through berth's scheduler; predict start times (--what-if)",
    ),
    "demo": (
        "berth.cli.demo",
        "a one-minute tour of berth (without a GPU it says so and uses logical GPUs)",
    ),
    "web-token": (
        "berth.cli.webtoken",
        "print your token for the web dashboard (actions and logs need it)",
    ),
    "completion": (
        "berth.cli.completion",
        "print a Tab-completion script for bash, zsh or fish (commands, options, job and GPU ids)",
    ),
}

TOPICS: dict[str, str] = {"config": "berth.config", "exit-codes": "berth.errors"}

USAGE = """\
usage: berth [--version] COMMAND [ARGS...]

See GPUs:     status, select
Claim GPUs:   run, release
Queue jobs:   daemon, submit, queue, show, cancel, logs, attach, wait, hold, release-job,
              update, resubmit, pause, resume, watch (a jobs file), sweep (a grid, as one
              array)
Admin:        admin install, uninstall, doctor, backup, restore, limits, drain, undrain,
              reserve, reservations, unreserve, projects, log
Plan:         simulate
Dashboard:    web-token (the dashboard: `berth daemon --http`)
Agents:       mcp (berth's commands as MCP tools for a coding agent)
Try it:       demo
Shell:        completion (Tab completes commands, options, job and GPU ids)

`berth help COMMAND` shows a command's options and examples; `berth help config` the config
file and environment variables; `berth help exit-codes` what the exit codes mean.
"""


def _import(dotted: str) -> ModuleType:
    """importlib.import_module(dotted) for an absolute name, without importing importlib
    (and its warnings: ~0.5 ms of every start)."""
    __import__(dotted)
    return sys.modules[dotted]


def _load(name: str) -> ModuleType:
    module = _import(COMMANDS[name][0])
    if name in ("submit", "sweep", "queue", "show", "cancel", "logs", "wait"):  # --backend
        from berth.cli.backend import wrap  # only for these: it reads the config

        module = wrap(name, module)
    return module


def _columns() -> int:
    """Terminal width for help text, without argparse's `shutil` import (which drags in
    bz2/lzma: milliseconds on every command, since argparse builds a formatter per option)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 80


def _parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    import argparse  # not for `berth help` nor --version

    class Formatter(argparse.RawDescriptionHelpFormatter):
        def __init__(
            self,
            prog: str,
            indent_increment: int = 2,
            max_help_position: int = 24,
            width: int | None = None,
        ) -> None:
            width = _columns() - 2 if width is None else width
            super().__init__(prog, indent_increment, max_help_position, width)

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            super().error(message + dash_hint(message, sys.argv))

    p = Parser(
        prog=f"berth {name}",
        description=COMMANDS.get(name, ("", ""))[1],
        epilog=module.__doc__,
        formatter_class=Formatter,
    )
    module.add_arguments(p)
    return p


def dash_hint(message: str, argv: Sequence[str]) -> str:
    """For argparse's "argument --mem: expected one argument" where the value began with '-'
    (``--mem -1G``): the value it did not take, and how to give it."""
    head, _, tail = message.partition(": ")
    if not head.startswith("argument ") or tail != "expected one argument":
        return ""
    flags = head.removeprefix("argument ").split("/")
    for i, word in enumerate(argv[:-1]):
        if word in flags and argv[i + 1].startswith("-"):
            return f" (not {argv[i + 1]!r}: give a value starting with '-' as {word}={argv[i + 1]})"
    return ""


def _quick(name: str, module: ModuleType, rest: list[str]) -> argparse.Namespace | None:
    """The command line read without building the parser, where the command offers that
    (``quick_args``: submit's common form, :mod:`berth.cli.quickargs`), else None. A script
    named as the command (its #BERTH/#SBATCH lines) goes to the parser."""
    reader = getattr(module, "quick_args", None)
    parsed: argparse.Namespace | None = reader(rest) if reader is not None else None
    if parsed is not None and name == "submit" and _names_a_file(getattr(parsed, "argv", None)):
        return None
    return parsed


def _help(topic: str | None, more: list[str] | None = None) -> int:
    if topic is None:
        sys.stdout.write(USAGE)
        width = max(len(n) for n in COMMANDS)
        sys.stdout.write("\ncommands:\n")
        for name, (_, text) in COMMANDS.items():
            sys.stdout.write(f"  {name:<{width}}  {text}\n")
        return 0
    if topic in TOPICS:
        doc = _import(TOPICS[topic]).__doc__ or ""
        sys.stdout.write(plain(doc).strip() + "\n")
        return 0
    if topic in COMMANDS:
        parser = _parser(topic, _load(topic))
        for k, word in enumerate(more or []):  # an action's own: `berth help admin limits`
            parser = _action(parser, word, " ".join([topic, *(more or [])[:k]]))
        parser.print_help()
        return 0
    raise UsageError(f"no help for {topic!r}: try `berth help` for the list of commands and topics")


def _action(parser: argparse.ArgumentParser, word: str, what: str) -> argparse.ArgumentParser:
    """The parser of ``word``, an action (subcommand) of ``parser`` (the command ``what``)."""
    names: list[str] = []
    for a in parser._actions:
        if isinstance(a.choices, dict):  # (the subcommands: name -> parser)
            if word in a.choices:
                sub: argparse.ArgumentParser = a.choices[word]
                return sub
            names += a.choices
    have = f": its actions are {', '.join(names)}" if names else ": it has no actions"
    raise UsageError(f"no help for {what} {word!r}{have}; see `berth help {what}`")


def _names_a_file(argv: list[str] | None) -> bool:
    """Whether a command's first word is a file here (a script, maybe with directives)."""
    words = (argv or [])[1:] if (argv or [])[:1] == ["--"] else argv or []
    return bool(words) and os.path.isfile(words[0])


def plain(doc: str) -> str:
    """A docstring as a person reads it in a terminal: reStructuredText's markup gone
    (````x```` -> ```x```, ``:mod:`x``` -> ``x``, a paragraph's closing ``::`` -> ``:``)."""
    import re  # rare: `berth help TOPIC`

    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    doc = doc.replace("``", "`")
    return re.sub(r"(?m)(\S)::$", r"\1:", doc)


def _fast_exit(code: int) -> None:
    """End a read-only command without interpreter teardown (several ms of module and object
    finalisation that `berth select` in a shell loop would pay every time). Only commands that
    hold nothing (no claim, no child, no database) set ``FAST_EXIT = True``; atexit handlers
    are skipped, which for them is only NVML's shutdown (the driver cleans up at exit)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in ("-h", "--help"):
            return _help(None)
        if args[0] in ("-V", "--version"):
            from berth.build_info import describe  # rare: --version (git, or the build stamp)

            sys.stdout.write(f"berth {__version__} ({describe()})\n")
            return 0
        name, rest = args[0], args[1:]
        if name == "help":
            return _help(rest[0] if rest else None, rest[1:])
        if name == "__complete":  # (hidden: what Tab offers; berth/cli/completion.py's scripts)
            from berth.cli.complete import answer  # rare: a shell's Tab

            return answer(rest)
        if name not in COMMANDS:
            sys.stderr.write(f"berth: unknown command {name!r}; `berth help` lists the commands\n")
            return EXIT_USAGE
        module = _load(name)
        parsed = _quick(name, module, rest)
        if parsed is None:
            parser = _parser(name, module)
            parsed = parser.parse_args(rest)
            if name == "submit" and _names_a_file(getattr(parsed, "argv", None)):
                from berth.jobsfile import directives  # rare: a script's #BERTH/#SBATCH lines

                parsed = directives.apply(parser, rest, parsed)
        parsed.command = name
        code: int = module.run(parsed)
        if argv is None and getattr(module, "FAST_EXIT", False):
            _fast_exit(code)
        return code
    except BerthError as e:
        said = str(e)  # ("berth submit: ..." names itself: no second "berth: " before it)
        sys.stderr.write(f"{said}\n" if said.startswith("berth ") else f"berth: {said}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("berth: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
