"""Inventories and load scaling for replays.

Inventory specs (``--inventory``): ``8`` (one host, 8 GPUs of 80 GiB), ``8:40G`` (memory per
GPU), ``8x8`` (8 nodes of 8 GPUs), ``8x8:80G``, or the path of an openb node list CSV
(``sn,cpu_milli,memory_mib,gpu,model``: heterogeneous nodes with CPU and RAM).

Offered load (the traces' README): rho = sum(gpus x duration) / (capacity x span). Two ways to
reach a target rho: *time-stretch* (scale submit times; keeps order and mix) and *thinning*
(keep each job with probability rho_target / rho_native; keeps the burst shape).
"""

from __future__ import annotations

import random
import re

from berth.core.inventory import Gpu, Node, uniform
from berth.errors import UsageError
from berth.sim.csvrows import rows
from berth.sim.traces import MIB, SimJob, normalise
from berth.units import parse_size

Inventory = tuple[list[Gpu], dict[str, Node]]


def inventory(spec: str) -> Inventory:
    """Parse an inventory spec (see the module docstring)."""
    m = re.fullmatch(r"\s*(\d+)(?:x(\d+))?(?::(\S+))?\s*", spec)
    if m:
        a, b, mem = m.groups()
        memory = parse_size(mem, what="GPU memory") if mem else 80 * 1024**3
        if b is None:
            gpus, nodes = int(a), 1
        else:
            nodes, gpus = int(a), int(b)
        if gpus < 1 or nodes < 1:
            raise UsageError(f"invalid inventory {spec!r}: needs at least one GPU")
        return uniform(gpus, memory, nodes=nodes)
    return node_list(spec)


def node_list(path: str) -> Inventory:
    """An openb node list: nodes with their GPUs, CPU (millicores) and RAM."""
    gpus: list[Gpu] = []
    nodes: dict[str, Node] = {}
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for r in rows(f, path, ("sn", "cpu_milli", "memory_mib", "gpu")):
                name = r.text("sn")
                if name in nodes:
                    raise r.error("sn", f"node {name!r} is listed twice; fix or remove that row")
                cpu, ram = r.number("cpu_milli"), int(r.number("memory_mib") * MIB)
                nodes[name] = Node(name, cpu, ram)
                model = r.text("model", "GPU")
                for _ in range(int(r.number("gpu", whole=True))):
                    i = len(gpus)
                    gpus.append(Gpu(i, f"GPU-{name}-{i}", model, None, True, name))
    except OSError as e:
        raise UsageError(
            f"inventory {path!r}: {e.strerror}; use e.g. 8, 8:40G, 8x8 or a node-list CSV"
        ) from None
    except UnicodeDecodeError as e:
        raise UsageError(f"inventory {path!r} is not text (UTF-8): {e.reason}") from None
    if not gpus:
        raise UsageError(f"inventory {path!r} has no GPUs")
    return gpus, nodes


def capacity(inv: Inventory) -> int:
    return len(inv[0])




def fits(job: SimJob, inv: Inventory) -> bool:
    """Whether the job could ever run on the inventory alone (a job bigger than every node
    spans nodes; otherwise it must fit on one)."""
    return job.gpus <= len(inv[0])


def offered_load(jobs: list[SimJob], gpus: int) -> float:
    """rho = GPU-seconds / (capacity x span of submit times)."""
    if len(jobs) < 2:
        return 0.0
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs)
    work = sum(j.gpu_seconds for j in jobs)
    return work / (gpus * span) if span > 0 else float("inf")


def stretch(jobs: list[SimJob], factor: float) -> list[SimJob]:
    """Multiply submit offsets by ``factor`` (> 1 lowers the load)."""
    t0 = min((j.submit for j in jobs), default=0.0)
    for j in jobs:
        j.submit = t0 + (j.submit - t0) * factor
    return jobs


def scale_to(jobs: list[SimJob], gpus: int, rho: float, how: str = "stretch",
             seed: int = 0) -> list[SimJob]:  # fmt: skip
    """Reach offered load ``rho`` by time-stretch or thinning."""
    native = offered_load(jobs, gpus)
    if rho <= 0 or native <= 0:
        raise UsageError(f"invalid load {rho!r}: must be positive (native load {native:.3f})")
    if how == "stretch":
        return stretch(jobs, native / rho)
    if how == "thin":
        if rho > native:
            raise UsageError(
                f"cannot thin to load {rho:g}: the trace's native load on {gpus} GPUs is "
                f"{native:.2f}; use --scale stretch to raise it"
            )
        rng = random.Random(seed)
        return normalise([j for j in jobs if rng.random() < rho / native])
    raise UsageError(f"unknown load scaling {how!r}: use stretch or thin")


def window(jobs: list[SimJob], start_day: float, days: float | None) -> list[SimJob]:
    """Jobs submitted in [start_day, start_day + days) (days from the trace start)."""
    lo = start_day * 86400.0
    hi = float("inf") if days is None else lo + days * 86400.0
    return normalise([j for j in jobs if lo <= j.submit < hi])


def poisson(jobs: list[SimJob], gpus: int, rho: float, n: int, seed: int) -> list[SimJob]:
    """``n`` jobs drawn (with replacement) from ``jobs``' shapes and durations, arriving as a
    Poisson process at offered load ``rho`` (for pod lists, which are not arrival streams)."""
    if not jobs:
        return []
    rng = random.Random(seed)
    mean_work = sum(j.gpu_seconds for j in jobs) / len(jobs)
    rate = rho * gpus / mean_work  # arrivals per second
    t = 0.0
    out = []
    for i in range(1, n + 1):
        src = jobs[rng.randrange(len(jobs))]
        out.append(SimJob(i, t, src.duration, src.gpus, src.tenant, src.priority, src.time_limit,
                          src.mem, src.cpu, src.ram, src.name, src.gpu_ids,
                          src.gpu_models))  # fmt: skip
        t += rng.expovariate(rate)
    return out


_ROUND = (600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 172800.0, 604800.0)


def time_limits(jobs: list[SimJob], model: str) -> list[SimJob]:
    """Give jobs the time limits users would have typed.

    ``none``: no limits (backfill can only use GPUs a blocked job cannot); ``exact``: the
    duration (an oracle); ``factor:F``: duration x F; ``round``: the duration rounded up to
    10m, 30m, 1h, 2h, 4h, 8h, 1d, 2d, 7d (what people type), else 2x duration.
    """
    if model == "keep":
        return jobs
    if model == "none":
        limit = None
    for j in jobs:
        if model == "none":
            j.time_limit = limit
        elif model == "exact":
            j.time_limit = max(1.0, j.duration)
        elif model == "round":
            j.time_limit = next((r for r in _ROUND if r >= j.duration), 2 * j.duration)
        elif model.startswith("factor:"):
            try:
                f = float(model.split(":", 1)[1])
            except ValueError:
                f = 0.0
            if f < 1:
                raise UsageError(f"invalid time-limit model {model!r}: factor must be >= 1")
            j.time_limit = max(1.0, j.duration * f)
        else:
            raise UsageError(
                f"unknown time-limit model {model!r}: use none, exact, round, factor:F or keep"
            )
    return jobs
