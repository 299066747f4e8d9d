"""The backend interface's contract (berth/backends/base.py), run against both backends: the
local berth daemon and a real Slurm. What a user sees through `berth submit/queue/show/
cancel/logs` must not depend on which one runs the job."""

from __future__ import annotations

import os

import pytest
from helpers import wait_until
from slurmkit import BackendRig

from berth.backends.base import ArraySpec
from berth.errors import BerthError, UsageError


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _end(b: BackendRig, job_id: str, timeout: float = 30) -> object:
    info = b.backend.wait(job_id, timeout)
    assert info is not None and info.finished, f"job {job_id} did not end: {info!r}"
    return info


def test_a_job_runs_on_its_gpu_and_its_output_is_in_its_log(backend: BackendRig) -> None:
    b = backend
    sub = b.backend.submit(b.sh('echo "id=$BERTH_JOB_ID gpus=$CUDA_VISIBLE_DEVICES"', gpus=2))
    info = _end(b, sub.id)
    assert (info.state, info.exit_code) == ("COMPLETED", 0)  # type: ignore[attr-defined]
    out, err = b.backend.logs(sub.id)
    assert out == err == sub.stdout
    text = _read(out)
    assert f"id={sub.id} " in text
    gpus = text.split("gpus=")[1].split()[0].split(",")
    assert len(gpus) == 2 and len(set(gpus)) == 2 and all(g.isdigit() for g in gpus)


def test_wrap_and_env_setup_run_in_a_shell_the_command_never(backend: BackendRig) -> None:
    b = backend
    wrap = b.backend.submit(b.job(wrap="echo wrapped $((6 * 7))"))
    setup = b.backend.submit(
        b.job("printf", "%s|", "$HOME", "a b", "$(id)", env_setup="export PICKED=yes")
    )
    failed = b.backend.submit(b.job("touch", os.path.join(b.cwd, "ran"), env_setup="false"))
    for sub in (wrap, setup, failed):
        _end(b, sub.id)
    assert "wrapped 42" in _read(wrap.stdout or "")
    assert _read(setup.stdout or "").startswith("$HOME|a b|$(id)|")  # words passed as given
    info = b.backend.status([failed.id])[failed.id]
    assert (info.state, info.exit_code) == ("FAILED", 127)
    assert not os.path.exists(os.path.join(b.cwd, "ran"))  # a failed setup runs nothing


def test_log_names_take_the_job_id(backend: BackendRig) -> None:
    b = backend
    sub = b.backend.submit(b.sh("echo out; echo err >&2", stdout="o-%j.txt", stderr="e-%j.txt"))
    _end(b, sub.id)
    out, err = b.backend.logs(sub.id)
    assert out == os.path.join(b.cwd, f"o-{sub.id}.txt")
    assert err == os.path.join(b.cwd, f"e-{sub.id}.txt")
    assert (_read(out), _read(err)) == ("out\n", "err\n")


def test_status_answers_for_many_jobs_at_once(backend: BackendRig) -> None:
    b = backend
    ids = [b.backend.submit(b.sh(f"exit {i}")).id for i in range(3)]
    for i in ids:
        _end(b, i)
    got = b.backend.status([*ids, "99999"])
    assert sorted(got) == sorted(ids)  # the unknown one is left out
    assert [got[i].exit_code for i in ids] == [0, 1, 2]
    assert [got[i].state for i in ids] == ["COMPLETED", "FAILED", "FAILED"]


def test_list_shows_unfinished_jobs_and_ended_ones_on_request(backend: BackendRig) -> None:
    b = backend
    done = b.backend.submit(b.sh("true"))
    _end(b, done.id)
    running = b.backend.submit(b.sh("sleep 30"))
    wait_until(
        lambda: b.backend.status([running.id])[running.id].state == "RUNNING",
        timeout=20, message="the job runs",
    )  # fmt: skip
    unfinished = {j.id for j in b.backend.list()}
    assert running.id in unfinished and done.id not in unfinished
    assert {running.id, done.id} <= {j.id for j in b.backend.list(finished=True)}


