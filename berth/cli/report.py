"""Examples:

  berth report                              # the last 7 days: your GPU-hours, and everyone's total
  berth report --since this-month --by user # per user (an admin sees everyone's rows)
  berth report --since 2026-11-01 --until 2026-12-01 --by project,model
  berth report --since last-month --by user --by week --format csv > usage.csv
  berth report --since 1d --format json     # every figure, for a program

GPU-hours held (each attempt's GPUs times its share, clipped to the window), hours waited in
the queue, jobs by end state, and the utilisation and memory the dashboard sampled on the
GPUs while the jobs held them (mean %, over the sampled part; only a daemon serving --http
samples), from the daemon's own store: the jobs on record, and the daily summaries of those
pruned after [daemon] keep_finished, a year back. Jobs that held their GPUs idle are named;
GPUs held by claims outside the queue (`berth run`, acquire()) and by processes outside
berth are reported apart. A user sees their own rows and the totals; an admin everyone's.
--since/--until take a duration back from now (7d, 12h), a date or date and time
(2026-11-01, 2026-11-01T08:00, local time), today, this-month or last-month (its end is
then the default --until). --by day/week/month are UTC days (the summaries' days).
"""

from __future__ import annotations

import json
import sys
import time

from berth.client import Client
from berth.errors import UsageError
from berth.units import parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

FAST_EXIT = True
BY = ("user", "project", "model", "day", "week", "month")
FORMATS = ("table", "csv", "json")
COLUMNS = ("jobs", "gpu_hours", "queued_hours", "util", "mem")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", default="7d", metavar="WHEN",
                   help="from when: 7d, 12h, 2026-11-01, today, this-month, last-month "
                        "(default: 7d)")  # fmt: skip
    p.add_argument("--until", metavar="WHEN", help="until when (default: now)")
    p.add_argument("--by", action="append", default=[], metavar="KEYS",
                   help=f"group by {', '.join(BY)} (comma-separated or repeated)")  # fmt: skip
    p.add_argument("--format", default="table", choices=FORMATS, help="table (default), csv, json")


def _month(t: float, back: int) -> float:
    lt = time.localtime(t)
    year, month = lt.tm_year, lt.tm_mon - back
    while month < 1:
        year, month = year - 1, month + 12
    return time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))


def when(text: str, now: float, what: str) -> tuple[float, float | None]:
    """``text`` as a time (and the end it implies: last-month's), e.g. ``7d`` -> now - 7 days."""
    word = text.strip().lower()
    if word == "now":
        return now, None
    if word == "today":
        lt = time.localtime(now)
        return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1)), None
    if word == "this-month":
        return _month(now, 0), None
    if word == "last-month":
        return _month(now, 1), _month(now, 0)
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"):
        try:
            return time.mktime(time.strptime(text.strip(), fmt)), None
        except ValueError:
            pass
    try:
        return now - parse_duration(word, what=what), None
    except UsageError:
        raise UsageError(
            f"{what} {text!r}: not a time; give a duration back from now (7d, 12h), a date "
            "(2026-11-01, 2026-11-01T08:00), today, this-month or last-month"
        ) from None


def _after_1970(text: str, now: float, what: str) -> tuple[float, float | None]:
    start, implied = when(text, now, what)
    if start < 0:
        raise UsageError(f"{what} {text!r}: before 1970; give a shorter duration or a later date")
    return start, implied


def window(since: str, until: str | None, now: float) -> tuple[float, float]:
    start, implied = _after_1970(since, now, "--since")
    end = implied if until is None else _after_1970(until, now, "--until")[0]
    end = now if end is None else end
    if end <= start:
        raise UsageError(
            f"--since {since} is not before --until {until or 'now'}: nothing to report"
        )
    return start, end


def keys(by: list[str]) -> list[str]:
    for item in by:
        if not item.strip():
            raise UsageError(f"--by {item!r}: empty; use {', '.join(BY)} (combinable)")
    out = [k.strip() for item in by for k in item.split(",") if k.strip()]
    for k in out:
        if k not in BY:
            raise UsageError(f"--by {k!r}: not a grouping; use {', '.join(BY)} (combinable)")
    if len(set(out)) != len(out):
        raise UsageError(f"--by {','.join(out)}: a grouping is named twice")
    return out


def run(args: argparse.Namespace) -> int:
    now = time.time()
    since, until = window(args.since, args.until, now)
    by = keys(args.by)
    with Client() as c:
        reply = c.call("report", since=since, until=until, by=by)
    if args.format == "json":
        sys.stdout.write(json.dumps(reply, indent=1, sort_keys=True) + "\n")
    elif args.format == "csv":
        _csv(reply, by)
    else:
        _table(reply, by)
    return 0


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def _states(row: dict[str, Any]) -> str:
    return " ".join(f"{k}:{n}" for k, n in sorted(row.get("states", {}).items()))


def _csv(reply: dict[str, Any], by: list[str]) -> None:
    import csv  # rare: --format csv

    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["kind", *by, *COLUMNS, "states"])
    for kind, rows in (("job", reply["rows"]), ("total", [reply["totals"]]),
                       ("claim", reply["claims"]), ("outside", reply["outsides"])):  # fmt: skip
        for r in rows:
            w.writerow([kind, *(r.get(k, "") for k in by),
                        *("" if r.get(c) is None else r[c] for c in COLUMNS), _states(r)])  # fmt: skip


def _table(reply: dict[str, Any], by: list[str]) -> None:
    span = f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(reply['since']))} .. " + \
        time.strftime("%Y-%m-%d %H:%M", time.localtime(reply["until"]))  # fmt: skip
    scope = "everyone" if reply["scope"] == "all" else f"{reply['scope']} (totals: everyone)"
    out = [f"GPU usage {span}, {scope}", ""]
    head = [*(k.upper() for k in by), "JOBS", "GPU-HOURS", "QUEUED-H", "UTIL%", "MEM%", "ENDED"]
    lines = [[*(str(r.get(k, "")) or "-" for k in by), *(_cell(r.get(c)) for c in COLUMNS),
              _states(r)] for r in reply["rows"]]  # fmt: skip
    t = reply["totals"]
    lines.append([*(["TOTAL"] + [""] * (len(by) - 1) if by else []),
                  *(_cell(t.get(c)) for c in COLUMNS), _states(t)])  # fmt: skip
    out += _align([head, *lines])
    for title, rows in (("Claims outside the queue (berth run, acquire())", reply["claims"]),
                        ("Outside use (GPU processes not under berth)", reply["outsides"])):  # fmt: skip
        if rows:
            keys_ = [k for k in rows[0] if k in BY]
            out += ["", title]
            out += _align([[*(k.upper() for k in keys_), "GPU-HOURS"],
                           *[[*(str(r[k]) or "-" for k in keys_), _cell(r["gpu_hours"])]
                             for r in rows]])  # fmt: skip
    if reply["idle"]:
        out += ["", "Idle holders (under 5% utilisation while sampled)"]
        out += _align([["JOB", "USER", "NAME", "GPU-HOURS", "UTIL%"],
                       *[[str(r["id"]), str(r["user"]), r["name"] or "-", _cell(r["gpu_hours"]),
                          _cell(r["util"])] for r in reply["idle"]]])  # fmt: skip
    if t.get("sampled_hours", 0) == 0 and t.get("gpu_hours", 0) > 0:
        out += ["", "(no utilisation sampled: the daemon samples it while serving --http)"]
    sys.stdout.write("\n".join(out) + "\n")


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
