"""Scheduling-quality metrics of a run (the traces' README, "Metrics").

- JCT = end - submit (mean, median, p99); queueing delay = start - submit (mean, p99, max);
- bounded slowdown = JCT / max(duration, 10 s);
- makespan = last end - first submit;
- utilisation = allocated GPU-seconds / (capacity x makespan), <= 1 by construction;
- allocation ratio (fractional runs) = time-averaged allocated share / capacity while jobs wait,
  and fragmentation = time-averaged free share stranded on partly used GPUs / capacity, while
  jobs wait;
- per tenant: mean bounded slowdown; Jain's index over the tenants' mean slowdowns; GPU-hours,
  mean wait and normalized service while waiting, with Jain's index over the latter
  (:mod:`berth.sim.fairness`);
- ``trimmed``: mean JCT leaving out the first and last 10% of jobs by submit time.
"""

from __future__ import annotations

import math
from typing import Any

from berth.sim.engine import RunResult
from berth.sim.fairness import jain, tenant_metrics

SLOWDOWN_FLOOR = 10.0


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values; nan for none."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return s[k]


def metrics(res: RunResult) -> dict[str, Any]:
    jobs = res.jobs
    n = len(jobs)
    if n == 0:
        return {"jobs": 0}
    if any(e < 0 for e in res.end):
        raise AssertionError("a job never finished")
    jct = [res.end[i] - j.submit for i, j in enumerate(jobs)]
    wait = [res.start[i] - j.submit for i, j in enumerate(jobs)]
    ran = [res.end[i] - res.start[i] for i in range(n)]
    slow = [jct[i] / max(j.duration, SLOWDOWN_FLOOR) for i, j in enumerate(jobs)]
    t0 = min(j.submit for j in jobs)
    makespan = max(res.end) - t0
    work = sum(j.gpus * ran[i] for i, j in enumerate(jobs))
    out: dict[str, Any] = {
        "policy": res.policy + ("+fairshare" if res.fairshare else "")
        + ("+predict" if res.predict else ""),
        "fairshare": res.fairshare,
        "predict": res.predict,
        "placement": res.placement,
        "jobs": n,
        "capacity": res.capacity,
        "jct_mean": sum(jct) / n,
        "jct_median": pct(jct, 50),
        "jct_p99": pct(jct, 99),
        "wait_mean": sum(wait) / n,
        "wait_p99": pct(wait, 99),
        "wait_max": max(wait),
        "slowdown_mean": sum(slow) / n,
        "makespan": makespan,
        "utilisation": work / (res.capacity * makespan) if makespan > 0 else 0.0,
        "timeouts": res.timeouts,
    }
    lo, hi = int(n * 0.1), int(n * 0.9)
    if hi > lo:
        order = sorted(range(n), key=lambda i: jobs[i].submit)[lo:hi]
        out["jct_mean_trimmed"] = sum(jct[i] for i in order) / len(order)
    if any(0 < j.gpus < 1 for j in jobs):
        out.update(_fractional(res))
    tenants: dict[str, list[float]] = {}
    for i, j in enumerate(jobs):
        tenants.setdefault(j.tenant or "-", []).append(slow[i])
    if len(tenants) > 1:
        per = {t: sum(v) / len(v) for t, v in sorted(tenants.items())}
        out["tenant_slowdown"] = per
        out["jain"] = jain(list(per.values()))
        out.update(tenant_metrics(res))
    out["passes"] = res.passes
    out["wall_s"] = res.wall
    return out


def _fractional(res: RunResult) -> dict[str, float]:
    """Time-averaged allocation and stranded share, over the time jobs were waiting."""
    alloc = frag = busy_t = 0.0
    tl = res.timeline
    for k in range(len(tl) - 1):
        t, queued, allocated, stranded = tl[k]
        dt = tl[k + 1][0] - t
        if queued > 0 and dt > 0:
            alloc += allocated * dt
            frag += stranded * dt
            busy_t += dt
    if busy_t <= 0:
        return {"alloc_ratio_when_queued": math.nan, "fragmentation_when_queued": math.nan}
    return {
        "alloc_ratio_when_queued": alloc / (busy_t * res.capacity),
        "fragmentation_when_queued": frag / (busy_t * res.capacity),
    }