def test_cancel_ends_a_running_job_and_says_what_it_did(backend: BackendRig) -> None:
    b = backend
    running = b.backend.submit(b.sh("sleep 60"))
    ended = b.backend.submit(b.sh("true"))
    _end(b, ended.id)
    wait_until(
        lambda: b.backend.status([running.id])[running.id].state == "RUNNING",
        timeout=20, message="the job runs",
    )  # fmt: skip
    with pytest.raises(UsageError, match="no job 99999"):  # nothing is cancelled
        b.backend.cancel([running.id, "99999"])
    assert b.backend.status([running.id])[running.id].state == "RUNNING"
    said = b.backend.cancel([running.id, ended.id])
    assert said[ended.id] == "already COMPLETED"
    info = _end(b, running.id, timeout=20)
    assert info.state == "CANCELLED"  # type: ignore[attr-defined]


def test_a_dependent_job_starts_after_its_dependency_completed(backend: BackendRig) -> None:
    b = backend
    stamp = os.path.join(b.cwd, "first-done")
    first = b.backend.submit(b.sh(f"sleep 0.3; touch {stamp}"))
    second = b.backend.submit(b.sh(f"test -e {stamp}", after_ok=[int(first.id)]))
    info = _end(b, second.id)
    assert (info.state, info.exit_code) == ("COMPLETED", 0)  # type: ignore[attr-defined]


def test_a_dependency_on_an_unknown_job_is_refused(backend: BackendRig) -> None:
    with pytest.raises(BerthError, match="99999") as e:
        backend.backend.submit(backend.sh("true", after_ok=[99999]))
    assert e.value.exit_code == 2
    assert backend.backend.list() == []  # nothing was queued


def test_dependency_forms_and_a_never_met_one_are_the_same_on_both(backend: BackendRig) -> None:
    """Issue 24.4: `?` (any of), `@` (the last job submitted), several ids, singleton; a
    dependency that can never be met cancels the job on both backends (Slurm: berth's
    --kill-on-invalid-dep=yes); on Slurm the expression reaches sbatch with Slurm's ids."""
    b = backend
    ok = b.backend.submit(b.sh("true"))
    bad = b.backend.submit(b.sh("exit 3"))
    any_of = b.sh("true", dependency=f"afterok:@?afterany:{ok.id}")  # @: `bad`
    if b.kind == "slurm":
        sbatch = b.backend.plan(any_of).argv
        assert f"--dependency=afterok:{bad.id}?afterany:{ok.id}" in sbatch
        assert "--kill-on-invalid-dep=yes" in sbatch
    first = b.backend.submit(any_of)
    never = b.backend.submit(b.sh("true", dependency=f"afterok:{ok.id}:{bad.id}"))
    single = b.backend.submit(b.sh("true", name="one", dependency="singleton"))
    assert _end(b, first.id).state == "COMPLETED"  # type: ignore[attr-defined]
    assert _end(b, never.id).state == "CANCELLED"  # type: ignore[attr-defined]
    assert _end(b, single.id).state == "COMPLETED"  # type: ignore[attr-defined]


def test_arrays_run_on_both_backends_with_the_same_ids(backend: BackendRig) -> None:
    b = backend
    job = b.sh('echo "task=$BERTH_ARRAY_TASK_ID of $BERTH_ARRAY_JOB_ID id=$BERTH_JOB_ID"')
    sub = b.backend.submit(job, array=ArraySpec.parse("0-2"))
    assert sub.tasks == [f"{sub.id}_{i}" for i in range(3)]
    info = _end(b, sub.id)
    assert info.state == "COMPLETED"  # type: ignore[attr-defined]
    for i, task in enumerate(sub.tasks):
        out, _ = b.backend.logs(task)
        assert _read(out) == f"task={i} of {sub.id} id={task}\n"
