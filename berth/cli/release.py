"""End the claims on some GPUs: SIGTERM their holders, SIGKILL after a grace period.

For the admin (root, or a member of [claims] admin_group in the config): any claim. Anyone
else may end only their own claims, and is refused (exit 4) if another user holds one of the
GPUs. A claim the daemon made for a running queue job is ended by cancelling that job
through the daemon (which says who may), never by signalling anything. Asks for
confirmation unless --yes; with no terminal to ask on (stdin not one, and no answer piped
in), it does nothing and says to add -y (exit 2). Someone who may not end a claim or job is
refused (exit 4) before being asked anything.

examples:
  berth release 2                 end whoever holds GPU 2 (asks first)
  berth release 0 2 --yes         scheduler.py's `scheduler.py -rg 0 2`
  berth release GPU-8e4c --grace 30
"""

from __future__ import annotations

import os
import re
import sys

from berth import config
from berth.claims.admin import end_claims, end_waiters, holder_pids, is_admin, wait_ended
from berth.claims.ledger import Ledger, user_name
from berth.devices import read_gpus
from berth.errors import BerthError, Refused, UsageError
from berth.selection.choose import matches
from berth.units import KILL_AFTER, parse_duration, parse_gpu_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from berth.claims.ledger import ClaimInfo, WaiterInfo
    from berth.client import Client

_JOB_LABEL = re.compile(r"berth job (\d+) ")  # what the daemon labels its jobs' claims


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("gpus", nargs="+", metavar="GPU", help="GPU indices (0 2, 0-3) or UUIDs")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--grace", default="10", metavar="S", help="seconds between SIGTERM and SIGKILL (10)"
    )


def _resolve(ids: list[str]) -> dict[str, int | None]:
    """uuid -> index for the GPUs named (indices or UUIDs/prefixes)."""
    snaps = read_gpus(config.get(), process_details=False)
    out: dict[str, int | None] = {}
    for ident in ids:
        hits = [g for g in snaps if matches(g, ident.strip())]
        if len(hits) != 1:
            have = ", ".join(str(g.index) for g in snaps) or "none"
            why = "no such GPU" if not hits else "ambiguous"
            raise UsageError(f"berth release {ident}: {why} (GPUs: {have})")
        out[hits[0].uuid] = hits[0].index
    return out


def _server_uid(client: Client) -> int:
    import socket  # rare: a queue job's claim (SO_PEERCRED says who serves the daemon)
    import struct  # rare: as socket

    with socket.socket(fileno=os.dup(client.fileno())) as sock:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int(struct.unpack("3i", raw)[1])


def _queue_jobs(claims: list[ClaimInfo]) -> tuple[Client | None, dict[int, dict[str, Any]]]:
    """The daemon and the running jobs it made ``claims`` for (job id -> job): claims whose
    file belongs to the user the daemon runs as, labelled by it with the job's id (the job
    cannot rewrite its claim file: it holds it read-only)."""
    ids = {int(m.group(1)) for c in claims if (m := _JOB_LABEL.match(c.label or ""))}
    if not ids:
        return None, {}
    from berth.client import Client  # rare: a queue job's claim

    try:
        client = Client(timeout=10)
    except BerthError:
        return None, {}
    try:
        uid = _server_uid(client)
        theirs = {
            int(m.group(1))
            for c in claims
            if c.uid == uid and (m := _JOB_LABEL.match(c.label or ""))
        }
        jobs = {}
        for i in sorted(theirs):
            job = client.call("show", job_id=i)["job"]
            if job.get("state") == "RUNNING":
                jobs[i] = job
    except BerthError:
        client.close()
        return None, {}
    if not jobs:
        client.close()
        return None, {}
    return client, jobs


def _job_of(c: ClaimInfo, jobs: dict[int, dict[str, Any]]) -> int | None:
    m = _JOB_LABEL.match(c.label or "")
    return int(m.group(1)) if m and int(m.group(1)) in jobs else None


def _lines(
    gpus: dict[str, int | None],
    direct: list[ClaimInfo],
    queued: list[ClaimInfo],
    jobs: dict[int, dict[str, Any]],
    waiters: list[WaiterInfo],
) -> list[str]:
    """What is to end, one line each."""
    out = [
        f"  GPU {gpus[c.uuid]}: {c.user} pid {','.join(map(str, c.pids)) or '?'} "
        f"share {c.share:g}: {c.command or '?'}"
        for c in direct
    ]
    for c in queued:
        j = _job_of(c, jobs)
        out.append(f"  GPU {gpus[c.uuid]}: job {j} of {jobs[j or 0].get('user')} (the queue): "
                   f"{c.command or '?'}")  # fmt: skip
    for w in waiters:
        mine = ",".join(str(gpus[u]) for u, _, _ in w.wanted if u in gpus)
        out.append(
            f"  GPU {mine}: waiter of {user_name(w.uid)} pid {w.pid or '?'}, wants "
            f"{w.want or '?'}" + (" (reserves nothing now)" if w.stale else "")
        )
    return out


