"""`berth simulate TRACE --idle-reclaim T`: what releasing idle holders would save, an estimate
(:mod:`berth.sim.idle`), for each policy of ``--policy`` (a comma list, or all)."""

from __future__ import annotations

import json
import sys

from berth.errors import UsageError
from berth.units import format_duration, parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def number(text: str, what: str) -> float:
    """``text`` as a number, or a UsageError naming ``what``."""
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"invalid {what} value {text!r}: expected a number like 0.9") from None


def idle(args: argparse.Namespace) -> int:
    """`--idle-reclaim T`: the model of berth.sim.idle, replayed without and with reclaim."""
    from berth.core.policy import DEFAULT_POLICY  # heavy: the simulator
    from berth.sim.idle import estimate  # heavy: the simulator
    from berth.sim.run import policy_list, prepare  # heavy: the simulator

    reclaim = parse_duration(args.idle_reclaim, what="--idle-reclaim")
    tail = parse_duration(args.idle_tail, what="--idle-tail")
    if not 0 <= args.idle_share <= 1 or not reclaim >= 0 or not tail >= 0:
        raise UsageError("--idle-share must be in [0, 1], --idle-reclaim and --idle-tail >= 0")
    load = None if args.load is None else number(args.load, "--load")
    max_dur = None if args.max_duration == "none" else parse_duration(args.max_duration)
    wl = prepare(
        args.trace, fmt=args.format, inventory=args.inventory, load=load, scale=args.scale,
        start_day=args.start_day, days=args.days, max_duration=max_dur,
        time_limits=args.time_limits, poisson=args.poisson, seed=args.seed,
    )  # fmt: skip
    policies = policy_list(args.policy or DEFAULT_POLICY)
    for policy in policies:
        out = estimate(wl.jobs, wl.inv, reclaim=reclaim, idle_share=args.idle_share,
                       idle_tail=tail, seed=args.seed, policy=policy)  # fmt: skip
        if args.json:  # (one line per policy)
            sys.stdout.write(json.dumps(out) + "\n")
            continue
        if len(policies) > 1:
            gap = "" if policy == policies[0] else "\n"
            sys.stdout.write(f"{gap}policy {policy}:\n")
        _idle_table(out, reclaim, tail)
    return 0


def _idle_table(out: dict[str, Any], reclaim: float, tail: float) -> None:
    m = out["model"]
    rows = [("", "GPU-h idle", "mean wait", "p99 wait", "makespan")]
    for name, key in (("without reclaim", "without_reclaim"),
                      (f"--idle-reclaim {format_duration(reclaim)}", "with_reclaim"),
                      ("saved", "saved")):  # fmt: skip
        r = out[key]
        rows.append((name, f"{r['idle_gpu_hours']:.1f}", format_duration(r["wait_mean"]),
                     format_duration(r["wait_p99"]), format_duration(r["makespan"])))  # fmt: skip
    widths = [max(len(r[k]) for r in rows) for k in range(5)]
    for r in rows:
        sys.stdout.write("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + "\n")
    sys.stdout.write(
        f"# an estimate, not a measurement: {m['idle_jobs']} of {m['jobs']} jobs (share "
        f"{m['idle_share']:g}) modelled as holding their GPUs idle {format_duration(tail)} "
        f"after their work; both replayed by berth's scheduler (policy {m['policy']})\n"
    )
