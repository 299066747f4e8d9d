"""Invariant 5: a user acts only on their own jobs; the daemon learns who calls from the
socket (SO_PEERCRED), never from the message."""

from __future__ import annotations

import os

import pytest
from userkit import NOBODY, request_as


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_touch_my_jobs_or_my_gpus(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), hold=True)
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)  # let nobody reach the socket: ownership must still hold
    for kind, fields in (
        ("cancel", {"job_ids": [job_id]}),
        ("release_job", {"job_ids": [job_id]}),
        ("pause", {"gpus": ["0"]}),
    ):
        reply = request_as(NOBODY, daemon.socket, kind, **fields)
        assert reply.get("code") == "NOT_OWNER", reply
    # Claiming to be root in the message changes nothing: the fields are refused.
    reply = request_as(NOBODY, daemon.socket, "cancel", job_ids=[job_id], uid=0)
    assert reply.get("code") == "BAD_REQUEST"
    assert daemon.job(job_id)["state"] == "PENDING" and daemon.job(job_id)["held"]
    # nobody's own job is recorded as theirs, from the socket, and runs as them.
    out_dir = os.path.join(daemon.sockdir, "out")
    os.mkdir(out_dir)
    os.chmod(out_dir, 0o777)
    spec = {"argv": ["id", "-u"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "stdout": os.path.join(out_dir, "%j.out"),
            "stderr": os.path.join(out_dir, "%j.err")}  # fmt: skip
    theirs = request_as(NOBODY, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    assert daemon.job(theirs)["uid"] == NOBODY
    row = daemon.wait_done([theirs])[theirs]
    assert row["state"] == "COMPLETED", daemon.job(theirs)["attempts"][0]["reason"]
    with open(os.path.join(out_dir, f"{theirs}.out")) as f:
        assert f.read().strip() == str(NOBODY)
