"""A real berth daemon on fake GPUs for the simulator's live tests (what-if, shared scenario).

``live`` (fixture) -> (env, socket path, fake_gpus): a daemon on 2 fake 80 GiB GPUs, under
the default policy or the one given (``@pytest.mark.parametrize("live", [POLICY],
indirect=True)``; ``[(POLICY or None, N)]``: on N GPUs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client
from berth.errors import BerthError

WORKLOAD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fakenvml", "workload.py")


@pytest.fixture
def live(fake_gpus: Any, request: pytest.FixtureRequest) -> Iterator[tuple[Any, str, Any]]:
    param: str | tuple[str | None, int] | None = getattr(request, "param", None)
    policy, n = param if isinstance(param, tuple) else (param, 2)
    fake_gpus.setup(n=n, memory="80G")
    sockdir = tempfile.mkdtemp(prefix="bw-", dir="/tmp")
    sock = os.path.join(sockdir, "d.sock")
    env = {**fake_gpus.env, "BERTH_SOCKET": sock}
    os.environ["BERTH_SOCKET"] = sock
    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground",
         *(["--policy", policy] if policy else [])],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def answers() -> bool:
        assert proc.poll() is None, "daemon exited"
        try:
            with Client(sock) as c:
                c.call("ping")
            return True
        except BerthError:
            return False

    try:
        wait_until(answers, timeout=15, message="daemon answers")
        yield env, sock, fake_gpus
    finally:
        try:
            with Client(sock) as c:
                ids = [r["id"] for r in c.call("queue")["jobs"]]
                if ids:
                    c.call("cancel", job_ids=ids)

            def drained() -> bool:
                with Client(sock) as c:
                    return not c.call("queue")["jobs"]

            wait_until(drained, timeout=15, message="cancelled jobs end")
        except BerthError:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(sockdir, ignore_errors=True)
