"""Many `berth run` processes at once on 4 fake GPUs: all complete, no GPU is oversubscribed.

Each command is the fake workload with --record: its start/end lines (with the GPUs it saw
through CUDA_VISIBLE_DEVICES, as CUDA would) are the evidence."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

GIB = 1 << 30


def _spawn(fake_gpus: Any, record: Path, job: str, *berth_args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "berth.cli.main", "run", *berth_args, "--"]
    cmd += fake_gpus.workload_cmd("--seconds", "0.3", "--mem", "2G", "--record", str(record))
    return subprocess.Popen(
        cmd,
        env={**fake_gpus.env, "BERTH_JOB_ID": job},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _intervals(record: Path) -> list[dict[str, Any]]:
    starts: dict[int, dict[str, Any]] = {}
    out = []
    for line in record.read_text().splitlines():
        ev = json.loads(line)
        if ev["event"] == "start":
            starts[ev["pid"]] = ev
        else:
            s = starts.pop(ev["pid"])
            out.append({"job": s["job"], "gpus": s["gpus"], "start": s["time"], "end": ev["time"]})
    assert not starts, f"workloads that never ended: {starts}"
    return out


def _finish(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"berth run failed ({p.returncode}): {err}"


def test_48_exclusive_runs_never_share_a_gpu(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=4, memory="80G")
    record = tmp_path / "record.jsonl"
    procs = [_spawn(fake_gpus, record, f"x{i}", "-g", "1") for i in range(48)]
    _finish(procs)
    runs = _intervals(record)
    assert len(runs) == 48
    assert all(len(r["gpus"]) == 1 for r in runs)
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_gpu.setdefault(r["gpus"][0], []).append(r)
    assert len(by_gpu) == 4  # every GPU was used
    for uuid, rs in by_gpu.items():
        rs.sort(key=lambda r: r["start"])
        for a, b in itertools.pairwise(rs):
            assert a["end"] <= b["start"], f"two jobs on {uuid} at once: {a} and {b}"


def test_mixed_shares_respect_share_and_memory(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=4, memory="80G")
    record = tmp_path / "record.jsonl"
    procs = []
    for i in range(36):
        if i % 3 == 0:
            procs.append(_spawn(fake_gpus, record, f"two{i}", "-g", "2"))
        else:
            procs.append(_spawn(fake_gpus, record, f"half{i}", "-g", "0.5", "--mem", "30G"))
    _finish(procs)
    runs = _intervals(record)
    assert len(runs) == 36
    for r in runs:
        assert len(r["gpus"]) == (2 if r["job"].startswith("two") else 1)
    # Sweep every instant: per GPU, the sum of shares <= 1 and declared memory <= 80G.
    events = []
    for r in runs:
        share, mem = (1.0, 0) if r["job"].startswith("two") else (0.5, 30 * GIB)
        for g in r["gpus"]:
            events.append((r["start"], 1, g, share, mem))
            events.append((r["end"], 0, g, -share, -mem))
    events.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same instant
    load: dict[str, list[float]] = {}
    shared_seen = False
    for _t, _kind, g, share, mem in events:
        cur = load.setdefault(g, [0.0, 0.0])
        cur[0] += share
        cur[1] += mem
        assert cur[0] <= 1.0 + 1e-9, f"GPU {g} oversubscribed: share {cur[0]}"
        assert cur[1] <= 80 * GIB, f"GPU {g} memory over 80G: {cur[1] / GIB} GiB"
        shared_seen = shared_seen or (abs(cur[0] - 1.0) < 1e-9 and cur[1] == 60 * GIB)
    assert shared_seen, "two half shares never ran together on one GPU"
