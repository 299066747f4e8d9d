"""Per-tenant fairness of a run: what each tenant (user, virtual cluster) received, and how
close that was to its fair share whenever it wanted more.

- ``gpu_hours``: GPU-hours the tenant's jobs ran; ``wait_mean``: their mean queueing delay.
- ``service``: the tenant's *normalized service* = GPU-seconds it held while it had jobs
  waiting, over the GPU-seconds its fair share was worth in that time. Its fair share at an
  instant is the max-min fair division of the capacity among the tenants wanting GPUs then
  (each wants what it holds plus what it has queued; one who wants less than an equal part
  gets it all, the rest is divided again). 1.0: it got its fair share whenever it waited;
  0.5: half. Times when a tenant waits for nothing do not count: a tenant without work has
  no claim. (A tenant waiting only for jobs bigger than its share can get below 1 under any
  scheduler: the division treats GPUs as divisible.)
- ``jain_service``: Jain's index over the tenants' normalized service (1: all equal).

The sweep goes through submits, starts and ends in time order: O(events x tenants).
"""

from __future__ import annotations

import math
from typing import Any

from berth.sim.engine import RunResult

EPS = 1e-9



def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 = all equal, 1/n = one gets everything."""
    if not values:
        return math.nan
    sq = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * sq) if sq > 0 else 1.0

def tenant_metrics(res: RunResult) -> dict[str, Any]:
    """{"tenants": {name: {jobs, gpu_hours, wait_mean, service}}, "jain_service": x}."""
    jobs = res.jobs
    names = sorted({j.tenant or "-" for j in jobs})
    idx = {t: k for k, t in enumerate(names)}
    n = len(names)
    # (time, order at one instant: ends, starts, submits; tenant, d_pending, d_held)
    events: list[tuple[float, int, int, float, float]] = []
    count = [0] * n
    hours = [0.0] * n
    wait = [0.0] * n
    for i, j in enumerate(jobs):
        k = idx[j.tenant or "-"]
        g = float(j.gpus)
        s, e = res.start[i], res.end[i]
        events += [(j.submit, 2, k, g, 0.0), (s, 1, k, -g, g), (e, 0, k, 0.0, -g)]
        count[k] += 1
        hours[k] += g * (e - s) / 3600.0
        wait[k] += s - j.submit
    events.sort()
    pending = [0.0] * n
    held = [0.0] * n
    got = [0.0] * n
    due = [0.0] * n
    cap = float(res.capacity)
    for e, (t, _, k, dp, dh) in enumerate(events):
        pending[k] += dp
        held[k] += dh
        if e + 1 == len(events):
            break
        dt = events[e + 1][0] - t
        if dt <= 0:
            continue
        waiting = [u for u in range(n) if pending[u] > EPS]
        if not waiting:
            continue
        fair = _max_min(cap, [held[u] + pending[u] for u in range(n)])
        for u in waiting:
            got[u] += held[u] * dt
            due[u] += fair[u] * dt
    tenants: dict[str, dict[str, Any]] = {}
    service = []
    for name, k in idx.items():
        ratio = got[k] / due[k] if due[k] > 0 else None
        if ratio is not None:
            service.append(ratio)
        tenants[name] = {
            "jobs": count[k],
            "gpu_hours": hours[k],
            "wait_mean": wait[k] / count[k] if count[k] else 0.0,
            "service": ratio,
        }
    return {"tenants": tenants, "jain_service": jain(service) if len(service) > 1 else None}


def _max_min(capacity: float, demand: list[float]) -> list[float]:
    """Max-min fair division of ``capacity`` among ``demand`` (water-filling)."""
    out = [0.0] * len(demand)
    wanting = sorted((d, u) for u, d in enumerate(demand) if d > EPS)
    left = capacity
    for i, (d, u) in enumerate(wanting):
        part = left / (len(wanting) - i)
        out[u] = min(d, part)
        left -= out[u]
    return out
