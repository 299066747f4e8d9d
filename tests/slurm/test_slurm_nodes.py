"""Jobs across nodes (``-N``, ``--ntasks-per-node``) on a real two-node test Slurm (n1, n2:
two slurmd on this host, 4 fake GPUs each; started once for this module): the batch script
runs the command under srun, one task per node and slot, each task with its own node's GPU
ids in ``{gpus}`` / ``--inject-arg``; the job's state and exit code are Slurm's."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until
from slurmkit import Cli, start_cluster
from slurmrig import SlurmRig


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[SlurmRig]:
    yield from start_cluster(nodes=2)


@pytest.fixture
def berth(fake_gpus: Any, two_nodes: SlurmRig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    for name, value in two_nodes.env.items():
        monkeypatch.setenv(name, value)
    try:
        yield Cli(fake_gpus, two_nodes)
    finally:
        two_nodes.clear()


# Each task writes what it is and what it got into a file of its own (named by its rank).
REPORT = (
    'printf "%s\\n" "$SLURMD_NODENAME" "$CUDA_VISIBLE_DEVICES" "$BERTH_GPUS" "$*" '
    '> "$0/task-$SLURM_PROCID"'
)


def _hog_n2(berth: Cli) -> str:
    """GPUs 0 and 1 of n2 taken by another job, so that the job's GPUs differ by node (n1:
    0,1; n2: 2,3)."""
    out = berth.slurm("sbatch", "--parsable", "-w", "n2", "--gres=gpu:2", "-o", "/dev/null",
                      "--wrap", "sleep 300")  # fmt: skip
    hog = out.stdout.strip()
    wait_until(
        lambda: berth.slurm("squeue", "-h", "-j", hog, "-o", "%T").stdout.strip() == "RUNNING",
        timeout=20, message="the job holding n2's GPUs 0,1 runs",
    )  # fmt: skip
    return hog


def _tasks(where: str) -> dict[int, list[str]]:
    out = {}
    for name in os.listdir(where):
        if name.startswith("task-"):
            with open(os.path.join(where, name)) as f:
                out[int(name[5:])] = f.read().splitlines()
    return out


def test_two_nodes_run_their_tasks_each_with_its_own_nodes_gpu_ids(
    berth: Cli, tmp_path: Any
) -> None:
    _hog_n2(berth)
    sub = berth("submit", "--parsable", "-N", "2", "--ntasks-per-node", "2", "-g", "2",
                "--inject-arg", "--ids=machine", "--",
                "sh", "-c", REPORT, str(tmp_path), "gpus={gpus}", "cuda={cuda}")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    done = berth("wait", job)
    assert done.returncode == 0, (done.stdout, done.stderr, berth("logs", job).stdout)
    tasks = _tasks(str(tmp_path))
    assert sorted(tasks) == [0, 1, 2, 3]  # 2 per node
    for rank, (node, visible, berth_gpus, args) in tasks.items():
        ids = "0,1" if node == "n1" else "2,3"
        assert node == ("n1" if rank < 2 else "n2")
        assert visible == berth_gpus == ids  # the node's GPUs of this job, per node
        assert args == f"gpus={ids} cuda=0,1 --ids {ids}"
    show = json.loads(berth("show", "--json", job).stdout)
    assert show["jobs"][0]["state"] == "COMPLETED"
    assert show["jobs"][0]["exit_code"] == 0


def test_the_job_fails_with_the_exit_code_of_its_failed_task(berth: Cli) -> None:
    failing = '[ "$SLURMD_NODENAME" = n2 ] && exit 3; exit 0'
    sub = berth("submit", "--parsable", "-N", "2", "--", "sh", "-c", failing)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    done = berth("wait", "--json", job)
    assert done.returncode == 3, (done.stdout, done.stderr)
    info = json.loads(berth("show", "--json", job).stdout)["jobs"][0]
    assert (info["state"], info["exit_code"]) == ("FAILED", 3)
    assert "n2: task 1: Exited with exit code 3" in berth("logs", job).stdout


def test_a_task_failing_while_others_run_gives_the_job_its_status(berth: Cli) -> None:
    """srun ends the others with SIGTERM (--kill-on-bad-exit) and itself exits 143; the job
    keeps the first failing task's status."""
    marker = os.path.join(berth.root, "n1-runs")  # (n2 fails only once n1 is running)
    failing = (f'if [ "$SLURMD_NODENAME" = n2 ]; then while [ ! -e {marker} ]; do sleep 0.05; '
               f"done; exit 3; fi; echo n1 runs on; touch {marker}; sleep 30")  # fmt: skip
    job = berth.submit("-N", "2", "--", "sh", "-c", failing)
    done = berth("wait", job)
    assert done.returncode == 3, (done.stdout, done.stderr)
    info = json.loads(berth("show", "--json", job).stdout)["jobs"][0]
    assert (info["state"], info["exit_code"]) == ("FAILED", 3)
    assert os.path.exists(marker)  # n1 ran (its echo may die in srun's forwarding, unsent)
    assert "n2: task 1: Exited with exit code 3" in berth("logs", job).stdout


