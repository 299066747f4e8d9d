"""Slurm as Slurm users expect it (issue 22), against the test slurmctld: a signal reaches the
batch job's command (cancel -s), hold/release of a pending job, sbatch options passed through
(--sbatch-arg, a script's #SBATCH lines), berth's refusals before sbatch, the requeue of a job
at its time limit (USR1 sent as Slurm's --signal=B:USR1 would send it)."""

from __future__ import annotations

import os
from typing import Any

from helpers import wait_until
from slurmkit import Cli

from berth.backends.slurm import MAX_POLL


def _scontrol(berth: Cli, job: str) -> str:
    return berth.slurm("scontrol", "-o", "show", "job", job).stdout


def test_cancel_with_a_signal_reaches_the_jobs_handler(berth: Cli) -> None:
    mark = os.path.join(berth.root, "got-usr1")
    job = berth.submit("--", "bash", "-c",
                  f"trap 'echo usr1 > {mark}; exit 0' USR1; echo ready; "
                  "while true; do sleep 0.1; done")  # fmt: skip
    wait_until(lambda: berth("logs", job).stdout == "ready\n", timeout=20, message="it runs")
    said = berth("cancel", "-s", "USR1", job)
    assert (said.returncode, said.stdout) == (0, f"job {job}: sent signal 10\n"), said.stderr
    wait_until(lambda: os.path.exists(mark), timeout=20, message="the handler ran")
    wait_until(lambda: berth.state(job) == "COMPLETED", timeout=20, message="it ended")


def test_hold_and_release_a_pending_job(berth: Cli) -> None:
    blocker = berth.submit("-g", "4", "--", "sleep", "60")
    job = berth.submit("-g", "4", "--", "true")
    wait_until(lambda: berth.state(blocker) == "RUNNING", timeout=20, message="it runs")
    held = berth("hold", job)
    assert (held.returncode, held.stdout) == (0, f"job {job} held\n"), held.stderr
    assert "Priority=0 " in _scontrol(berth, job) and "JobHeldUser" in _scontrol(berth, job)
    running = berth("hold", blocker)
    assert running.returncode == 2 and f"job {blocker} is RUNNING" in running.stderr
    assert berth("hold", "99999").returncode == 2
    berth("cancel", blocker)
    wait_until(lambda: berth.state(blocker) == "CANCELLED", timeout=20, message="cancelled")
    assert berth.state(job) == "PENDING"  # held: it does not start on free GPUs
    released = berth("release-job", job)
    assert (released.returncode, released.stdout) == (0, f"job {job} released\n")
    wait_until(lambda: berth.state(job) == "COMPLETED", timeout=20, message="it ran")


def test_sbatch_args_pass_through_and_berths_own_flags_are_refused_by_name(berth: Cli) -> None:
    job = berth.submit("--sbatch-arg=--cpus-per-task=2", "--sbatch-arg", "--comment hello",
                  "--sbatch-arg=--mem=100M", "--", "sleep", "60")  # fmt: skip
    record = _scontrol(berth, job)
    assert "NumCPUs=2 " in record and "Comment=hello " in record and "MinMemoryNode=100M" in record
    too_big = berth("submit", "--sbatch-arg=--mem=64G", "--", "true")
    assert too_big.returncode == 1 and "Slurm refused the job" in too_big.stderr
    no_feature = berth("submit", "--sbatch-arg=--constraint=fast", "--", "true")
    assert no_feature.returncode == 1 and "Invalid feature" in no_feature.stderr
    own = berth("submit", "--sbatch-arg=--time=5", "--", "true")
    assert own.returncode == 2
    assert "--sbatch-arg --time=5: berth sets --time itself; use berth's -t" in own.stderr
    short = berth("submit", "--sbatch-arg=-G1", "--", "true")
    assert short.returncode == 2 and "berth sets --gpus itself; use berth's -g" in short.stderr
    twice = berth("submit", "--mem-per-gpu", "1G", "--sbatch-arg=--mem-per-gpu=2G", "--", "true")
    assert twice.returncode == 2 and "berth already sets --mem-per-gpu" in twice.stderr
    local = berth("submit", "--backend", "local", "--sbatch-arg=-c2", "--", "true")
    assert local.returncode == 2 and "--sbatch-arg is for Slurm" in local.stderr


