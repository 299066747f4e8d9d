"""What a reservation costs the queue (issue 24.1): `berth simulate --what-if --reserve-gpus N
--reserve-start T --reserve-duration D` replays the queue without and with it; the daemon's
own reservations are replayed in every what-if."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client
from berth.core import GIB, Gpu, Job, Request, Window
from berth.sim.reservecost import choose, cost, summary

from .conftest import WORKLOAD

H = 3600.0


def test_the_cost_of_a_reservation_on_a_constructed_queue() -> None:
    inv = [Gpu(i, f"GPU-{i}", "A100", 80 * GIB) for i in range(2)]
    wide = Job(id=1, submit_time=0.0, request=Request(gpus=2), user="bob", time_limit=10 * H)
    short = Job(id=2, submit_time=1.0, request=Request(gpus=1), user="carol", time_limit=H)
    win = Window(9, (0, 1), 5 * H, 7 * H, frozenset({"alice"}), label="alice")
    delays = {d.job_id: d for d in cost([wide, short], [], inv, 0.0, win,
                                        policy="fifo-backfill")}  # fmt: skip
    # without: wide runs 0-10 h, short after it; with: wide would run into the window, so
    # short goes first and wide starts when the window ends
    assert (delays[1].before, delays[1].after) == (0.0, 7 * H)
    assert (delays[2].before, delays[2].after) == (10 * H, 0.0)
    total = summary(list(delays.values()))
    assert total["delayed"] == 1 and total["total_delay"] == 7 * H
    assert total["gpu_hours"] == pytest.approx(14.0) and total["max_delay"] == 7 * H
    assert total["never"] == []


def test_gpus_by_count_are_chosen_as_the_daemon_chooses() -> None:
    inv = [Gpu(i, f"GPU-{i}", "A100", 80 * GIB) for i in range(4)]
    kept = [Window(1, (0, 2), 0.0, H, frozenset({"x"}))]
    assert choose(inv, 2, H / 2, 2 * H, kept) == (1, 3)  # overlaps reservation 1
    assert choose(inv, 2, H, 2 * H, kept) == (0, 1)  # right after it: free


def _what_if(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    reply: dict[str, Any] = json.loads(out.stdout)
    return reply


def test_what_a_reservation_would_cost_then_the_same_one_made(live: tuple[Any, str, Any]) -> None:
    env, sock, fake = live
    work = [sys.executable, WORKLOAD, "--seconds", "120"]
    with Client(sock) as c:
        base = {"env": env, "cwd": str(fake.root)}
        held = c.call("submit", job={"argv": work, "gpus": 2, "time_limit": 600.0, **base})
        waiting = c.call("submit", job={"argv": work, "gpus": 2, "time_limit": H, **base})
    first, second = int(held["job_id"]), int(waiting["job_id"])

    def running() -> bool:
        with Client(sock) as cl:
            return any(r["id"] == first and r["state"] == "RUNNING"
                       for r in cl.call("queue")["jobs"])  # fmt: skip

    wait_until(running, timeout=15, message="the first job runs")
    with Client(sock) as cl:
        began = cl.call("show", job_id=first)["job"]["attempts"][0]["start"]
    start = time.time() + 1200  # in 20 minutes, for an hour: the 1 h job would run into it
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start))
    start = time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S"))
    reply = _what_if(env, "--reserve-gpus", "2", "--reserve-start", when,
                     "--reserve-duration", "1h")  # fmt: skip
    assert reply["reservation"]["gpus"] == [0, 1]
    row = next(j for j in reply["jobs"] if j["id"] == second)
    assert row["without"] == pytest.approx(began + 600.0, abs=1e-6)
    assert row["with"] == pytest.approx(start + H, abs=1e-6)  # when the window ends
    assert reply["delayed"] == 1 and reply["gpu_hours"] == pytest.approx(
        2 * (start + H - began - 600.0) / H, abs=1e-6)  # fmt: skip
    made = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "admin", "reserve", "--user", "nobody",
         "-g", "2", "--start", when, "--duration", "1h"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    plain = _what_if(env)  # the daemon's reservation, replayed in every what-if
    assert next(j for j in plain["jobs"] if j["id"] == second)["start"] == pytest.approx(
        start + H, abs=1e-6)  # fmt: skip
