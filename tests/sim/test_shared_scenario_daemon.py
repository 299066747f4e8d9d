"""The daemon half of "the simulator and the daemon share one policy": the scenario of
data/shared_scenario.json through a real daemon on 2 fake GPUs starts its jobs in the same
waves, on the same GPUs, as the simulator does (test_shared_scenario.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client
from berth.core.inventory import GIB

from .conftest import WORKLOAD

SCENARIO = Path(__file__).parent / "data" / "shared_scenario.json"


@pytest.mark.parametrize("live", [json.loads(SCENARIO.read_text())["policy"]], indirect=True)
def test_daemon_starts_the_scenario_in_the_simulators_waves(live: tuple[Any, str, Any]) -> None:
    env, sock, fake = live
    sc: dict[str, Any] = json.loads(SCENARIO.read_text())
    names: dict[int, str] = {}
    with Client(sock) as c:
        c.call("pause", gpus=["0", "1"])  # nothing starts until every job is queued
        for j in sc["jobs"]:
            job: dict[str, Any] = {
                "argv": [sys.executable, WORKLOAD, "--seconds", str(j["duration"])],
                "env": env, "cwd": str(fake.root), "name": j["name"], "gpus": j["gpus"],
                "priority": j["priority"],
            }  # fmt: skip
            if "mem_gib" in j:
                job["mem"] = int(j["mem_gib"] * GIB)
            if "gpu_ids" in j:
                job["gpu_ids"] = j["gpu_ids"]
            names[int(c.call("submit", job=job)["job_id"])] = j["name"]
        c.call("resume", gpus=["0", "1"])

    def finished() -> dict[int, dict[str, Any]] | None:
        with Client(sock) as c:
            rows = {r["id"]: r for r in c.call("queue", all=True)["jobs"]}
            if all(rows.get(i, {}).get("state") == "COMPLETED" for i in names):
                return {i: c.call("show", job_id=i)["job"] for i in names}
        return None

    jobs = wait_until(finished, timeout=60, interval=0.05, message="scenario jobs complete")
    waves: dict[float, set[str]] = {}
    for i, job in jobs.items():
        assert len(job["attempts"]) == 1
        waves.setdefault(job["attempts"][0]["start"], set()).add(names[i])
    assert [waves[t] for t in sorted(waves)] == [set(w) for w in sc["waves"]]
    placed = {names[i]: job["attempts"][0]["gpus"] for i, job in jobs.items()}
    assert placed == sc["gpus_of"]
    # and the daemon's own store replays in the simulator (berth simulate berth.db)
    import os

    from berth.sim import traces

    replay = traces.read(os.path.join(fake.state_dir, "berth.db"))
    assert sorted((j.name, j.gpus) for j in replay) == sorted(
        (j["name"], float(j["gpus"])) for j in sc["jobs"]
    )
