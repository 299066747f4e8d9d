"""`berth admin install` and `berth admin uninstall`: the system daemon's files written (or
removed) by berth itself, the systemctl commands shown (or run: --enable, --stop).
What is written, and how berth tells its own files from the admin's: berth.admin.install."""

from __future__ import annotations

import os
import shlex
import sys

from berth.admin import install
from berth.errors import NvmlUnavailable, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

GROUP = "berth-admin"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("install", help="write the system daemon's unit, tmpfiles rule and config")
    p.add_argument("--root", metavar="DIR", help="write under DIR (for review), not /")
    p.add_argument("--dry-run", action="store_true", help="show what it would write; write nothing")
    p.add_argument("--enable", action="store_true",
                   help="run the commands too (groupadd, tmpfiles, systemctl enable --now)")  # fmt: skip
    p.add_argument(
        "--force", action="store_true", help="replace files berth did not write as they are"
    )
    p.add_argument("--admin-group", default=GROUP, metavar="NAME",
                   help=f"the group whose members administer berth (default {GROUP})")  # fmt: skip
    p.add_argument("--gpus", type=int, metavar="N",
                   help="declare N GPUs where no NVIDIA driver answers")  # fmt: skip
    p.add_argument("--berth", metavar="PATH", help="the berth ExecStart runs (default: this one)")
    u = sub.add_parser("uninstall", help="remove what install wrote (never the state or logs)")
    u.add_argument("--root", metavar="DIR", help="under DIR, not /")
    u.add_argument("--dry-run", action="store_true", help="show what it would remove")
    u.add_argument("--stop", action="store_true", help="stop the daemon too (jobs go on)")
    u.add_argument("--force", action="store_true", help="remove files edited since install too")


def berth_command() -> str:
    """The berth running now, as ExecStart should name it."""
    argv0 = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) == "berth" and os.access(argv0, os.X_OK):
        return argv0
    return f"{sys.executable} -m berth"


def _root(args: argparse.Namespace, acting: bool) -> str:
    root = os.path.abspath(args.root) if args.root else "/"
    if args.root and acting:
        raise UsageError(f"--root {args.root!r} writes for review: it cannot be combined with "
                         "--enable or --stop, which act on this machine")  # fmt: skip
    if root == "/" and not args.dry_run and os.geteuid() != 0:
        raise UsageError("installing the system daemon needs root (sudo), or --root DIR to "
                         "write the files for review, or --dry-run")  # fmt: skip
    return root


def _gpus(args: argparse.Namespace) -> list[tuple[int, str, str]]:
    if args.gpus is not None:
        if not 1 <= args.gpus <= 1024:
            raise UsageError(f"--gpus {args.gpus}: give 1 to 1024")
        return []
    from berth.devices import nvml  # heavy: NVML

    try:
        return [(g.index, g.name, g.uuid) for g in nvml.read_all(False, telemetry=False)]
    except NvmlUnavailable:
        return []


def _group_exists(name: str) -> bool:
    import grp  # rare: install

    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def run_install(args: argparse.Namespace) -> int:
    root = _root(args, args.enable)
    berth = args.berth or berth_command()
    if any(c.isspace() for c in berth) and args.berth:
        raise UsageError(f"--berth {berth!r}: give a path without spaces")
    group = args.admin_group
    if not group or any(c.isspace() or c in "\"'\\:" for c in group):
        raise UsageError(f"--admin-group {group!r}: give a group name (letters, digits, -_)")
    found = _gpus(args)
    files = install.plan(berth, install.config_text(found, args.gpus, group))
    states = [(path, text, mode, install.status(install.under(root, path), text))
              for path, text, mode in files]  # fmt: skip
    changed = [install.under(root, p) for p, _, _, s in states if s == "changed"]
    if changed and not args.force:
        raise UsageError(
            "not berth's as it wrote them (edited, or written by someone else): "
            + ", ".join(changed)
            + ". Compare with `berth admin install --dry-run`, then "
            "--force to replace them"
        )
    out = sys.stdout
    said = {"new": "write", "same": "unchanged", "update": "update", "changed": "replace"}
    for path, text, mode, state in states:
        where = install.under(root, path)
        out.write(f"{'would ' if args.dry_run else ''}{said[state]} {where} (mode {mode:o})\n")
        if state != "same":
            out.write("".join(f"    {line}\n" for line in text.splitlines()))
        if not args.dry_run and state == "changed":  # (--force: the admin's file kept aside)
            os.replace(where, where + ".before-berth")
            out.write(f"    (the file it replaces is kept as {where}.before-berth)\n")
        if not args.dry_run and state != "same":
            install.write(where, text, mode)
    if not found and args.gpus is None:
        out.write("note: no NVIDIA driver answered; the config declares no GPUs (--gpus N)\n")
    out.write("why:\n" + "".join(f"  {w}\n" for w in install.WHY))
    commands = [] if _group_exists(group) else [["groupadd", "--system", group]]
    commands += [["systemd-tmpfiles", "--create", install.TMPFILES],
                 ["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", "berth"]]  # fmt: skip
    return _commands(args, commands, args.enable, "then: berth admin doctor")


def _commands(args: argparse.Namespace, commands: list[list[str]], act: bool, last: str) -> int:
    out = sys.stdout
    if not act or args.dry_run:
        out.write("to do" + (" (as root)" if os.geteuid() else "") + ":\n")
        out.write("".join(f"  {shlex.join(c)}\n" for c in commands) + f"{last}\n")
        return 0
    import subprocess  # heavy: --enable/--stop only

    for c in commands:
        out.write(f"$ {shlex.join(c)}\n")
        out.flush()
        done = subprocess.run(c, check=False)
        if done.returncode != 0:
            sys.stderr.write(f"berth admin: {shlex.join(c)} failed (exit {done.returncode})\n")
            return 1
    out.write(f"{last}\n")
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    root = _root(args, args.stop)
    out = sys.stdout
    verb = "would remove" if args.dry_run else "removed"
    if args.stop and not args.dry_run:
        code = _commands(args, [["systemctl", "disable", "--now", "berth"]], True, "")
        if code:
            return code
    for path in (install.UNIT, install.TMPFILES, install.CONFIG):
        where = install.under(root, path)
        state = _uninstall_state(where)
        if state == "absent":
            continue
        if state == "changed" and not args.force:
            out.write(f"kept {where}: edited since install, or not berth's (--force removes it)\n")
            continue
        if not args.dry_run:
            os.unlink(where)
        out.write(f"{verb} {where}\n")
    wants = install.under(root, install.WANTS)
    if os.path.islink(wants) and os.readlink(wants).endswith("/berth.service"):
        if not args.dry_run:
            os.unlink(wants)
        out.write(f"{verb} {wants} (what `systemctl enable` made)\n")
    out.write("kept: the state and the logs (/var/lib/berth), the claims (/run/berth)\n")
    commands = [] if args.stop else [["systemctl", "disable", "--now", "berth"]]
    commands.append(["systemctl", "daemon-reload"])
    return _commands(args, commands, args.stop, "running jobs go on (KillMode=process)")


def _uninstall_state(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return "ours" if install.ours(f.read()) else "changed"
    except FileNotFoundError:
        return "absent"
    except (OSError, UnicodeDecodeError):
        return "changed"