def _refuse_others_jobs(jobs: dict[int, dict[str, Any]], me: str, group: str | None) -> None:
    """A user who is not the admin may cancel only their own queue jobs: refused before they
    are asked to confirm what they may not do."""
    theirs = {i: j.get("user") for i, j in jobs.items() if j.get("user") != me}
    if theirs:
        i, user = min(theirs.items())
        admins = f"root or members of group {group}" if group else "root"
        raise Refused(
            f"job {i} of {user} (the queue) holds the GPU; only {admins} may end another "
            f"user's job: ask {user} or the admin ({me} may release only their own claims and "
            "jobs); nothing done"
        )


def _refuse_unsignallable(
    direct: list[ClaimInfo],
    waiters: list[WaiterInfo],
    me: int,
    gpus: dict[str, int | None],
    words: list[str],
) -> None:
    """An admin by group who is not root: another user's claim outside the queue (or waiter)
    is theirs to end only as root (the kernel lets nobody else signal their processes or
    remove their files from the sticky ledger): refused before anything is done, rather than
    told "ended" while it lives on."""
    for c in direct:
        if c.uid != me:
            raise Refused(
                f"GPU {gpus[c.uuid]} is held by {c.user} (pid "
                f"{', '.join(map(str, c.pids)) or '?'}, {c.command or '?'}): only root can end "
                "another user's claim made outside the queue (signal its processes, remove "
                f"its files); nothing was done: sudo berth release {' '.join(words)}"
            )
    for w in waiters:
        if w.uid != me:
            raise Refused(
                f"{user_name(w.uid)} waits for GPUs (pid {w.pid}): only root can end another "
                f"user's waiter; nothing was done: sudo berth release {' '.join(words)}"
            )


def run(args: argparse.Namespace) -> int:
    grace = parse_duration(args.grace, what="--grace")
    cfg = config.get()
    gpus = _resolve(list(parse_gpu_words(args.gpus, what="GPU")))
    ledger = Ledger(cfg=cfg)
    scan = ledger.scan()
    claims = [c for c in scan.claims if c.uuid in gpus]
    me, admin = os.geteuid(), is_admin(cfg)
    waiters = [
        w for w in scan.waiters if any(u in gpus for u, _, _ in w.wanted) and (admin or w.uid == me)
    ]
    if not claims and not waiters:
        sys.stdout.write(
            "berth release: no claims on " + ", ".join(args.gpus) + " (and no waiters)\n"
        )
        return 0
    client, jobs = _queue_jobs(claims)
    queued = [c for c in claims if _job_of(c, jobs) is not None]
    direct = [c for c in claims if _job_of(c, jobs) is None]
    if not admin:
        others = [c for c in direct if c.uid != me]
        if others:
            c = others[0]
            group = f" or members of group {cfg.admin_group}" if cfg.admin_group else ""
            raise Refused(
                f"GPU {gpus[c.uuid]} is held by {c.user} (pid {', '.join(map(str, c.pids)) or '?'}, "
                f"{c.command or '?'}); only root{group} may end another user's claim: ask "
                f"{c.user} or the admin ({user_name(me)} may release only their own claims)"
            )
        _refuse_others_jobs(jobs, user_name(me), cfg.admin_group)  # (before asking anything)
    elif me != 0:
        _refuse_unsignallable(direct, waiters, me, gpus, args.gpus)
    lines = _lines(gpus, direct, queued, jobs, waiters)
    pids = holder_pids([*direct, *waiters])
    sys.stdout.write("to end:\n" + "\n".join(lines) + "\n")
    if not args.yes:
        what = [f"send SIGTERM to {len(pids)} holder process(es), SIGKILL after {grace:g} s"]
        if jobs:
            what.append(f"cancel job(s) {', '.join(map(str, sorted(jobs)))} through the daemon")
        sys.stdout.write(" and ".join(what) + "? [y/N] ")
        sys.stdout.flush()
        line = sys.stdin.readline() if sys.stdin is not None else ""
        if not line and not (sys.stdin is not None and sys.stdin.isatty()):
            sys.stdout.write("\n")
            raise UsageError(
                f"berth release {' '.join(args.gpus)}: nothing done: there is no terminal to "
                "ask on (stdin is not one, and gave no answer); to end them without asking, "
                f"add -y: berth release {' '.join(args.gpus)} -y"
            )
        if line.strip().lower() not in ("y", "yes"):
            sys.stdout.write("berth release: nothing done\n")
            return 1
    if client is not None and jobs:
        with client:
            client.call("cancel", job_ids=sorted(jobs))  # (the daemon says who may)
    killed = end_claims(ledger, direct, grace) if direct else []
    end_waiters(ledger, waiters, grace)
    if queued:
        wait_ended(ledger, queued, grace + KILL_AFTER)  # the daemon's grace before SIGKILL
    note = f" ({len(killed)} needed SIGKILL)" if killed else ""
    ended = f"ended {len(claims)} claim(s)" + (f", {len(waiters)} waiter(s)" if waiters else "")
    sys.stdout.write(f"berth release: {ended}{note}\n")
    return 0
