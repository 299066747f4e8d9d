"""Read the fake workload's --record file: start/end events per job, overlaps per GPU."""

from __future__ import annotations

import json
from typing import Any


def read(path: str) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def intervals(path: str) -> list[tuple[float, float, tuple[str, ...], str]]:
    """(start, end, gpus, job id) of every finished run."""
    starts: dict[int, dict[str, Any]] = {}
    out = []
    for ev in read(path):
        if ev["event"] == "start":
            starts[ev["pid"]] = ev
        elif ev["pid"] in starts:
            s = starts.pop(ev["pid"])
            out.append((s["time"], ev["time"], tuple(s["gpus"]), str(s["job"])))
    return out


def max_concurrency(path: str) -> int:
    points = []
    for start, end, _, _ in intervals(path):
        points += [(start, 1), (end, -1)]
    level = best = 0
    for _, d in sorted(points, key=lambda p: (p[0], p[1])):
        level += d
        best = max(best, level)
    return best


def max_per_gpu(path: str) -> dict[str, int]:
    """GPU uuid -> most runs that overlapped on it."""
    per: dict[str, list[tuple[float, int]]] = {}
    for start, end, gpus, _ in intervals(path):
        for g in gpus:
            per.setdefault(g, []).extend([(start, 1), (end, -1)])
    out = {}
    for g, points in per.items():
        level = best = 0
        for _, d in sorted(points, key=lambda p: (p[0], p[1])):
            level += d
            best = max(best, level)
        out[g] = best
    return out
