"""`berth simulate --what-if` against a real daemon on fake GPUs."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client

from .conftest import WORKLOAD


def test_what_if_predicts_from_time_limits(live: tuple[Any, str, Any]) -> None:
    env, sock, fake = live
    work = [sys.executable, WORKLOAD, "--seconds", "120"]

    def submit(**job: Any) -> int:
        with Client(sock) as c:
            return int(
                c.call("submit", job={"argv": work, "env": env, "cwd": str(fake.root), **job})[
                    "job_id"
                ]
            )

    a = submit(gpus=1, time_limit=600.0)
    b = submit(gpus=1, time_limit=1200.0)
    c = submit(gpus=2, time_limit=300.0)

    def running() -> bool:
        with Client(sock) as cl:
            states = {r["id"]: r["state"] for r in cl.call("queue")["jobs"]}
        return states.get(a) == "RUNNING" and states.get(b) == "RUNNING"

    wait_until(running, timeout=15, message="two jobs run")
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json",
         "-g", "1", "-t", "1h"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    preds = {p["id"]: p for p in reply["jobs"]}
    with Client(sock) as cl:
        starts = {j: cl.call("show", job_id=j)["job"]["attempts"][0]["start"] for j in (a, b)}
    # the 2-GPU job waits for both: until b's limit
    assert preds[c]["start"] == pytest.approx(starts[b] + 1200.0, abs=1e-6)
    assert preds[c]["exact"]
    new = next(p for p in reply["jobs"] if p["yours"])
    # balanced: the new 1-GPU job may not delay c (its 1 h > the time to c's start)
    assert new["start"] == pytest.approx(preds[c]["end"], abs=1e-6)
