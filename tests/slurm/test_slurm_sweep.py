"""A sweep on the test Slurm: 20 jobs in three dependent stages (whole GPUs, half GPUs as
shards, pairs of GPUs) and an array with a throttle. Every job records its GPUs and when it
ran; the test checks Slurm gave each the right CUDA_VISIBLE_DEVICES, never one GPU to two
whole-GPU jobs at once, and kept the order and the throttle."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from slurmkit import BackendRig

from berth.backends.base import ArraySpec, SubmitRefused
from berth.backends.slurm import Slurm

RECORD = 'echo "$BERTH_JOB_ID $CUDA_VISIBLE_DEVICES $(date +%s.%N)"; sleep 0.2; date +%s.%N'


@pytest.fixture
def on_slurm(slurm: Any, fake_gpus: Any) -> BackendRig:
    log_dir = os.path.join(str(fake_gpus.root), "slurm-logs")
    env = {**fake_gpus.env, **slurm.env}
    return BackendRig(Slurm(log_dir=log_dir), env, str(fake_gpus.root), "slurm")


def _run(path: str) -> tuple[list[str], float, float]:
    with open(path) as f:
        first, end = f.read().split("\n")[:2]
    _, gpus, start = first.split(" ")
    return gpus.split(","), float(start), float(end)


def _overlap(a: tuple[Any, float, float], b: tuple[Any, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def test_a_sweep_with_dependencies_and_an_array(on_slurm: BackendRig) -> None:
    b = on_slurm.backend
    stage_a = [b.submit(on_slurm.sh(RECORD, gpus=1)) for _ in range(6)]
    stage_b = [
        b.submit(on_slurm.sh(RECORD, gpus=0.5, after_ok=[int(stage_a[i % 6].id)])) for i in range(8)
    ]
    stage_c = [
        b.submit(on_slurm.sh(RECORD, gpus=2, after_ok=[int(stage_b[2 * i % 8].id)]))
        for i in range(6)
    ]
    array = b.submit(
        on_slurm.sh(RECORD, gpus=1, after_ok=[int(j.id) for j in stage_c]),
        array=ArraySpec.parse("0-3%2"),
    )
    jobs = [*stage_a, *stage_b, *stage_c]
    assert len(jobs) == 20 and len(array.tasks) == 4
    info = b.wait(array.id, 60)
    assert info is not None and info.state == "COMPLETED"
    states = b.status([j.id for j in jobs])
    assert [states[j.id].state for j in jobs] == ["COMPLETED"] * 20

    runs = {j.id: _run(b.logs(j.id)[0]) for j in jobs}
    runs.update({t: _run(b.logs(t)[0]) for t in array.tasks})
    asked = {**{j.id: 1 for j in stage_a}, **{j.id: 1 for j in stage_b},
             **{j.id: 2 for j in stage_c}, **{t: 1 for t in array.tasks}}  # fmt: skip
    for job_id, (gpus, _, _) in runs.items():
        assert len(set(gpus)) == asked[job_id] and set(gpus) <= {"0", "1", "2", "3"}, job_id
    whole = [runs[j.id] for j in [*stage_a, *stage_c]] + [runs[t] for t in array.tasks]
    for x, y in itertools.combinations(whole, 2):
        assert not (_overlap(x, y) and set(x[0]) & set(y[0])), (x, y)
    halves = [runs[j.id] for j in stage_b]
    for h in halves:  # each GPU has 2 shards: at most 2 half-GPU jobs on it at once
        assert sum(_overlap(h, o) and o[0] == h[0] for o in halves) <= 2
    for i, j in enumerate(stage_b):
        assert runs[j.id][1] >= runs[stage_a[i % 6].id][2]
    for i, j in enumerate(stage_c):
        assert runs[j.id][1] >= runs[stage_b[2 * i % 8].id][2]
    tasks = [runs[t] for t in array.tasks]
    assert min(t[1] for t in tasks) >= max(runs[j.id][2] for j in stage_c)
    for t in tasks:  # the throttle: at most 2 tasks at once
        assert sum(_overlap(t, u) for u in tasks) <= 2


def test_a_spec_slurm_refuses_gets_its_reason_in_berths_words(on_slurm: BackendRig) -> None:
    with pytest.raises(SubmitRefused) as e:
        on_slurm.backend.submit(on_slurm.sh("true", gpus=9))  # refused before sbatch
    assert str(e.value) == (
        "no node has 9 GPUs (the most on one node is 4), so Slurm would refuse the job: ask "
        "for less, or see `sinfo -o '%N %G'`"
    )
    with pytest.raises(SubmitRefused) as e:  # what only sbatch knows: more RAM than a node's
        on_slurm.backend.submit(on_slurm.sh("true", gpus=1), extra=["--mem=64G"])
    assert str(e.value) == (
        "Slurm refused the job: no node has what it asks (gpu:1); ask for less, or see "
        "`sinfo -o '%N %G %l'` (sbatch: Requested node configuration is not available)"
    )
