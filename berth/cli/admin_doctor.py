"""`berth admin doctor [--json]`: is this host ready for the system daemon? One line per check,
ok / warn / fail with the fix (berth.admin.checks); exit status 0 (all ok), 1 (a warning) or
2 (a failure). The daemon runs the same checks at start and logs them."""

from __future__ import annotations

import json
import os
import sys

from berth import config
from berth.admin import checks
from berth.admin.verdict import status
from berth.cli.admin_backup import state_dir
from berth.errors import BerthError
from berth.wire import paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = sub.add_parser("doctor", help="check this host for the system daemon: ok, warn, fail + fix")
    d.add_argument("--state-dir", metavar="DIR", help="the daemon's state directory")
    d.add_argument("--json", action="store_true", help="machine-readable output")


def _claims_dir() -> str:
    from berth.claims import paths as claim_paths  # heavy: the ledger's module

    try:
        found = claim_paths.claims_dir(config.get(), create=False)
    except (BerthError, OSError):  # (a config that does not load, a dir refused: its check says)
        return os.environ.get(config.ENV_CLAIMS_DIR) or claim_paths.RUN_DIR
    return found if os.path.exists(found) else claim_paths.RUN_DIR  # (where root makes it)


def _socket() -> str:
    try:
        configured = config.get().system_socket
    except BerthError:
        configured = None
    return os.environ.get(config.ENV_SOCKET) or paths.system_socket(configured)


def run(args: argparse.Namespace) -> int:
    try:
        where = state_dir(args)
    except BerthError:
        where = args.state_dir or paths.SYSTEM_STATE_DIR
    found = checks.run(where, _claims_dir(), _socket())
    if args.json:
        sys.stdout.write(json.dumps({"checks": [c.to_dict() for c in found],
                                     "status": status(found)}) + "\n")  # fmt: skip
    else:
        sys.stdout.write("".join(c.line() + "\n" for c in found))
    return status(found)
