"""`berth simulate --what-if` counts what is used outside the queue (a daemonless claim) and
assumes it stays."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from helpers import wait_until

from berth.client import Client


def _what_if(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    reply: dict[str, Any] = json.loads(out.stdout)
    return next(p for p in reply["jobs"] if p["yours"])


def test_a_claim_outside_the_queue_is_counted(live: tuple[Any, str, Any]) -> None:
    env, sock, _fake = live
    holder = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "--only", "0", "--", "sleep", "60"],
        env=env,
    )
    try:

        def claimed() -> bool:
            with Client(sock) as c:
                gpus = c.call("status")["gpus"]
            return bool(gpus["0"].get("others", {}).get("share"))

        wait_until(claimed, timeout=15, message="the daemon sees the claim")
        one = _what_if(env, "-g", "1", "-t", "1h")
        assert one["gpus"] == [1] and one["start"] is not None  # GPU 0 is taken
        two = _what_if(env, "-g", "2", "-t", "1h")
        assert two["start"] is None  # both GPUs never free while the claim stays
    finally:
        holder.terminate()  # berth run passes it on to its command
        holder.wait()


def test_queue_start_is_what_if(live: tuple[Any, str, Any]) -> None:
    env, sock, fake = live
    with Client(sock) as c:
        for _ in range(3):
            c.call(
                "submit",
                job={
                    "argv": ["sleep", "30"],
                    "env": env,
                    "cwd": str(fake.root),
                    "time_limit": 600.0,
                },
            )
    run = [sys.executable, "-m", "berth.cli.main", "queue"]
    out = subprocess.run([*run, "--start", "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    [pending] = json.loads(out.stdout)["jobs"]  # 2 GPUs: the third job waits
    assert pending["id"] == 3 and pending["start"] is not None and pending["exact"]
    bad = subprocess.run([*run, "--start", "--all"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "not with -u, -t or --all" in bad.stderr
    with Client(sock) as c:
        c.call("cancel", all_mine=True)
