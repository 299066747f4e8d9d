"""``berth submit --file FILE``: one job per line, as a jobs file of seed 002 (or a list of
commands) is written. Each line is ``[submit options] [--] command args``, split as a shell
would (quotes, ``#`` comments) but never run by one; options on berth's own command line apply
to every line, and a line's own options win. Every line is checked before anything is
submitted: a bad line submits nothing. (The daemon may still refuse a line for what only it
knows, e.g. a GPU id this machine lacks: that line is named, the others are queued, and the
exit status is 1.) With ``--unique``, submitting the file again after appending lines queues
only the new ones (and the ones whose last run failed).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def _lines(path: str) -> list[tuple[int, list[str]]]:
    import shlex

    from berth.errors import UsageError

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read --file {path!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--file {path!r} is not UTF-8 text") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise UsageError(f"{path}:{n}: {e} in {line.strip()!r}") from None
        if words:
            out.append((n, words))
    return out


def _parser() -> Any:
    """submit's parser, raising (naming the line in ``where``) instead of exiting; built once
    for the whole file."""
    import argparse

    from berth.cli.submit import add_arguments
    from berth.errors import UsageError

    class Parser(argparse.ArgumentParser):
        where = ""

        def error(self, message: str) -> Any:  # not exit: say which line
            raise UsageError(f"{self.where}: {message}")

    p = Parser(prog="berth submit --file", add_help=False)
    add_arguments(p)
    return p


def jobs(args: argparse.Namespace) -> list[tuple[int, dict[str, Any]]]:
    """(line number, job spec) of every line (the command line's options under its own)."""
    from berth.cli.submit import build_job
    from berth.errors import UsageError

    parser = _parser()
    defaults = vars(parser.parse_args([]))
    given = {k: v for k, v in vars(args).items() if k in defaults and v != defaults[k]}
    given.pop("argv", None)
    given.pop("file", None)
    out = []
    for n, words in _lines(args.file):
        where = parser.where = f"{args.file}:{n}"
        line = parser.parse_args(words)
        for k, v in given.items():
            if getattr(line, k) == defaults[k]:
                setattr(line, k, v)
        if line.file or line.wait or line.interactive:
            raise UsageError(f"{where}: --file, --wait and -i are not for a line of a file")
        try:
            out.append((n, build_job(line)))
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    if not out:
        raise UsageError(f"--file {args.file!r} has no job (one command per line)")
    return out


def run(args: argparse.Namespace) -> int:
    from berth.client import Client
    from berth.errors import UsageError

    if args.wait or args.interactive or args.argv or args.wrap:
        raise UsageError(
            "--file takes the commands from the file: no command, --wrap, --wait or -i"
        )
    from berth.client import DaemonError

    specs = jobs(args)  # all checked before any is sent
    replies = []
    refused = 0
    with Client() as c:
        for _, spec in specs:  # pipelined: one round trip for the whole file
            c.send("submit", job=spec)
        for n, _ in specs:
            try:
                replies.append(c.receive())
            except DaemonError as e:
                sys.stderr.write(f"berth: {args.file}:{n}: {e}\n")
                refused += 1
    new = 0
    for reply in replies:
        job_id = reply["job_id"]
        if args.json:
            import json

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
    return 1 if refused else 0
