"""Examples:

  berth web-token                 # your token, and the link that signs this browser in
  curl -H "Authorization: Bearer $(berth web-token)" -X POST \\
       http://127.0.0.1:8765/api/jobs/12/cancel
  berth web-token --json          # {"token", "user", "uid", "url", "login_url", "expires"}
  berth web-token --revoke        # every token of yours made until now stops working

The daemon makes the token for the user who asks (it knows who calls over its socket), so
each user gets their own; with it the dashboard lets you cancel, hold and release your jobs
and read their output. Keep it to yourself like a password. A token expires ([daemon]
web_token_ttl, 12 hours by default); `--revoke` revokes all of yours at once (a new one is
printed). The daemon serves the dashboard only when started with --http (or [daemon] http in
the config).
"""

from __future__ import annotations

import json
import sys

from berth.client import Client

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


FAST_EXIT = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--revoke",
        action="store_true",
        help="revoke every token of yours made until now (then print a new one)",
    )


def run(args: argparse.Namespace) -> int:
    with Client() as c:
        reply = c.call("web_token", revoke=True) if args.revoke else c.call("web_token")
    token = str(reply["token"])
    url = reply.get("url")
    login = f"{url}#token={token}" if url else None
    if args.json:
        out = {k: reply.get(k) for k in ("token", "user", "uid", "url", "expires")}
        out["login_url"] = login
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    if args.revoke:
        sys.stderr.write(
            f"revoked every dashboard token of {reply.get('user')} made until now; a new one:\n"
        )
    sys.stdout.write(token + "\n")
    if sys.stderr.isatty() or sys.stdout.isatty():
        if login:
            sys.stderr.write(f"open {login} to sign in (or paste the token into Sign in)\n")
        elif reply.get("unavailable"):  # its port is held by another process: retried
            sys.stderr.write(f"{reply['unavailable']}; the daemon tries its port again\n")
        else:
            sys.stderr.write(
                "the daemon serves no dashboard: start it with --http (or [daemon] http)\n"
            )
    return 0
