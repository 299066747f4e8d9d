"""Examples:

  berth admin install --enable            # the system daemon: unit, tmpfiles rule, config; start it
  berth admin install --root /tmp/review  # ... or write the files under a directory to read
  berth admin doctor                      # is this host ready? ok / warn / fail, and the fix
  berth admin backup /backup/             # a consistent copy of the queue while it runs
  berth admin restore /backup/berth-20261128-120000.db   # (the daemon stopped)
  berth admin uninstall --stop            # remove what install wrote (never state or logs)
  berth admin limits                      # the limits in force: defaults and each user's
  berth admin limits alice                # alice's
  berth admin limits alice --max-gpus 4   # alice holds at most 4 GPUs at once (admins)
  berth admin limits alice --max-jobs 50 --max-time 2d --shares 2
  berth admin limits alice --max-gpus default   # back to the default for everyone
  berth admin limits --max-gpus 2         # the default for everyone (over [limits] in the config)
  berth admin limits alice --max-time none      # no time limit for alice, whatever the default
  berth admin drain --reason "driver upgrade"   # no new job starts anywhere; running jobs go on
  berth admin drain 2 3 --reason "fan noise"    # only GPUs 2 and 3
  berth admin undrain --all               # every GPU again (= berth resume --all)
  berth admin log                         # what enforcement did ([enforce], docs/admin.md)
  berth admin reserve --user alice -g 2 --start '2026-12-01 14:00' --duration 2h
  berth admin reserve --group ml --gpu-ids 0,1 --start 09:00 --end 18:00 --reason "demo"
  berth admin reservations                # each one, and a timeline of the GPUs
  berth admin unreserve 3                 # remove reservation 3
  berth admin projects                    # each project: jobs, GPUs, usage, quotas, members

Install, doctor, backup (docs/admin.md "Install", "Back up and restore"): install writes
/etc/systemd/system/berth.service (ExecStart: this berth), /etc/tmpfiles.d/berth.conf and
/etc/berth/config.toml, and refuses to replace one an admin changed without --force; doctor
exits 0 (ok), 1 (a warning) or 2 (a failure); the daemon copies its database the same way
before it migrates a schema (backups/ in its state dir) and logs it.

Limits (defaults in the config's [limits]; set here at runtime, kept across restarts):
  --max-gpus N   GPUs a user may hold at once; more waits as (UserGpuLimit)
  --max-jobs N   jobs a user may have queued or running; more are refused at submit
  --max-time T   the longest -t a user may ask; a job without -t gets T
  --shares W     the user's weight in fair share (default 1: equal shares)
A value may be `none` (no limit, whatever the default) or `default` (the default applies).
Everyone may read the limits; only admins (root, [claims] admin_group) may set them, drain
and undrain. Pending jobs on drained GPUs say who drained them and why (`berth queue`).
Fair share: `berth queue --users` shows each user's decayed usage and share.

Reservations (docs/admin.md "Reservations"): during the window only the holders' jobs start on
the reserved GPUs (--user, --group: its members in the user database, --project); before it
others' jobs may use them if their time limit (-t) ends by its start, and a job without one
never does unless --allow-unlimited. Others wait as (Reservation). -g N picks N GPUs now (the
reply says which); a reservation overlapping another on a GPU is refused. Everyone may list
them; only admins make and remove them. They are kept across restarts.

Projects (Slurm's accounts: `berth submit --project NAME`) are the admin's [projects.NAME]
tables in the config (docs/admin.md "Projects"); `berth admin projects` shows each one's
running jobs and GPUs (against max_gpus), jobs queued (against max_queued), decayed usage,
shares and fair-share factor between projects, and who may charge it.
"""

from __future__ import annotations

import json
import sys

from berth.cli import admin_backup, admin_doctor, admin_install, admin_reserve
from berth.cli.escape import shown
from berth.client import call
from berth.errors import UsageError
from berth.units import format_duration, parse_duration, parse_gpu_words

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

