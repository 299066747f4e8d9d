"""Prepare a workload from a trace and compare policies on it (used by the CLI and bench/)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.core.fairshare import DEFAULT_HALF_LIFE
from berth.core.policy import DEFAULT_PLACEMENT, DEFAULT_POLICY, POLICIES, check_policy
from berth.core.reservations import Window
from berth.errors import UsageError
from berth.sim import gpuspec, traces, workload
from berth.sim.engine import RunResult, simulate
from berth.sim.metrics import metrics
from berth.sim.traces import SimJob

WEEK = 7 * 86400.0


@dataclass(slots=True)
class Workload:
    jobs: list[SimJob]
    inv: workload.Inventory
    load: float | None  # the offered load after scaling (None: as recorded)
    native_load: float
    dropped: int = 0
    notes: list[str] = field(default_factory=list)


def prepare(
    path: str,
    *,
    fmt: str = "auto",
    inventory: str = "8",
    load: float | None = None,
    scale: str = "stretch",
    start_day: float = 0.0,
    days: float | None = None,
    max_duration: float | None = WEEK,
    time_limits: str = "exact",
    poisson: int | None = None,
    seed: int = 0,
) -> Workload:
    """Read, window, filter, cap, scale and give time limits: a workload ready to replay."""
    inv = workload.inventory(inventory)
    cap = workload.capacity(inv)
    notes: list[str] = []
    jobs = traces.read(path, fmt, need_times=True, notes=notes)
    if start_day or days is not None:
        whole = jobs
        jobs = workload.window(jobs, start_day, days)
        if not jobs:
            span = max((j.submit for j in whole), default=0.0) / 86400
            end = "" if days is None else f" to day {start_day + days:g}"
            raise UsageError(
                f"no job of {path!r} arrives from day {start_day:g}{end} (its jobs arrive "
                f"from day 0 to day {span:.1f}, counted from its first): choose --start-day "
                "and --days within that"
            )
    unsat = gpuspec.resolve(jobs, inv[0])  # gpu_spec -> the GPUs each job may use
    if unsat:
        notes.append("dropped " + gpuspec.describe(unsat))
        bad = {id(j) for j in unsat}
        jobs = [j for j in jobs if id(j) not in bad]
    keep = [j for j in jobs if workload.fits(j, inv) and j.duration > 0]
    if not any(n.cpu is not None for n in inv[1].values()):
        keep = [j for j in keep if j.gpus > 0]  # CPU-only pods mean something only with CPUs
    dropped = len(jobs) - len(keep)
    if dropped:
        notes.append(f"dropped {dropped} jobs that can never run here (or need no GPU)")
    if max_duration is not None:
        capped = sum(1 for j in keep if j.duration > max_duration)
        for j in keep:
            j.duration = min(j.duration, max_duration)
        if capped:
            notes.append(f"capped {capped} durations at {max_duration / 86400:g} days")
    if not keep:
        raise UsageError(f"no job of {path!r} can run on inventory {inventory!r}")
    native = workload.offered_load(keep, cap)
    if poisson:
        keep = workload.poisson(keep, cap, load or 0.9, poisson, seed)
        notes.append(f"{poisson} jobs drawn from the trace's shapes, Poisson arrivals")
    elif load is not None:
        keep = workload.scale_to(keep, cap, load, scale, seed)
    workload.time_limits(keep, time_limits)
    final = workload.offered_load(keep, cap)
    return Workload(keep, inv, final, native, dropped + len(unsat), notes)


def policy_list(text: str, known: tuple[str, ...] = POLICIES) -> list[str]:
    names = list(known) if text == "all" else [t.strip() for t in text.split(",") if t.strip()]
    for n in names:
        if n not in known:
            raise UsageError(f"unknown name {n!r}: use one of {', '.join(known)} (or all)")
    return names


def compare(
    wl: Workload,
    policies: list[str] | None = None,
    placements: list[str] | None = None,
    fairshare: tuple[bool, ...] = (False,),
    half_life: float = DEFAULT_HALF_LIFE,
    reservations: Sequence[Window] = (),
    predict: tuple[bool, ...] = (False,),
) -> tuple[list[dict[str, Any]], list[tuple[str, RunResult]]]:
    """Run every (policy, placement, fair share off/on, predict off/on) on copies of the
    workload: metric rows and results. ``reservations``: admin reservations kept in every
    run; ``predict``: backfill by learned run times ([scheduling] predict) off, on, or both."""
    rows: list[dict[str, Any]] = []
    results: list[tuple[str, RunResult]] = []
    for policy in policies or [DEFAULT_POLICY]:
        for placement in placements or [DEFAULT_PLACEMENT]:
            for fair, learned in ((f, p) for f in fairshare for p in predict):
                check_policy(policy, placement)
                res = simulate(
                    copy.deepcopy(wl.jobs), wl.inv, policy=policy, placement=placement,
                    fairshare=fair, half_life=half_life, reservations=reservations,
                    predict=learned,
                )  # fmt: skip
                m = metrics(res)
                m["load"] = wl.load
                rows.append(m)
                label = m["policy"]
                if placements and len(placements) > 1:
                    label += f"/{placement}"
                results.append((label, res))
    return rows, results
