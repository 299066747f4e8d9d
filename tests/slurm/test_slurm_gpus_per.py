"""GPUs per node and per task as a Slurm script says them: ``#SBATCH --gpus-per-node=2`` is
berth's ``-g 2`` (GPUs per node), ``--gpus-per-task`` reaches sbatch when it agrees with -g,
and a refused #SBATCH line is named by its line."""

from __future__ import annotations

import os

from slurmkit import Cli


def _script(berth: Cli, name: str, text: str) -> str:
    path = os.path.join(berth.root, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def test_gpus_per_node_in_a_script_is_g(berth: Cli) -> None:
    script = _script(berth, "two.sh", "#!/bin/sh\n#SBATCH --gpus-per-node=2\n"
                     'echo "gpus=$CUDA_VISIBLE_DEVICES"\n')  # fmt: skip
    job = berth.submit(script)
    assert berth("wait", job).returncode == 0
    assert "TresPerNode=gres:gpu:2" in berth("show", job).stdout
    gpus = berth("logs", job).stdout.strip().removeprefix("gpus=").split(",")
    assert len(set(gpus)) == 2, gpus


def test_gpus_per_task_gives_each_task_its_own(berth: Cli) -> None:
    script = _script(berth, "tasks.sh", "#!/bin/sh\n#SBATCH --ntasks-per-node=2\n"
                     "#SBATCH --gpus-per-task=1\n#BERTH -g 2\n"
                     'echo "task $SLURM_PROCID: $CUDA_VISIBLE_DEVICES"\n')  # fmt: skip
    job = berth.submit(script)
    assert berth("wait", job).returncode == 0
    lines = sorted(berth("logs", job).stdout.splitlines())
    assert [line.split(":")[0] for line in lines] == ["task 0", "task 1"]
    ids = [line.split(": ")[1] for line in lines]
    assert all("," not in i for i in ids) and len(set(ids)) == 2, lines  # one GPU each
    wrong = berth("submit", "--ntasks-per-node", "2", "-g", "1",
                  "--sbatch-arg=--gpus-per-task=1", "--", "true")  # fmt: skip
    assert wrong.returncode == 2
    assert "2 task(s) per node of 1 GPU(s) each are 2 GPUs per node: ask -g 2" in wrong.stderr


def test_a_refused_sbatch_line_is_named(berth: Cli) -> None:
    script = _script(berth, "own.sh", "#!/bin/sh\n#SBATCH -J x\n"
                     "#SBATCH --kill-on-invalid-dep=no\ntrue\n")  # fmt: skip
    out = berth("submit", script)
    assert out.returncode == 2
    assert (
        f"{script} line 3: #SBATCH --kill-on-invalid-dep=no: berth sets sbatch's "
        "--kill-on-invalid-dep itself: write #BERTH --dependency" in out.stderr
    )
    assert berth("queue", "--noheader").stdout == ""
