"""The local queue runs a job on this one machine, its command once (issue 22.9): ``-N 2`` or
``--ntasks-per-node 4`` (berth submit, a script's #SBATCH line, a client's raw request) is
refused with the reason and what to use instead (--backend slurm), and nothing is queued."""

from __future__ import annotations

import os

import pytest

from berth.client import DaemonError

GOOD = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/"}


def test_the_daemon_refuses_several_nodes_or_tasks_and_queues_nothing(daemon):
    daemon.start()
    for fields, said in (
        ({"nodes": 2}, "-N 2: the local queue runs on one machine; use --backend slurm"),
        ({"ntasks_per_node": 4}, "--ntasks-per-node 4: the local queue runs the command once"),
    ):
        with pytest.raises(DaemonError) as e:
            daemon.call("submit", job={**GOOD, **fields})
        assert e.value.code == "BAD_REQUEST" and said in str(e.value)
        assert "nothing was queued" in str(e.value)
    assert daemon.call("queue", all=True)["jobs"] == []
    one = daemon.call("submit", job={**GOOD, "nodes": 1, "ntasks_per_node": 1})
    assert daemon.wait_done([one["job_id"]])[one["job_id"]]["state"] == "COMPLETED"


def test_submit_refuses_them_before_sending(daemon, tmp_path):
    daemon.start()
    for args, said in (
        (["-N", "2"], "-N 2: the local queue runs on one machine; use --backend slurm"),
        (["--nodes", "3", "-g", "2"], "-N 3: the local queue runs on one machine"),
        (["--ntasks-per-node", "2"], "--ntasks-per-node 2: the local queue runs the command"),
    ):
        out = daemon.berth("submit", *args, "--", "true")
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH --nodes=2 --ntasks-per-node=4\ntrue\n")
    os.chmod(script, 0o755)
    out = daemon.berth("submit", str(script))
    assert out.returncode == 2 and "-N 2: the local queue runs on one machine" in out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
