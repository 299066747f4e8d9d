"""A pending reason in words a person would write (issue 40.3): a GPU a daemonless waiter
reserves is "reserved by a waiting `berth run`", never "held by reserved by ..."."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from helpers import wait_until

from berth.api.lease import build_request, claim
from berth.claims.ledger import Ledger

WAITER = """
import berth
with berth.acquire(2, timeout=60, poll=60) as lease:
    print("got", flush=True)
"""


def test_a_gpu_a_waiter_reserves_is_said_reserved_not_held_by_reserved(daemon: Any) -> None:
    daemon.fake.setup(n=2, memory="80G")
    daemon.start("--poll-interval", "1", gpus=None)
    held, _ = claim(build_request(1, only="0"), timeout=0)
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER], env=daemon.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: [len(w.reserve) for w in Ledger().scan().waiters] == [2], timeout=10)
        job = daemon.submit("true", gpus=1)

        def reserved() -> str | None:
            out = daemon.berth("show", str(job)).stdout
            return out if "reserved" in out else None

        shown = wait_until(reserved, timeout=10, message="the job to wait for the reservation")
        assert "GPU 1 reserved by a waiting `berth run`" in shown, shown
        assert "GPU 0 held by claim by" in shown, shown
        assert "held by reserved" not in shown
        queue = daemon.berth("queue", "--json").stdout
        assert "held by reserved" not in queue and "GPU 1 reserved by a waiting" in queue
    finally:
        os.killpg(waiter.pid, signal.SIGKILL)
        waiter.communicate()
        held.release()