KEYS = ("max_gpus", "max_jobs", "max_time", "shares")
WORDS = ("none", "default")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    lim = sub.add_parser("limits", help="show the limits; admins: set them")
    lim.add_argument("user", nargs="?", help="a user (none: the defaults for everyone)")
    lim.add_argument("--max-gpus", metavar="N", help="GPUs held at once (or none, default)")
    lim.add_argument("--max-jobs", metavar="N", help="jobs queued or running (or none, default)")
    lim.add_argument(
        "--max-time", metavar="T", help="longest time limit, e.g. 2d (or none, default)"
    )
    lim.add_argument("--shares", metavar="W", help="fair-share weight (or default)")
    lim.add_argument("--json", action="store_true", help="machine-readable output")
    drain = sub.add_parser("drain", help="no new job starts on these GPUs (all: none named)")
    drain.add_argument("gpus", nargs="*", help="GPU indices (0 3, 0-3) or UUIDs; none: all")
    drain.add_argument("--reason", help="why (pending jobs show it)")
    drain.add_argument("--json", action="store_true", help="machine-readable output")
    undrain = sub.add_parser("undrain", help="let jobs start on drained GPUs again")
    undrain.add_argument("gpus", nargs="*", help="GPU indices or UUIDs")
    undrain.add_argument("--all", action="store_true", help="every drained or paused GPU")
    undrain.add_argument("--json", action="store_true", help="machine-readable output")
    proj = sub.add_parser("projects", help="each project's usage, quotas and members")
    proj.add_argument("--json", action="store_true", help="machine-readable output")
    log = sub.add_parser("log", help="the enforcement audit log (admins)")
    log.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="the last N")
    log.add_argument("--json", action="store_true", help="machine-readable output")
    admin_reserve.add_parsers(sub)
    admin_install.add_parsers(sub)
    admin_backup.add_parsers(sub)
    admin_doctor.add_parsers(sub)


def _value(key: str, text: str) -> float | str:
    flag = "--" + key.replace("_", "-")
    word = text.strip().lower()
    if key == "shares" and word == "none":
        raise UsageError(f"{flag} {text!r}: give a number or default (a weight, not a limit)")
    if word in WORDS:
        return word
    if key == "max_time":
        seconds = parse_duration(text, what=flag)
        if not seconds > 0:
            raise UsageError(f"{flag} {text!r}: must be positive (or none, default)")
        return seconds
    try:
        value = float(text)
    except ValueError:
        raise UsageError(
            f"{flag} {text!r}: give a number" + (", none" if key != "shares" else "")
            + " or default"
        ) from None  # fmt: skip
    if key == "max_jobs" and value != int(value):
        raise UsageError(f"{flag} {text!r}: give a whole number of jobs")
    if not value > 0:
        raise UsageError(f"{flag} {text!r}: must be positive")
    return value


def run(args: argparse.Namespace) -> int:
    if args.action == "install":
        return admin_install.run_install(args)
    if args.action == "uninstall":
        return admin_install.run_uninstall(args)
    if args.action == "doctor":
        return admin_doctor.run(args)
    if args.action in ("backup", "restore"):
        return admin_backup.run(args)
    if args.action == "limits":
        changes = {
            k: _value(k, v) for k in KEYS if (v := getattr(args, k)) is not None
        }  # fmt: skip
        fields: dict[str, Any] = {"user": args.user}
        if changes:
            fields["set"] = changes
        reply = call("limits", **fields)
        _out(args, reply, _limits_text)
        return 0
    if args.action == "projects":
        _out(args, call("projects"), _projects_text)
        return 0
    if args.action == "log":
        if not 1 <= args.lines <= 10000:
            raise UsageError(f"--lines {args.lines}: give 1 to 10000")
        _out(args, call("enforce_log", limit=args.lines), _log_text)
        return 0
    if args.action == "reserve":
        _out(args, call("reserve", **admin_reserve.request(args)), admin_reserve.made)
        return 0
    if args.action == "reservations":
        _out(args, call("reservations"), admin_reserve.listing)
        return 0
    if args.action == "unreserve":
        _out(args, call("unreserve", id=args.id), admin_reserve.removed)
        return 0
    if args.action == "drain":
        # (`berth admin drain` is `berth pause` with why: one request, its note sent even if null)
        reply = call("pause", gpus=parse_gpu_words(args.gpus, what="GPU"), note=args.reason)
        _out(args, reply, _drained_text)
        return 0
    if not args.gpus and not args.all:
        raise UsageError("name the GPUs to undrain, or use --all")
    reply = call("resume", gpus=parse_gpu_words(args.gpus, what="GPU"), all=args.all)  # undrain
    _out(args, reply, _drained_text)
    return 0


def _out(args: argparse.Namespace, reply: dict[str, Any], text: Any) -> None:
    if args.json:
        reply = {k: v for k, v in reply.items() if k != "ok"}
        sys.stdout.write(json.dumps(reply) + "\n")
    else:
        sys.stdout.write(text(reply))


