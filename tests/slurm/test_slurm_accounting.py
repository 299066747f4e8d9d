"""With and without Slurm's accounting (slurmdbd + MariaDB, what sacct reads): what berth says
of jobs the controller has forgotten (as it does after MinJobAge, or a restart that cleared
its state)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until
from slurmkit import start_cluster
from slurmrig import SlurmRig

from berth.backends.slurm import Slurm
from berth.errors import UsageError
from berth.wire.jobspec import JobSpec


@pytest.fixture(scope="module", params=[False, True], ids=["no-accounting", "accounting"])
def forgetful(request: pytest.FixtureRequest) -> Iterator[SlurmRig]:
    """The session's cluster (no accounting), or one with accounting of this module's own.
    The test restarts its controller with its state cleared: no other test minds."""
    if request.param:
        yield from start_cluster(accounting=True)
    else:
        yield request.getfixturevalue("slurm_cluster")


@pytest.fixture
def backend(
    forgetful: SlurmRig, fake_gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Slurm, dict[str, str]]]:
    monkeypatch.setenv("SLURM_CONF", forgetful.conf)
    env = {**fake_gpus.env, **forgetful.env}
    try:
        yield Slurm(log_dir=os.path.join(str(fake_gpus.root), "logs")), env
    finally:
        forgetful.clear()


KILLED = (("CANCELLED", 143), ("CANCELLED", 137))  # 128 + TERM, or KILL after KillWait


def test_ended_jobs_exit_codes_before_and_after_the_controller_forgets(
    forgetful: SlurmRig, backend: tuple[Slurm, dict[str, str]], tmp_path: Any
) -> None:
    b, env = backend
    assert b.accounting() is forgetful.accounting

    def job(script: str) -> str:
        return b.submit(JobSpec.from_dict({"argv": ["sh", "-c", script], "env": env,
                                           "cwd": str(tmp_path), "gpus": 1})).id  # fmt: skip

    ok, bad, killed = job("echo fine"), job("echo broken; exit 3"), job("sleep 60")
    wait_until(lambda: b.status([killed])[killed].state == "RUNNING", timeout=20)
    b.cancel([killed])
    for i in (ok, bad, killed):
        info = b.wait(i, 30)
        assert info is not None and info.finished
    before = b.status([ok, bad, killed])
    assert [(before[i].state, before[i].exit_code) for i in (ok, bad)] == [
        ("COMPLETED", 0), ("FAILED", 3),
    ]  # fmt: skip
    # 128 + the signal that ended it: TERM, or KILL where the step outlived the rig's
    # KillWait=2 (seen once at load 10): the one rule either way, never 0 or None.
    assert (before[killed].state, before[killed].exit_code) in KILLED

    if forgetful.accounting:  # sacct's time-window queries lag the jobs' end by a second
        wait_until(
            lambda: {ok, bad, killed} <= set(forgetful.run("sacct", "-n", "-X", "-o", "JobID",
                                                   "--allusers", "-S", "now-1hour").stdout.split()),
            timeout=20, message="accounting has recorded both jobs",
        )  # fmt: skip
    forgetful.forget()
    after = b.status([ok, bad, killed])
    ended = {j.id for j in b.list(finished=True)}
    if forgetful.accounting:  # sacct still knows them, and what they asked (ReqTRES)
        assert [(after[i].state, after[i].exit_code, after[i].gpus) for i in (ok, bad)] == [
            ("COMPLETED", 0, "1"), ("FAILED", 3, "1"),
        ]  # fmt: skip
        assert (after[killed].state, after[killed].exit_code) in KILLED
        assert {ok, bad} <= ended
        assert b.cancel([ok]) == {ok: "already COMPLETED"}
    else:  # nobody knows them any more
        assert after == {} and not {ok, bad} & ended
        with pytest.raises(UsageError, match=f"no job {ok}:"):
            b.cancel([ok])
    # Either way berth's own record still finds their output.
    assert open(b.logs(bad)[0]).read() == "broken\n"
    assert b.show(bad)["berth"]["id"] == bad
