"""The simulator half of "the simulator and the daemon share one policy": the scenario in
data/shared_scenario.json, replayed by the simulator, starts its jobs in the recorded waves
on the recorded GPUs. The daemon's tests run the same file against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from berth.core.inventory import GIB
from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from berth.sim.workload import inventory

SCENARIO = Path(__file__).parent / "data" / "shared_scenario.json"


def test_simulator_starts_the_scenario_in_its_waves() -> None:
    sc: dict[str, Any] = json.loads(SCENARIO.read_text())
    jobs = [
        SimJob(
            i,
            0.0,
            j["duration"],
            float(j["gpus"]),
            priority=j["priority"],
            name=j["name"],
            mem=int(j["mem_gib"] * GIB) if "mem_gib" in j else None,
            gpu_ids=tuple(j["gpu_ids"]) if "gpu_ids" in j else None,
        )
        for i, j in enumerate(sc["jobs"], 1)
    ]
    res = simulate(jobs, inventory(f"{sc['gpus']}:{sc['memory_gib']}G"), policy=sc["policy"])
    waves: dict[float, set[str]] = {}
    for i, j in enumerate(res.jobs):
        waves.setdefault(res.start[i], set()).add(j.name)
    assert [waves[t] for t in sorted(waves)] == [set(w) for w in sc["waves"]]
    assert {j.name: list(res.placed[i]) for i, j in enumerate(res.jobs)} == sc["gpus_of"]
