"""`berth sweep` on the test Slurm: a grid is one `sbatch --array` job whose tasks each get
exactly their command (values with spaces, quotes, `$`, backticks, newlines, CR LF reach the
program as one word each), their own GPU, and never more than --throttle of them run at once;
queue, show, cancel and wait work on it as on any Slurm array. The same sweep on the local
queue is unchanged (and goes there with --backend local even when Slurm is the default)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from helpers import wait_until
from slurmkit import Cli, daemon_rig

from berth.jobsfile.grid import expand

# A task: records its argv and GPUs, and how many tasks of its sweep ran at once, which it
# sees itself (a directory entry per running task).
RECORDER = r"""
import json, os, sys, time
out = sys.argv[1]
me = os.environ["BERTH_ARRAY_TASK_ID"]
running = os.path.join(out, "running")
os.makedirs(running, exist_ok=True)
open(os.path.join(running, me), "w").close()
most = 0
end = time.monotonic() + float(os.environ.get("HOLD", "0.4"))
while time.monotonic() < end:
    most = max(most, len(os.listdir(running)))
    time.sleep(0.02)
os.unlink(os.path.join(running, me))
with open(os.path.join(out, me + ".json"), "w") as f:
    json.dump({"argv": sys.argv[2:], "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
               "job_gpus": os.environ.get("SLURM_JOB_GPUS"), "most": most,
               "job": os.environ["BERTH_JOB_ID"],
               "array": os.environ["SLURM_ARRAY_JOB_ID"]}, f)
