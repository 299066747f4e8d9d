"""Examples:

  # replay a trace on one 8-GPU server at offered load 0.9, comparing policies
  berth simulate cluster05.csv --inventory 8 --load 0.9 --policy fifo,priority,sjf,balanced
  berth simulate philly.csv --inventory 8x8 --start-day 30 --days 14 --policy all --json
  # fractional pods (openb) with Poisson arrivals, comparing placements
  berth simulate openb_pod_list_default.csv --poisson 5000 --load 0.9 \\
      --placement first-fit,best-fit,packer
  # the FGD packing experiment: allocation ratio when 100% of capacity has arrived
  berth simulate openb_pod_list_default.csv --fill --inventory openb_node_list_gpu_node.csv
  # this machine's own past queue: the daemon's job store (read-only) or JSON lines of jobs
  berth simulate ~/.local/state/berth/berth.db --inventory 8 --time-limits keep --policy all
  # what releasing idle holders after 2 h would save, if 20% of jobs idle 4 h (an estimate)
  berth simulate philly.csv --inventory 8 --idle-reclaim 2h --idle-share 0.2 --idle-tail 4h
  # when will my queued jobs start? and a job I am about to submit?
  berth simulate --what-if
  berth simulate --what-if -g 2 -t 4:00:00
  # what would reserving 2 GPUs for 2 h from this time tomorrow cost the queue?
  berth simulate --what-if --reserve-gpus 2 --reserve-start 'now+1d' --reserve-duration 2h

Trace formats: philly (philly.csv), itp (ITP clusterNN.csv), openb (pod lists), berth (the
daemon's berth.db, or JSON lines of jobs); --format auto guesses from the header.
Inventories: 8 (one host), 8:40G, 8x8 (nodes x GPUs), or an openb node-list CSV. Load scaling: --scale stretch (time-stretch
submit times) or thin (drop jobs at random). Time limits (traces have none): exact (the
duration, an oracle), round (rounded up to 10m/30m/1h/2h/4h/8h/1d/2d/7d), factor:F, none.
Policies: fifo, fifo-backfill, priority, sjf, fairshare, balanced, guarded (the default); the first
one listed is the baseline of the xBASE column. --fairshare on|both adds fair share between
tenants (users, Philly's virtual clusters, ITP's clusters) by decayed usage over the policy,
as the system daemon does (docs/scheduling.md); with several tenants the table has "jain
svc", Jain's index over the tenants' service while they waited, and --tenants (implied by
--fairshare) prints each tenant's GPU-hours, mean wait and service. Plots (--plot DIR) need matplotlib
(pip install 'gpu-berth[plot]'); without it berth says so and prints the table.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
import time

from berth import config
from berth.cli import simulate_reserve
from berth.cli.simulate_idle import idle, number
from berth.errors import UsageError
from berth.units import format_duration, parse_duration, parse_gpu_indices, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from berth.core.inventory import Gpu, Usage
    from berth.core.job import Job
    from berth.sim.whatif import Prediction


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="?", help="trace file (philly, itp, openb, berth JSON lines)")
    p.add_argument("--format", default="auto", help="philly, itp, openb, berth or auto")
    p.add_argument("--inventory", default="8", help="8, 8:40G, 8x8, or a node-list CSV")
    p.add_argument("--policy", default=None, help="policies, comma-separated, or all")
    p.add_argument("--placement", default=None, help="first-fit, best-fit, packer (comma list)")
    p.add_argument("--load", default=None, help="target offered load(s), e.g. 0.6,0.9,1.2")
    p.add_argument("--scale", default="stretch", choices=("stretch", "thin"))
    p.add_argument("--start-day", type=float, default=0.0, help="window start (days)")
    p.add_argument("--days", type=float, default=None, help="window length (days)")
    p.add_argument("--max-duration", default="7d", help="cap job durations (none: no cap)")
    p.add_argument("--time-limits", default="exact", help="exact, round, factor:F, none, keep")
    p.add_argument("--poisson", type=int, default=None, metavar="N",
                   help="draw N jobs from the trace's shapes with Poisson arrivals at --load")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fill", action="store_true", help="FGD experiment: arrivals, no departures")
    p.add_argument("--seeds", default="42", help="--fill: seeds, e.g. 42-51")
    p.add_argument(
        "--fairshare", choices=("off", "on", "both"), default="off",
        help="fair share between tenants by decayed usage, as the system daemon (both: each "
        "policy without and with it)",
    )  # fmt: skip
    p.add_argument("--half-life", default="7d", help="--fairshare: usage halves every ...")
    p.add_argument(
        "--predict", choices=("off", "on", "both"), default="off",
        help="backfill by run times learned from the replayed jobs' names, as [scheduling] "
        "predict (both: each policy without and with it)",
    )  # fmt: skip
    p.add_argument(
        "--tenants", action="store_true", help="per tenant: GPU-hours, mean wait, service"
    )
    i = p.add_argument_group("--idle-reclaim (an estimate: docs/admin.md Enforcement)")
    i.add_argument("--idle-reclaim", metavar="T", help="release holders idle this long (2h)")
    i.add_argument("--idle-share", type=float, default=0.2, metavar="F",
                   help="the share of jobs that hold their GPUs idle after their work (0.2)")  # fmt: skip
    i.add_argument("--idle-tail", default="4h", metavar="T", help="... for this long (4h)")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots there (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    w = p.add_argument_group(
        "--what-if (ask the running daemon); --reserve-*: with --what-if what one more "
        "reservation would cost the queue, in a replay kept in it"
    )
    w.add_argument("--what-if", action="store_true", help="predict start times of pending jobs")
    w.add_argument("-g", "--gpus", default=None, help="a job you are about to submit: GPUs")
    w.add_argument("--mem", default=None, help="... its GPU memory per GPU (e.g. 20G)")
    w.add_argument("-t", "--time", default=None, help="... its time limit (e.g. 2:00:00)")
    w.add_argument("-p", "--priority", type=int, default=0, help="... its priority")
    w.add_argument("--gpu-ids", default=None, help="... its GPUs (0,1 or 0-3; -g N: N of them)")
    w.add_argument("--assume", default="1h", help="run time assumed for jobs without a limit")
    simulate_reserve.add_arguments(w)


def run(args: argparse.Namespace) -> int:
    from berth.cli.simulate_modes import check  # rare: read what each mode uses

    mode = check(args, add_arguments)  # (an option the mode cannot use: refused by name)
    if mode == "what-if":
        return _what_if(args)
    if not args.trace:
        raise UsageError("name a trace file (or use --what-if); `berth help simulate` has examples")
    if mode == "fill":
        return _fill(args)
    if mode == "idle":
        return idle(args)
    return _replay(args)


def _replay(args: argparse.Namespace) -> int:
    from berth.core.placement import PLACEMENTS  # heavy: the simulator
    from berth.core.policy import DEFAULT_POLICY  # heavy: the simulator
    from berth.sim import report  # heavy: the simulator
    from berth.sim.run import compare, policy_list, prepare  # heavy: the simulator

    policies = policy_list(args.policy or DEFAULT_POLICY)
    placements = policy_list(args.placement, PLACEMENTS) if args.placement else None
    loads: list[float | None] = [None]
    if args.load:
        loads = [number(x, "--load") for x in args.load.split(",")]
    max_dur = None if args.max_duration == "none" else parse_duration(args.max_duration)
    fair = {"off": (False,), "on": (True,), "both": (False, True)}[args.fairshare]
    half_life = parse_duration(args.half_life, what="--half-life")
    if not half_life > 0:
        raise UsageError(f"--half-life {args.half_life!r}: must be positive (or inf)")
    rows: list[dict[str, Any]] = []
    results = []
    notes: list[str] = []
    for load in loads:
        wl = prepare(
            args.trace, fmt=args.format, inventory=args.inventory, load=load, scale=args.scale,
            start_day=args.start_day, days=args.days, max_duration=max_dur,
            time_limits=args.time_limits, poisson=args.poisson, seed=args.seed,
        )  # fmt: skip
        notes = [*wl.notes, f"native offered load {wl.native_load:.3f} on the inventory"]
        kept = simulate_reserve.replayed(args, wl.inv[0], wl.jobs)  # admin reservations
        if kept:
            notes.append(simulate_reserve.describe(kept, wl.jobs))
        learned = {"off": (False,), "on": (True,), "both": (False, True)}[args.predict]
        r, res = compare(wl, policies, placements, fair, half_life, kept, learned)
        rows += r
        results += [(f"{label} @{wl.load:.2f}", x) for label, x in res]
    base = report.add_ratios(rows)
    if args.json:
        sys.stdout.write(json.dumps({"runs": rows, "notes": notes}, default=str) + "\n")
    else:
        sys.stdout.write(report.table(rows, base))
        if args.tenants or args.fairshare != "off":
            sys.stdout.write(report.tenant_table(rows))
        for n in notes:
            sys.stdout.write(f"# {n}\n")
    if args.plot:
        if not report.can_plot():
            sys.stderr.write("berth: --plot needs matplotlib (pip install 'gpu-berth[plot]')\n")
        else:
            for path in report.plot(results, args.plot):
                sys.stderr.write(f"wrote {path}\n")
    return 0


def _fill(args: argparse.Namespace) -> int:
    from berth.core.placement import PLACEMENTS  # heavy: the simulator
    from berth.sim import traces, workload  # heavy: the simulator
    from berth.sim.fill import fill  # heavy: the simulator
    from berth.sim.run import policy_list  # heavy: the simulator

    pods = traces.read(args.trace, args.format)
    inv = workload.inventory(args.inventory)
    placements = policy_list(args.placement or "first-fit,best-fit,packer", PLACEMENTS)
    seeds = _seeds(args.seeds)
    out: list[dict[str, Any]] = []
    for how in placements:
        runs = [fill(pods, inv, how, s) for s in seeds]
        # FGD's reading of a mark: the mean over the pods whose arrived share rounds to it
        # (where no pod's share rounds to a mark, as with few large pods: the crossing value)
        reading = [{**r.marks, **r.window} for r in runs]
        marks = sorted(set.intersection(*(set(m) for m in reading)))
        mean = {m: sum(r[m] for r in reading) / len(runs) for m in marks}
        out.append({"placement": how, "seeds": seeds, "alloc_pct": mean,
                    "wall_s": sum(r.wall for r in runs),
                    "unsatisfiable": sum(r.unsatisfiable for r in runs)})  # fmt: skip
    bad = max((row["unsatisfiable"] for row in out), default=0)
    if bad:  # pods whose gpu_spec names GPU models no node has (enough of): never placed
        sys.stderr.write(
            f"berth: {bad} arrived pods (over {len(seeds)} seeds) ask for GPU models "
            "(gpu_spec) that no node of the inventory has enough of: counted as arrived "
            "and failed\n"
        )
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    marks = sorted(out[0]["alloc_pct"])
    head = (
        "placement  "
        + "  ".join(f"{m:>5}%" for m in marks)
        + "   (GPU allocated % when this % of capacity has arrived)"
    )
    sys.stdout.write(head + "\n")
    for row in out:
        cells = "  ".join(f"{row['alloc_pct'][m]:6.2f}" for m in marks)
        sys.stdout.write(
            f"{row['placement']:<10} {cells}   [{len(seeds)} seeds, {row['wall_s']:.0f}s]\n"
        )
    return 0


def _seeds(text: str) -> list[int]:
    try:
        if "-" in text:
            a, b = text.split("-", 1)
            return list(range(int(a), int(b) + 1))
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"invalid --seeds {text!r}: expected 42, 42,43 or 42-51") from None


def _what_if(args: argparse.Namespace) -> int:
    """Fetch the live queue from the daemon and predict start times (berth.sim.whatif)."""
    from berth.client import Client  # --what-if only
    from berth.core.job import Job  # heavy: the simulator
    from berth.core.limits import UserLimits  # heavy: the simulator
    from berth.core.policy import DEFAULT_POLICY  # heavy: the simulator
    from berth.core.states import State  # heavy: the simulator
    from berth.sim.whatif import predict  # heavy: the simulator

    cfg = config.get()
    now = time.time()
    with Client() as c:
        reply = c.call("queue", model=True)  # one request, however long the queue
        status = c.call("status")
    rows = reply["jobs"]
    jobs = [
        Job.from_dict(r["model"])
        for r in rows
        if r["state"] in ("PENDING", "RUNNING", "COMPLETING") and "model" in r
    ]
    inventory, paused, others = _live_gpus(cfg, status)
    pending = [j for j in jobs if j.state is State.PENDING]
    running = [j for j in jobs if j.state is not State.PENDING]
    mine = _your_job(args, jobs, now)
    if mine is not None:
        pending.append(mine)
    # the daemon's policy (its own config, or its --policy: not this client's config)
    policy = args.policy or (reply.get("daemon") or {}).get("policy") or cfg.policy \
        or DEFAULT_POLICY  # fmt: skip
    fair, users = reply.get("fairshare") or {}, reply.get("users") or []
    usage = {u["user"]: float(u["usage_gpu_hours"]) * 3600 for u in users}
    caps = {u["user"]: u.get("max_gpus") for u in users}
    quotas = {str(q["project"]): float(q["max_gpus"]) for q in reply.get("projects") or []
              if q.get("max_gpus") is not None}  # (each project's GPUs at once)  # fmt: skip
    outside = {str(u["user"]): tuple(int(g) for g in u["outside_gpus"]) for u in users
               if u.get("outside_gpus")}  # (claims outside the queue: against max_gpus)  # fmt: skip
    daemon = reply.get("daemon") or {}
    kept = simulate_reserve.live(status)  # the daemon's reservations
    kw: dict[str, Any] = dict(
        paused=paused, policy=policy, assume=parse_duration(args.assume), others=others,
        usage=usage if fair.get("enabled") else None,
        shares={u["user"]: float(u.get("shares") or 1.0) for u in users},
        half_life=float(fair.get("half_life") or "inf"),
        limits=UserLimits(caps, outside=outside, projects=quotas)
        if quotas or any(v is not None for v in caps.values()) else None,
        max_job_time=None if daemon.get("max_job_time") is None
        else float(daemon["max_job_time"]),
        project_usage=fair.get("project_usage") if fair.get("enabled") else None,
        project_shares=fair.get("project_shares"),
    )  # fmt: skip
    if simulate_reserve.asked(args):  # what would one more reservation cost the queue?
        from berth.sim.reservecost import cost  # heavy: the simulator

        win = simulate_reserve.window(args, inventory, kept, now)
        delays = cost(pending, running, inventory, now, win, reservations=kept, **kw)
        simulate_reserve.show(args, win, pending, delays, now, policy)
        return 0
    preds = predict(pending, running, inventory, now, reservations=kept, **kw)
    _show(args, preds, pending, None if mine is None else mine.id, now, policy)
    return 0


def _live_gpus(
    cfg: config.Config, status: dict[str, Any]
) -> tuple[list[Gpu], set[int], dict[int, Usage]]:
    """This machine's GPUs as the daemon schedules them (config bans left out), the paused
    ones, and what claims and processes outside the queue use (assumed to stay)."""
    from berth.api import banned_reasons  # --what-if only
    from berth.api import gpus as read_gpus  # --what-if only
    from berth.core.inventory import Gpu, Usage  # heavy: the simulator

    snaps = read_gpus(all=True)
    banned = banned_reasons(cfg, snaps)
    inventory = [Gpu(s.index, s.uuid, s.name, s.memory_total, s.healthy)
                 for s in snaps if s.index not in banned]  # fmt: skip
    paused = {int(i) for i, g in (status.get("gpus") or {}).items() if g.get("paused")}
    others = {
        int(i): Usage(float(o["share"]), int(o["mem"]), bool(o["busy"]), str(o["label"]))
        for i, g in (status.get("gpus") or {}).items()
        if (o := g.get("others"))
    }
    return inventory, paused, others


def _your_job(args: argparse.Namespace, jobs: list[Job], now: float) -> Job | None:
    """The job about to be submitted (-g/--gpu-ids given), as the daemon would queue it now;
    None without one."""
    from berth.core.job import Job  # heavy: the simulator
    from berth.core.request import Request  # heavy: the simulator

    if args.gpus is None and args.gpu_ids is None:
        return None
    ids = None if args.gpu_ids is None else parse_gpu_indices(args.gpu_ids, what="--gpu-ids")
    gpus = args.gpus if args.gpus is not None else str(len(ids or ()))
    req = Request(gpus=number(gpus, "-g"),
                  mem=None if args.mem is None else parse_size(args.mem, what="--mem"),
                  gpu_ids=None if ids is None else tuple(ids))  # fmt: skip
    mine = max((j.id for j in jobs), default=0) + 1
    try:  # (as the daemon names its submitter: fair share and limits are per user)
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    return Job(id=mine, submit_time=now, request=req, name="(your job)", user=user,
               priority=args.priority,
               time_limit=None if args.time is None else parse_duration(args.time))  # fmt: skip


def _show(
    args: argparse.Namespace, preds: dict[int, Prediction], pending: list[Job], mine: int | None,
    now: float, policy: str,
) -> None:  # fmt: skip
    """The predictions: JSON (--json) or a table, soonest first."""
    from berth.cli.escape import shown  # --what-if only

    if args.json:
        out = [{"id": p.job_id, "start": p.start, "end": p.end, "gpus": list(p.gpus),
                "exact": p.exact, "note": p.note, "yours": p.job_id == mine}
               for p in sorted(preds.values(), key=_when)]  # fmt: skip
        sys.stdout.write(json.dumps({"now": now, "policy": policy, "jobs": out}) + "\n")
        return
    by_id = {j.id: j for j in pending}
    lines = [("JOBID", "NAME", "USER", "GPUS", "START_IN", "START_TIME", "ON", "NOTE")]
    for p in sorted(preds.values(), key=_when):
        j = by_id[p.job_id]
        if p.start is None:
            when, at = "never", "-"
        else:
            when = ("~" if not p.exact else "") + format_duration(max(0.0, p.start - now))
            at = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(p.start))
        on = "gpu:" + ",".join(str(g) for g in p.gpus) if p.gpus else "-"
        jid = "new" if p.job_id == mine else str(p.job_id)
        lines.append((jid, shown(j.name)[:20], shown(j.user), f"{j.request.gpus:g}", when, at,
                      on, shown(p.note)))  # fmt: skip
    widths = [max(len(r[k]) for r in lines) for k in range(len(lines[0]))]
    for r in lines:
        sys.stdout.write(
            "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() + "\n"
        )
    sys.stdout.write(f"# policy {policy}; jobs run until their time limit; '~' rests on jobs "
                     "without one; use outside the queue stays as it is\n")  # fmt: skip


def _when(p: Prediction) -> tuple[float, int]:
    return (p.start if p.start is not None else float("inf"), p.job_id)
