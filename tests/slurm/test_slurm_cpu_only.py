"""CPU-only jobs on Slurm (issue 34.3), against the test slurmctld, through the CLI: ``-g 0``
asks Slurm for no GPU, the command sees none (CUDA_VISIBLE_DEVICES=-1 even when the shell
that submitted it had one), it runs while every GPU is taken, a preprocessing step feeds an
``afterok`` chain, and ``berth queue`` shows 0 GPUs."""

from __future__ import annotations

import json

from helpers import wait_until
from slurmkit import Cli


def test_a_cpu_only_job_runs_with_no_gpu_while_the_gpus_are_taken(berth: Cli) -> None:
    busy = berth.submit("-g", "4", "--", "sleep", "60")
    wait_until(lambda: berth.state(busy) == "RUNNING", timeout=20, message="the GPUs taken")
    prep = berth("submit", "--parsable", "-g", "0", "--", "sh", "-c",
                 'echo "cvd=$CUDA_VISIBLE_DEVICES gpus=[$BERTH_GPUS]"; sleep 2',
                 CUDA_VISIBLE_DEVICES="0,1")  # fmt: skip
    assert prep.returncode == 0, prep.stderr
    job = prep.stdout.strip()
    after = berth.submit("-g", "0", "--dependency", f"afterok:{job}", "--", "echo", "trained")
    record = berth.slurm("scontrol", "-o", "show", "job", job).stdout
    assert "gpu" not in record.partition("TresPerNode=")[2].split(" ")[0]
    wait_until(lambda: berth.state(job) in ("RUNNING", "COMPLETED"), timeout=20,
               message="it starts beside the 4-GPU job")  # fmt: skip
    rows = {r["id"]: r for r in json.loads(berth("queue", "--all", "--json").stdout)}
    assert str(rows[job]["gpus"]) == "0", rows[job]
    shown = berth("queue", "--all")
    line = next(w for w in shown.stdout.splitlines() if w.split()[:1] == [job])
    assert " 0 " in f" {line} " or " - " in f" {line} ", line
    wait_until(lambda: berth.state(after) == "COMPLETED", timeout=30, message="the chain ran")
    assert berth("logs", job).stdout == "cvd=-1 gpus=[]\n"
    assert berth("logs", after).stdout == "trained\n"
    assert berth.state(busy) == "RUNNING"


def test_what_is_about_gpus_is_refused_for_a_cpu_only_job(berth: Cli) -> None:
    for extra in (["--gpu-name", "a100"], ["--mem-per-gpu", "1G"], ["--inject-arg", "--cuda"]):
        out = berth("submit", "-g", "0", *extra, "--", "true")
        assert out.returncode == 2, (extra, out.stderr)
    cuda = berth("submit", "-g", "0", "--", "echo", "{cuda}")
    assert cuda.returncode == 2 and "-g 0 job: it has no GPU ids" in cuda.stderr


def test_update_keeps_gpus_or_none_as_submitted(berth: Cli) -> None:
    cpu = berth.submit("--hold", "-g", "0", "--", "true")
    gpu = berth.submit("--hold", "-g", "1", "--", "true")
    more = berth("update", cpu, "-g", "2")
    assert more.returncode == 2 and "was submitted with -g 0 (CPU only)" in more.stderr
    none = berth("update", gpu, "-g", "0")
    assert none.returncode == 2 and "keeps GPUs or none as it was submitted" in none.stderr
    assert "gpu:1" in berth.slurm("scontrol", "-o", "show", "job", gpu).stdout