"""

AWKWARD = '{a b,it\'s,$HOME,`id`,x\ny,c\r\nd,\t,"q",back\\slash,*,-n,é,}'


def _recorder(root: str) -> tuple[str, str]:
    path = os.path.join(root, "recorder.py")
    with open(path, "w") as f:
        f.write(RECORDER)
    out = os.path.join(root, "out")
    os.makedirs(out, exist_ok=True)
    return path, out


def _records(out: str, n: int) -> list[dict[str, Any]]:
    found = []
    for i in range(n):
        with open(os.path.join(out, f"{i}.json")) as f:
            found.append(json.load(f))
    return found


def test_a_sweep_is_one_slurm_array_each_task_exactly_its_argv(berth: Cli) -> None:
    rec, out = _recorder(berth.root)
    template = [sys.executable, rec, out, "--v", AWKWARD, "--seed", "{0..1}"]
    commands, _ = expand(template)
    n = len(commands)
    assert n == 26

    def known() -> set[str]:
        rows = berth.slurm("squeue", "-h", "-r", "--states=all", "-o", "%F %K %j").stdout
        return set(rows.split("\n")) - {""}

    before = known()
    sub = berth("sweep", "--throttle", "3", "-g", "1", "-J", "grid", "--", *template)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.split()[2]
    assert sub.stdout == (
        f"Submitted job {job} to Slurm: an array of {n} tasks ({job}_0..{job}_{n - 1}, "
        "at most 3 at once)\n"
    )
    # one Slurm job: every job Slurm got from the sweep is a task of that array
    assert known() - before == {f"{job} {i} grid" for i in range(n)}
    waited = berth("wait", job)
    assert (waited.returncode, waited.stdout) == (0, f"job {job}: COMPLETED (exit code 0)\n")

    records = _records(out, n)
    for i, (cmd, r) in enumerate(zip(commands, records, strict=True)):
        assert r["argv"] == cmd[3:], i  # exactly its words: none split, joined or expanded
        assert (r["job"], r["array"]) == (f"{job}_{i}", job)
        assert r["cvd"] == r["job_gpus"] and r["cvd"] in ("0", "1", "2", "3"), r
    # the throttle, as the tasks saw it: never more than 3 at once, and 3 did run together
    assert max(r["most"] for r in records) == 3
    show = json.loads(berth("show", "--json", job).stdout)
    assert [j["state"] for j in show["jobs"]] == ["COMPLETED"] * n
    assert berth("queue", "--all").stdout.count(f"{job}_") == n


def test_running_tasks_have_their_own_gpus_and_cancel_ends_the_sweep(berth: Cli) -> None:
    sub = berth("sweep", "--parsable", "--throttle", "2", "--", sys.executable, "-c",
                "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True); "
                "time.sleep(60)", "{1,2,3,4,5}")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()

    def running() -> list[str] | None:
        rows = json.loads(berth("queue", "--json").stdout)
        ids = sorted(r["id"] for r in rows if r["state"] == "RUNNING")
        assert len(ids) <= 2, rows  # the throttle, as Slurm reports it
        return ids if len(ids) == 2 else None

    ids = wait_until(running, timeout=20, message="two tasks run")
    queue = berth("queue").stdout
    assert f"{job}_[" in queue and "JobArrayTaskLimit" in queue  # the rest wait as one line
    gpus = [wait_until(lambda i=i: berth("logs", i).stdout.strip(), timeout=20, message="gpus")
            for i in ids]  # fmt: skip
    assert len(set(gpus)) == 2 and set(gpus) <= {"0", "1", "2", "3"}
    late = berth("wait", "--timeout", "0.2", job)
    assert (late.returncode, late.stderr) == (
        6,
        f"berth wait: job {job} has not ended (--timeout)\n",
    )
    said = berth("cancel", job)
    assert (said.returncode, said.stdout) == (0, f"job {job}: cancelled\n")
    waited = berth("wait", job)
    assert waited.returncode == 1 and waited.stdout.startswith(f"job {job}: CANCELLED")


def test_dry_run_shows_the_commands_and_the_sbatch_call_and_queues_nothing(berth: Cli) -> None:
    dry = berth(
        "sweep", "--dry-run", "--throttle", "2", "python t.py --lr {1e-3,1e-4} --x '{a b,c}'"
    )
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[:6] == [
        "4 commands: 2 ({1e-3,1e-4}) x 2 ({a b,c})",
        "   0  python t.py --lr 1e-3 --x 'a b'",
        "   1  python t.py --lr 1e-3 --x c",
        "   2  python t.py --lr 1e-4 --x 'a b'",
        "   3  python t.py --lr 1e-4 --x c",
        lines[5],
    ]
    assert lines[5].startswith("would submit to Slurm: sbatch --parsable --gres=gpu:1 ")
    assert "--array=0-3%2" in lines[5] and lines[5].endswith(".sh")
    assert not os.path.exists(lines[5].rsplit(" ", 1)[1])  # nothing written
    assert lines[6].startswith("  Slurm says: Job ")  # (sbatch --test-only: issue 34.1)
    assert lines[-1].startswith("dry run: 1 job checked by berth and by Slurm")
    assert berth.slurm("squeue", "-h").stdout == ""
    refused = berth("sweep", "--dry-run", "--mem", "9G", "python t.py {1,2}")
    assert refused.returncode == 2 and "--mem: not on Slurm" in refused.stderr


def test_the_local_sweep_is_unchanged(fake_gpus: Any, slurm: Any) -> None:
    """With Slurm the default, --backend local queues the sweep on the berth daemon, which
    gives each task exactly its words too."""
    rig = daemon_rig()(fake_gpus)
    try:
        rig.start(gpus=4)
        rec, out = _recorder(str(fake_gpus.root))
        template = [sys.executable, rec, out, "--v", AWKWARD]
        commands, _ = expand(template)
        env = {**rig.env, **slurm.env, "BERTH_BACKEND": "slurm", "HOLD": "0"}
        cli = Cli(fake_gpus, slurm)
        sub = cli("sweep", "--backend", "local", "--json", "-g", "0.25", "--", *template, **env)
        assert sub.returncode == 0, sub.stderr
        reply = json.loads(sub.stdout)
        assert len(reply["tasks"]) == len(commands) and reply["array"] == f"0-{len(commands) - 1}"
        assert cli("wait", "--backend", "local", str(reply["job_id"]), **env).returncode == 0
        for cmd, r in zip(commands, _records(out, len(commands)), strict=True):
            assert r["argv"] == cmd[3:]
        assert slurm.run("squeue", "-h").stdout == ""  # nothing went to Slurm
        refused = cli("sweep", "--backend", "local", "--partition", "gpu", "--", *template, **env)
        assert refused.returncode == 2 and "--partition is for Slurm" in refused.stderr
    finally:
        rig.cleanup()


def test_a_grid_larger_than_the_cluster_takes_is_refused_with_why(berth: Cli) -> None:
    big = berth("sweep", "--", "true", "{0..1001}")  # Slurm's MaxArraySize: 1001 by default
    assert big.returncode == 1, big.stderr
    assert big.stderr == (
        "berth: Slurm refused the job: the cluster does not take the array 0-1001 (1002 tasks): "
        "its highest index 1001 must be below MaxArraySize 1001 (see `scontrol show config | grep "
        "MaxArraySize`); split it, e.g. a sweep into smaller grids (sbatch: Invalid job array "
        "specification)\n"
    )
    assert berth.slurm("squeue", "-h").stdout == ""
