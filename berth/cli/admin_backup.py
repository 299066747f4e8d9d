"""`berth admin backup [PATH]` and `berth admin restore PATH`: a consistent copy of the
daemon's state database while it runs (with an index of the users' logs), and putting one
back while it is stopped (berth.admin.backup says how)."""

from __future__ import annotations

import json
import os
import sys
import time

from berth import config
from berth.cli.escape import shown
from berth.wire import paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = sub.add_parser("backup", help="copy the daemon's state (consistent, while it runs)")
    b.add_argument("path", nargs="?", help="the copy (a file, or a directory for it); "
                   "default STATE_DIR/backups/berth-DATE.db")  # fmt: skip
    b.add_argument("--state-dir", metavar="DIR", help="the daemon's state directory")
    b.add_argument("--json", action="store_true", help="machine-readable output")
    r = sub.add_parser("restore", help="put a backup in place (the daemon stopped)")
    r.add_argument("path", help="a file `berth admin backup` wrote")
    r.add_argument("--state-dir", metavar="DIR", help="the daemon's state directory")
    r.add_argument("--json", action="store_true", help="machine-readable output")


def state_dir(args: argparse.Namespace) -> str:
    """--state-dir, else $BERTH_STATE_DIR, else root's: the system daemon's; a user's: their
    own daemon's."""
    if args.state_dir:
        given: str = args.state_dir
        return os.path.abspath(given)
    cfg = config.get()
    if os.environ.get(config.ENV_STATE_DIR) or os.geteuid() != 0:
        return paths.state_dir(cfg.state_dir)
    system: str = cfg.system_state_dir or paths.SYSTEM_STATE_DIR
    return system


def run(args: argparse.Namespace) -> int:
    from berth.admin import backup  # heavy (sqlite3): backup and restore only

    where = state_dir(args)
    if args.action == "backup":
        dest = args.path or os.path.join(where, "backups", "")
        if dest.endswith(os.sep) or os.path.isdir(dest):
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            dest = os.path.join(dest, f"berth-{stamp}.db")
        made = backup.backup(where, os.path.abspath(dest))
        _say(args, made, _backed_up)
        return 0
    done = backup.restore(where, os.path.abspath(args.path))
    _say(args, done, _restored)
    return 0


def _say(args: argparse.Namespace, reply: dict[str, Any], text: Any) -> None:
    sys.stdout.write(json.dumps(reply) + "\n" if args.json else text(reply))


def _backed_up(r: dict[str, Any]) -> str:
    return (
        f"backed up {shown(r['source'])} (schema {r['schema']}, {r['jobs']} job(s)) to "
        f"{shown(r['backup'])}, with an index of {r['logs']} log file(s); copy the logs "
        "themselves with their owners (rsync -a STATE_DIR/logs)\n"
    )


def _restored(r: dict[str, Any]) -> str:
    out = f"restored {shown(r['restored'])} from {shown(r['from'])} (schema {r['schema']}, "
    out += f"{r['jobs']} job(s))\n"
    if r["moved_aside"]:
        out += f"the database it replaced is kept as {shown(r['moved_aside'])}\n"
    missing = r["missing_logs"]
    if missing:
        some = ", ".join(shown(m) for m in missing[:5]) + (" ..." if len(missing) > 5 else "")
        out += f"{len(missing)} log file(s) of the backup's index are missing now: {some}\n"
    return out + "start the daemon (systemctl start berth): it adopts what still runs\n"
