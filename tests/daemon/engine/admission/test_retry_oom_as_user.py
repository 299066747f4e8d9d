"""docs/daemon.md, `--retry-oom`: the retry is a new job the daemon (root, on the system
daemon) queues itself; it "goes through submit's checks as you". So it is the submitter's job,
run as them: never a job of root's, whatever the daemon runs as.

Needs root (to act as the users), as CI runs the suite.
"""

from __future__ import annotations

import os
import pwd
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def test_the_retry_of_a_users_job_is_theirs_and_runs_as_them(system: System) -> None:
    system.start()
    first = system.submit(
        A, "-g", "0.5", "--retry-oom", "--wrap", "id -u; echo 'CUDA out of memory' >&2; exit 1"
    )
    retry = wait_until(
        lambda: next((j["id"] for j in system.rig.call("queue", all=True)["jobs"]
                      if j["id"] != first), None),
        timeout=30, message="the retry to be queued",
    )  # fmt: skip
    done = system.rig.wait_done([first, retry])
    assert done[first]["state"] == "FAILED"
    uid = pwd.getpwnam(A).pw_uid
    row = system.rig.job(retry)
    assert (row["uid"], row["user"]) == (uid, A)
    assert row["request"]["gpus"] == 1  # (a whole GPU: it is the retry)
    with open(row["stdout"]) as f:
        assert f.read().splitlines()[0] == str(uid)  # it ran as A
    assert os.stat(row["stdout"]).st_uid == uid