def test_a_signal_reaches_every_task_of_a_job_across_nodes(berth: Cli) -> None:
    """The batch shell waits for srun (to read the first failing task's status): a signal
    sent to the job still reaches srun, which passes it to every task, and the shell stays."""
    task = ('trap \'echo "USR1 on $SLURMD_NODENAME"\' USR1; echo ready; '
            'for i in $(seq 300); do sleep 0.1; done')  # fmt: skip
    job = berth.submit("-N", "2", "--", "bash", "-c", task)
    wait_until(lambda: berth("logs", job).stdout.count("ready") == 2, timeout=30,
               message="both tasks ready")  # fmt: skip
    sent = berth("cancel", "-s", "USR1", job)
    assert sent.returncode == 0, sent.stderr

    def trapped() -> list[str]:
        return sorted(ln for ln in berth("logs", job).stdout.splitlines() if ln.startswith("USR1"))

    wait_until(lambda: len(trapped()) == 2, timeout=30, message="each task's trap")
    assert trapped() == ["USR1 on n1", "USR1 on n2"]
    assert berth.state(job) == "RUNNING"  # (the shell did not die of USR1)


def test_a_command_that_is_srun_is_left_alone_and_fans_out_itself(
    berth: Cli, tmp_path: Any
) -> None:
    sub = berth("submit", "--parsable", "-N", "2", "--wait", "--",
                "srun", "sh", "-c", REPORT, str(tmp_path))  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    tasks = _tasks(str(tmp_path))
    assert sorted(t[0] for t in tasks.values()) == ["n1", "n2"]  # not srun in srun: 2 tasks
    refused = berth("submit", "-N", "2", "--", "srun", "python", "t.py", "--gpu", "{gpus}")
    assert refused.returncode != 0
    assert "leave srun out" in refused.stderr
    assert not berth.slurm("squeue", "-h", "-o", "%i").stdout.strip()  # nothing submitted


def test_more_nodes_than_the_cluster_has_is_refused_before_sbatch(berth: Cli) -> None:
    out = berth("submit", "-N", "3", "-g", "1", "--", "true")
    assert out.returncode != 0
    assert "-N 3 -g 1: only 2 nodes of the cluster have 1 GPUs (-g is per node)" in out.stderr
    assert not berth.slurm("squeue", "-h", "-o", "%i").stdout.strip()


def test_a_daemon_inside_two_nodes_says_it_uses_one(
    fake_gpus: Any, two_nodes: SlurmRig, tmp_path: Any
) -> None:
    """`berth daemon --inside-slurm` in a -N 2 allocation places on its own node only, and
    says so when it starts, naming the nodes."""
    from test_slurm_inside import Allocation

    fake_gpus.setup(n=4)
    alloc = Allocation(two_nodes, fake_gpus)
    log = os.path.join(str(tmp_path), "alloc.out")
    try:
        job = two_nodes.run(
            "sbatch", "--parsable", "-N", "2", "--gres=gpu:2", "-o", log, "--wrap",
            f"{sys.executable} -m berth.cli.main daemon --inside-slurm --foreground",
            env=alloc.env,
        ).stdout.strip()  # fmt: skip
        alloc.dir = os.path.join(alloc.tmp, f"berth-{os.getuid()}", f"slurm-{job}")
        said = wait_until(lambda: os.path.exists(log) and "this allocation" in _read(log),
                          timeout=30, message="the daemon's first words")  # fmt: skip
        assert said
        text = _read(log)
        assert "this allocation has 2 nodes (n[1-2]); this daemon places jobs on n1 only, " \
            "on its 2 GPU(s): the other nodes' GPUs stay unused" in text, text
    finally:
        two_nodes.clear()
        alloc.cleanup()


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()
