"""The `berth` command: a thin dispatcher that imports only the command it runs.

Each command is a module in ``berth.cli`` exposing::

    HELP: str                                  # one line for `berth help`
    HELPS: dict[str, str]                      # (optional) per command, if one serves several
    def add_arguments(p: argparse.ArgumentParser) -> None
    def run(args: argparse.Namespace) -> int   # the exit code

Long help and examples go in the module docstring; `berth help CMD` prints it.
Errors are raised as ``berth.errors.BerthError``; this module turns them into one line on
stderr and the exit code of their kind.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import ModuleType

# command -> module; module import happens only for the command being run.
COMMANDS: dict[str, str] = {
    "status": "berth.cli.status",
    "select": "berth.cli.select",
    "run": "berth.cli.run",
    "release": "berth.cli.release",
    "daemon": "berth.cli.daemon",
    "submit": "berth.cli.submit",
    "queue": "berth.cli.queue",
    "show": "berth.cli.show",
    "cancel": "berth.cli.cancel",
    "logs": "berth.cli.logs",
    "attach": "berth.cli.attach",
    "wait": "berth.cli.wait",
    "watch": "berth.cli.watch",
    "sweep": "berth.cli.sweep",
    "hold": "berth.cli.hold",
    "release-job": "berth.cli.hold",
    "pause": "berth.cli.pause",
    "resume": "berth.cli.pause",
    "admin": "berth.cli.admin",
    "simulate": "berth.cli.simulate",
    "demo": "berth.cli.demo",
    "web-token": "berth.cli.webtoken",
}

TOPICS: dict[str, str] = {"config": "berth.config", "exit-codes": "berth.errors"}

USAGE = """\
usage: berth [--version] COMMAND [ARGS...]

See GPUs:     status, select
Claim GPUs:   run, release
Queue jobs:   daemon, submit, queue, show, cancel, logs, attach, wait, hold, release-job,
              pause, resume, watch (a jobs file), sweep (a grid, as one array)
Admin:        admin limits, admin drain, admin undrain
Plan:         simulate
Dashboard:    web-token (the dashboard: `berth daemon --http`)
Try it:       demo

`berth help COMMAND` shows a command's options and examples; `berth help config` the config
file and environment variables; `berth help exit-codes` what the exit codes mean.
"""


def _load(name: str) -> ModuleType:
    import importlib

    module = importlib.import_module(COMMANDS[name])
    if name in ("submit", "sweep", "queue", "show", "cancel", "logs", "wait"):  # --backend
        from berth.cli.backend import wrap

        module = wrap(name, module)
    return module


def _columns() -> int:
    """Terminal width for help text, without argparse's `shutil` import (which drags in
    bz2/lzma: milliseconds on every command, since argparse builds a formatter per option)."""
    import os

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 80


def _parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    import argparse

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

    p = argparse.ArgumentParser(
        prog=f"berth {name}",
        description=_one_line(name, module),
        epilog=module.__doc__,
        formatter_class=Formatter,
    )
    module.add_arguments(p)
    return p


def _one_line(name: str, module: object) -> str:
    """The command's line in `berth help` (a module serving two commands may say each)."""
    helps = getattr(module, "HELPS", None) or {}
    return str(helps.get(name) or getattr(module, "HELP", ""))


def _help(topic: str | None) -> int:
    if topic is None:
        sys.stdout.write(USAGE)
        available = []
        for name in COMMANDS:
            try:
                available.append((name, _one_line(name, _load(name))))
            except ImportError:
                continue
        width = max(len(n) for n, _ in available) if available else 0
        sys.stdout.write("\ncommands:\n")
        for name, text in available:
            sys.stdout.write(f"  {name:<{width}}  {text}\n")
        return 0
    if topic in TOPICS:
        import importlib

        sys.stdout.write((importlib.import_module(TOPICS[topic]).__doc__ or "").strip() + "\n")
        return 0
    if topic in COMMANDS:
        _parser(topic, _load(topic)).print_help()
        return 0
    from berth.errors import UsageError

    raise UsageError(
        f"no help for {topic!r}: try `berth help` for the list of commands and topics"
    )


def _fast_exit(code: int) -> None:
    """End a read-only command without interpreter teardown (several ms of module and object
    finalisation that `berth select` in a shell loop would pay every time). Only commands that
    hold nothing (no claim, no child, no database) set ``FAST_EXIT = True``; atexit handlers
    are skipped, which for them is only NVML's shutdown (the driver cleans up at exit)."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    from berth.errors import EXIT_USAGE, BerthError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in ("-h", "--help"):
            return _help(None)
        if args[0] in ("-V", "--version"):
            from berth import __version__

            sys.stdout.write(f"berth {__version__}\n")
            return 0
        name, rest = args[0], args[1:]
        if name == "help":
            return _help(rest[0] if rest else None)
        if name not in COMMANDS:
            sys.stderr.write(
                f"berth: unknown command {name!r}; `berth help` lists the commands\n"
            )
            return EXIT_USAGE
        module = _load(name)
        parsed = _parser(name, module).parse_args(rest)
        parsed.command = name
        code: int = module.run(parsed)
        if argv is None and getattr(module, "FAST_EXIT", False):
            _fast_exit(code)
        return code
    except BerthError as e:
        sys.stderr.write(f"berth: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("berth: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
