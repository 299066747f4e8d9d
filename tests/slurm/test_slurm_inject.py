"""`--inject-arg` and `{gpus}` / `{cuda}` on the test Slurm: the command gets the ids of the
GPUs Slurm allocated, exactly as the local queue would put them for those GPUs
(slurmkit.local_argv, given the node's indices Slurm reports in SLURM_JOB_GPUS)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from slurmkit import Cli, local_argv

# prints what it was given, and the GPUs Slurm gave the job (the node's indices)
PRINT = [sys.executable, "-c", "import json, os, sys; "
         "print(json.dumps([os.environ['SLURM_JOB_GPUS'], *sys.argv[1:]]))"]  # fmt: skip


def _output(berth: Cli, *submit: str) -> str:
    sub = berth("submit", "--parsable", *submit)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    assert berth("wait", job).returncode == 0, berth("logs", job).stdout
    return berth("logs", job).stdout


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["-g", "2", "--inject-arg", "--cuda"], ["--cuda", "7", "x"]),
        (["-g", "2", "--inject-arg", "--cuda=machine"], ["--cuda=7", "cuda:{cuda}"]),
        (["-g", "3"], ["--gpus", "{gpus}", "--dev=cuda:{cuda}", "{gpus}{cuda}"]),
        (["-g", "0.5", "--inject-arg", "--cuda=machine"], ["on {gpus}"]),  # a shard's GPU
    ],
)
def test_the_command_gets_the_ids_the_local_queue_would_give(
    berth: Cli, options: list[str], words: list[str]
) -> None:
    # a GPU taken first, so that the job's GPUs are not simply 0..n-1 on the node
    hog = berth("submit", "--parsable", "--", "sleep", "60").stdout.strip()
    out = json.loads(_output(berth, *options, "--", *PRINT, *words))
    berth("cancel", hog)
    gpus = [int(i) for i in out[0].split(",")]
    assert len(gpus) == {"2": 2, "3": 3, "0.5": 1}[options[1]]
    inject = options[options.index("--inject-arg") + 1] if "--inject-arg" in options else None
    assert out[1:] == local_argv([*PRINT, *words], inject, gpus)[len(PRINT) :]


def test_a_wrap_string_and_a_sweep_get_their_ids(berth: Cli) -> None:
    out = _output(berth, "-g", "2", "--wrap", "echo {gpus} {cuda} $SLURM_JOB_GPUS")
    machine, cuda, job_gpus = out.split()
    assert (machine, cuda) == (job_gpus, "0,1")
    root = berth.root
    sub = berth("sweep", "--parsable", "-g", "1", "--inject-arg", "--cuda=machine",
                "-o", os.path.join(root, "sweep-%a.out"),
                "--", *PRINT, "--seed", "{0..3}", "--cuda", "9", "cuda:{cuda}")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    assert berth("wait", sub.stdout.strip()).returncode == 0
    for i in range(4):
        with open(os.path.join(root, f"sweep-{i}.out")) as f:
            job_gpus, *argv = json.loads(f.read())
        assert argv == ["--seed", str(i), "--cuda", job_gpus, "cuda:0"]


def test_a_seed002_jobs_file_runs_on_slurm(berth: Cli) -> None:
    """The GPU Job Scheduler's lines put the machine's ids in --cuda (--inject-arg --cuda=machine): refused
    on Slurm before, now given the GPUs Slurm allocated."""
    script = os.path.join(berth.root, "show.py")
    with open(script, "w") as f:
        f.write(PRINT[2].replace("; ", "\n"))
    jobs = os.path.join(berth.root, "jobs.txt")
    with open(jobs, "w") as f:
        f.write(f"0,{script},,--cuda 5 --x 'a b',\n")
    sub = berth("submit", "--parsable", "--file", jobs)
    assert sub.returncode == 0, sub.stderr
    (job,) = sub.stdout.split()
    assert berth("wait", job).returncode == 0
    job_gpus, *argv = json.loads(berth("logs", job).stdout)
    assert argv == ["--cuda", job_gpus, "--x", "a b"]
