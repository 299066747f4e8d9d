"""The daemon packs a mixed fractional queue as the simulator does (issue 32.4: "every
decision stays in core/ and is shared by the daemon and the simulator"): the same queue of
openb-like shares, all pending at once on 4 fake 80 GiB GPUs under the packer (the default
placement), starts the same jobs on the same GPUs through a real daemon as in ``berth
simulate``'s first pass, and allocates the same share of the GPUs."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client
from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from berth.sim.workload import inventory

from .conftest import WORKLOAD

GPUS = 4
# openb's common fractional sizes: 3.39 GPUs asked of 4
MIX = [0.16, 0.23, 0.5, 0.32, 0.55, 0.5, 0.32, 0.81]
RUN = 3600.0  # none ends while the test looks


def simulated(placement: str = "packer") -> dict[str, list[int]]:
    """The simulator's first pass: each started job's GPUs."""
    jobs = [SimJob(i, 0.0, RUN, g, time_limit=RUN, name=f"j{i}") for i, g in enumerate(MIX, 1)]
    res = simulate(jobs, inventory(f"{GPUS}:80G"), placement=placement)
    return {j.name: list(res.placed[i]) for i, j in enumerate(res.jobs) if res.start[i] == 0.0}


def test_the_mix_is_one_the_placement_decides() -> None:
    """(The test below would not tell the packer from a plainer placement otherwise.)"""
    packed = simulated()
    assert packed != simulated("best-fit")
    assert sum(MIX[int(n[1:]) - 1] for n in packed) > 3.0  # most of the 4 GPUs


@pytest.mark.parametrize("live", [(None, GPUS)], indirect=True)
def test_the_daemon_places_the_mix_as_the_simulator(live: tuple[Any, str, Any]) -> None:
    env, sock, fake = live
    want = simulated()
    every = [str(g) for g in range(GPUS)]
    names: dict[int, str] = {}
    with Client(sock) as c:
        c.call("pause", gpus=every)  # nothing starts until the whole queue is in
        for i, g in enumerate(MIX, 1):
            job = {"argv": [sys.executable, WORKLOAD, "--seconds", str(RUN)], "env": env,
                   "cwd": str(fake.root), "name": f"j{i}", "gpus": g, "time_limit": RUN}  # fmt: skip
            names[int(c.call("submit", job=job)["job_id"])] = f"j{i}"
        c.call("resume", gpus=every)

    def running() -> dict[str, list[int]] | None:
        with Client(sock) as c:
            rows = c.call("queue", all=True)["jobs"]
            up = [r["id"] for r in rows if r["state"] == "RUNNING" and r["id"] in names]
            if len(up) < len(want):
                return None
            return {names[i]: c.call("show", job_id=i)["job"]["attempts"][0]["gpus"] for i in up}

    got = wait_until(running, timeout=30, interval=0.05, message="the first pass's jobs run")
    assert got == want
    placed = sum(MIX[int(n[1:]) - 1] for n in got)
    assert placed == pytest.approx(sum(MIX[int(n[1:]) - 1] for n in want))