def test_a_scripts_sbatch_lines_are_honoured_on_slurm(berth: Cli) -> None:
    script = os.path.join(berth.root, "train.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --job-name=train -t 10\n#SBATCH --cpus-per-task 2\n"
                "#SBATCH --mem=200M --comment=from-script\n#SBATCH --partition=debug\n"
                "echo ran $SLURM_CPUS_PER_TASK\n")  # fmt: skip
    os.chmod(script, 0o755)
    job = berth.submit("-J", "mine", script)  # the command line wins over the script
    record = _scontrol(berth, job)
    assert "JobName=mine " in record and "TimeLimit=00:10:00 " in record
    assert "NumCPUs=2 " in record and "MinMemoryNode=200M" in record
    assert "Comment=from-script " in record and "Partition=debug " in record
    assert berth("logs", "-f", job).stdout == "ran 2\n"
    local = berth("submit", "--backend", "local", script)
    assert local.returncode == 2
    assert "train.sh line 3: #SBATCH --cpus-per-task 2: sbatch's --cpus-per-task" in local.stderr


def test_requeue_at_the_time_limit_keeps_the_id_counts_attempts_and_stops_at_the_max(
    berth: Cli,
) -> None:
    """Slurm's limits are whole minutes, checked every ~30 s: the USR1 that
    --signal=B:USR1@GRACE sends before the limit is sent here as Slurm sends it, to a job whose
    limit is near (-t 2: GRACE is 60 s; a USR1 sooner would be the user's). (A requeued job
    starts again cred_expire + 1 s later: the rig's cred_expire is 5 s, Slurm's 120.)"""
    job = berth.submit("-t", "2", "--requeue", "--max-requeues", "1", "--", "bash", "-c",
                  "echo attempt $BERTH_ATTEMPT; exec sleep 60")  # fmt: skip
    record = _scontrol(berth, job)
    assert "Requeue=1 " in record

    def usr1() -> None:
        berth.slurm("scancel", "--signal=USR1", "--batch", job)

    wait_until(lambda: "attempt 1" in berth("logs", job).stdout, timeout=20, message="runs")
    usr1()
    wait_until(lambda: "attempt 2" in berth("logs", job).stdout, timeout=60, message="again")
    assert "Restarts=1 " in _scontrol(berth, job) and berth.state(job) == "RUNNING"
    usr1()
    said = "not requeued: --max-requeues 1 reached"
    wait_until(lambda: said in berth("logs", job).stdout, timeout=20, message="the max")
    assert "Restarts=1 " in _scontrol(berth, job) and berth.state(job) == "RUNNING"
    out = berth("logs", job).stdout
    assert out.index("attempt 1") < out.index("requeued (attempt 1 ends)") < out.index("attempt 2")


def test_what_slurm_would_refuse_or_round_is_said_before_sbatch(berth: Cli, slurm: Any) -> None:
    before = berth.slurm("squeue", "-h", "--states=all", "-o", "%i").stdout
    too_big = berth("submit", "-g", "5", "--", "true")
    assert too_big.returncode == 1
    assert "no node has 5 GPUs (the most on one node is 4)" in too_big.stderr
    nowhere = berth("submit", "--partition", "x", "--", "true")
    assert nowhere.returncode == 1 and "no partition 'x'" in nowhere.stderr
    assert "partition in partition" not in nowhere.stderr
    assert berth.slurm("squeue", "-h", "--states=all", "-o", "%i").stdout == before
    rounded = berth("submit", "--parsable", "--time-limit", "5", "--", "true")
    assert rounded.returncode == 0, rounded.stderr
    assert "time limit 5 s is 1 minute on Slurm (its limits are whole minutes)" in rounded.stderr
    assert "TimeLimit=00:01:00 " in _scontrol(berth, rounded.stdout.strip())
    exact = berth("submit", "--time-limit", "120", "--", "true")
    assert exact.returncode == 0 and exact.stderr == ""


