"""What releasing idle holders would save (issue 25, `berth simulate --idle-reclaim 2h`): an
estimate for the admin, from a model, not a measurement.

Traces record how long jobs ran, not how long their GPUs sat idle. The model: a share of
the jobs (``idle_share``, drawn with ``seed``) keep holding their GPUs idle for ``idle_tail``
after their work (a notebook left open, a process waiting for input). Without reclaim such a
job holds its GPUs for its work plus the tail; with ``--idle-reclaim T`` berth releases it
after T idle (the daemon's ``[enforce] idle = "release"`` with ``idle_after`` + ``idle_grace``
= T), so it holds them for its work plus min(tail, T). Both are replayed through the same
scheduler (:func:`berth.sim.engine.simulate`) and compared: the GPU-hours held idle, the
waits of every job, the makespan. A time limit stretches with the tail (the holder kept
its GPUs that long without reclaim: that is the case being estimated).
"""

from __future__ import annotations

import copy
import random
from typing import Any

from berth.core.policy import DEFAULT_POLICY
from berth.sim.engine import simulate
from berth.sim.metrics import metrics
from berth.sim.traces import SimJob
from berth.sim.workload import Inventory


def idle_jobs(jobs: list[SimJob], share: float, seed: int) -> set[int]:
    """The ids of the jobs that hold their GPUs idle after their work (about ``share``)."""
    rng = random.Random(seed)
    return {j.id for j in jobs if rng.random() < share}


def _held(jobs: list[SimJob], idle: set[int], hold: float) -> list[SimJob]:
    out = copy.deepcopy(jobs)
    for j in out:
        if j.id in idle and hold > 0:
            j.duration += hold
            if j.time_limit is not None:
                j.time_limit += hold
    return out


def estimate(
    jobs: list[SimJob],
    inv: Inventory,
    *,
    reclaim: float,
    idle_share: float,
    idle_tail: float,
    seed: int = 0,
    policy: str = DEFAULT_POLICY,
) -> dict[str, Any]:
    """Replay without and with reclaim after ``reclaim`` seconds idle; the two rows and what
    reclaim saves (GPU-hours held idle, mean and 99th percentile wait, makespan)."""
    idle = idle_jobs(jobs, idle_share, seed)
    rows: dict[str, dict[str, Any]] = {}
    for name, hold in (("without", idle_tail), ("with", min(idle_tail, reclaim))):
        held = _held(jobs, idle, hold)
        m = metrics(simulate(held, inv, policy=policy, timeline=False))
        idle_hours = sum(j.gpus * hold for j in held if j.id in idle) / 3600
        rows[name] = {
            "idle_gpu_hours": idle_hours,
            "wait_mean": m.get("wait_mean", 0.0),
            "wait_p99": m.get("wait_p99", 0.0),
            "makespan": m.get("makespan", 0.0),
        }
    saved = {k: rows["without"][k] - rows["with"][k] for k in rows["without"]}
    model = {"jobs": len(jobs), "idle_jobs": len(idle), "idle_share": idle_share,
             "idle_tail": idle_tail, "reclaim_after": reclaim, "seed": seed, "policy": policy}  # fmt: skip
    return {
        "estimate": True,
        "model": model,
        "without_reclaim": rows["without"],
        "with_reclaim": rows["with"],
        "saved": saved,
    }