def _limits_text(reply: dict[str, Any]) -> str:
    def cell(key: str, value: Any, mine: bool) -> str:
        if value is None:
            text = "-"
        elif key == "max_time":
            text = format_duration(value)
        else:
            text = f"{value:g}"
        return text + ("*" if mine else "")

    rows: list[tuple[str, ...]] = [("USER", "MAX_GPUS", "MAX_JOBS", "MAX_TIME", "SHARES")]
    mine = reply.get("set_defaults") or {}
    rows.append(
        ("(default)", *(cell(k, reply["defaults"][k], mine.get(k) is not None) for k in KEYS))
    )
    for user, entry in reply["users"].items():
        own = entry["set"]
        rows.append(
            (shown(user), *(cell(k, entry["in_force"][k], own.get(k) is not None) for k in KEYS))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(
        "*: set with `berth admin limits`; the rest: the default ([limits] in the config); "
        "-: no limit"
    )
    return "".join(line + "\n" for line in lines)


def _projects_text(reply: dict[str, Any]) -> str:
    from berth.cli.queue import format_projects  # rare: `berth admin projects`

    rows = reply.get("projects") or []
    if not rows:
        return "no projects configured ([projects.NAME] in the config: docs/admin.md)\n"
    out = format_projects(rows)
    if reply.get("require_project"):
        out += "every job must name a project ([scheduling] require_project)"
        default = reply.get("default_project")
        out += f"; without --project: {shown(default)}\n" if default else "\n"
    elif reply.get("default_project"):
        out += f"a job without --project is charged to {shown(reply['default_project'])}\n"
    return out


def _drained_text(reply: dict[str, Any]) -> str:
    paused = reply.get("drained")
    if paused is None:  # (undrain answers as `berth resume`)
        ids = ", ".join(str(i) for i in reply.get("paused") or []) or "none"
        out = f"drained GPUs: {ids}\n"
        if reply.get("queue_paused"):
            out += "the queue is paused (after a crash): `berth admin undrain --all`\n"
        return out
    if not paused:
        return "drained GPUs: none\n"
    lines = []
    for r in paused:
        who = f" by {shown(r['by'])}" if r.get("by") else ""
        why = f": {shown(r['note'])}" if r.get("note") else ""
        lines.append(f"GPU {r['gpu']} drained{who}{why}\n")
    return "".join(lines)


def _log_text(reply: dict[str, Any]) -> str:
    """One line per action: when, what, to which process or holder, why."""
    import time  # rare: `berth admin log`

    entries = reply.get("entries") or []
    head = [shown(str(reply["devices"]))] if reply.get("devices") else []
    if not entries:
        nothing = f"no enforcement action recorded ({reply.get('path') or 'no audit log'})"
        return "".join(line + "\n" for line in [*head, nothing])
    lines = head
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.get("time", 0)))
        what = f"{e.get('action')} {e.get('class')}"
        if e.get("class") == "notify":  # ([notify]: a message not delivered, or dropped)
            about = [str(e.get(k)) for k in ("sink", "event") if e.get(k)]
            about += [f"job {e['job']}"] if e.get("job") else []
            about += [f"{e['count']} message(s)"] if e.get("count") else []
            lines.append(f"{when}  {what}  {shown(' '.join(about))}  ({shown(str(e.get('reason')))})")
            continue
        if e.get("signal"):
            what += f" {e['signal']}"
        where = f"GPU {e['gpu']}" if "gpu" in e else "GPUs " + ",".join(map(str, e.get("gpus", [])))
        who = (
            f"pid {e['pid']} of {shown(str(e.get('user')))}"
            if e.get("pid")
            else shown(str(e.get("user"))) if e.get("user") else ""
        )  # (none for a GPU lost or back)
        rest = [f"holder {e['holder']}" if e.get("holder") else "",
                f"on {e['victim']}" if e.get("victim") else "",
                f"job {e['job']}" if e.get("job") else "",
                shown(str(e["reason"])) if e.get("reason") else ""]  # fmt: skip
        tail = "; ".join(r for r in rest if r)
        said = f"{when}  {what}  {where}" + (f"  {who}" if who else "")
        lines.append(said + (f"  ({tail})" if tail else ""))
        if e.get("proof") and e.get("action") in ("signal", "cancel"):  # (why it was theirs)
            lines.append(f"    proof: {shown(str(e['proof']))}")
    return "".join(line + "\n" for line in lines)