def _counting(berth: Cli, *commands: str) -> tuple[dict[str, str], str]:
    """An environment whose Slurm ``commands`` log each call to a file (and run Slurm's)."""
    import shutil

    bin_dir = os.path.join(berth.root, "counting-bin")
    calls = os.path.join(berth.root, "calls")
    os.makedirs(bin_dir, exist_ok=True)
    path = os.environ["PATH"] + ":/usr/sbin:/sbin"
    for name in commands:
        real = shutil.which(name, path=path)
        wrapper = os.path.join(bin_dir, name)
        with open(wrapper, "w") as f:
            f.write(f'#!/bin/sh\necho {name} >> {calls}\nexec {real} "$@"\n')
        os.chmod(wrapper, 0o755)
    return {"PATH": f"{bin_dir}:{path}"}, calls


def test_following_a_job_asks_slurm_a_bounded_number_of_times(berth: Cli) -> None:
    env, calls = _counting(berth, "squeue", "scontrol", "sacct")
    import time

    started = time.monotonic()
    follow = berth("submit", "--wait", "-i", "--", "sh", "-c", "sleep 6; echo done", **env)
    took = time.monotonic() - started
    assert follow.returncode == 0 and follow.stdout == "done\n", follow.stderr
    with open(calls) as f:
        asked = f.read().split()
    assert took >= 6 and len(asked) <= 2 * took, asked  # at most 2 a second, backing off
    ends = os.path.join(berth.root, "ends")
    jobs = [berth.submit("--", "sh", "-c", f"sleep 3; date +%s.%N >> {ends}") for _ in range(5)]
    os.remove(calls)
    waited = berth("wait", *jobs, **env)
    returned = time.time()
    assert waited.returncode == 0, waited.stderr
    with open(calls) as f:
        asked = f.read().split()
    assert 1 <= asked.count("squeue") <= 12, asked
    with open(ends) as f:  # one poll after the last end, at most (+ squeue's own time): each
        last = max(float(t) for t in f.read().split())  # job after the first waited MAX_POLL
    assert returned - last < MAX_POLL + 3, returned - last


def test_a_signal_sent_to_a_requeue_job_is_the_commands_not_the_time_limits(
    berth: Cli,
) -> None:
    """`cancel -s USR1` on a `-t 10 --requeue` job is the user's USR1 (the command's handler
    runs; the job is not requeued: Slurm's warning comes only near the limit), and USR2 with
    a handler leaves the job running to COMPLETED (the batch script survives it)."""
    mark = os.path.join(berth.root, "usr2")
    job = berth.submit("-t", "10", "--requeue", "--", "bash", "-c",
                       f"trap 'echo usr1' USR1; trap 'echo usr2; touch {mark}' USR2; "
                       f"echo ready $BERTH_ATTEMPT; while [ ! -e {mark} ]; do sleep 0.1; done; "
                       "echo done")  # fmt: skip
    wait_until(lambda: berth("logs", job).stdout == "ready 1\n", timeout=20, message="it runs")
    said = berth("cancel", "-s", "USR1", job)
    assert said.returncode == 0, said.stderr
    wait_until(lambda: "usr1\n" in berth("logs", job).stdout, timeout=20, message="handled")
    assert "requeued" not in berth("logs", job).stdout
    assert "Restarts=0 " in _scontrol(berth, job) and berth.state(job) == "RUNNING"
    said = berth("cancel", "-s", "USR2", job)
    assert said.returncode == 0, said.stderr
    wait_until(lambda: berth.state(job) == "COMPLETED", timeout=20, message="it ended")
    out = berth("logs", job).stdout.splitlines()  # (bash also says its `sleep` was signalled)
    assert [w for w in out if "signal" not in w] == ["ready 1", "usr1", "usr2", "done"], out
    assert "ExitCode=0:0 " in _scontrol(berth, job)
