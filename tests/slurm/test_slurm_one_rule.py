"""The same `berth` commands against the local daemon and the test Slurm, as a user types them
(`berth CMD --backend local|slurm ...`), compared: `berth wait`'s exit status for a job that
failed, was cancelled or timed out; `queue -r`; the GPUs column; a failed afterok dependency;
`cancel` of a job nobody knows. queue/show/cancel/logs/wait are one module each, acting
through berth.backends.base.Backend, so what differs here is a backend's doing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import wait_until
from slurmkit import Cli, daemon_rig

Berth = Callable[..., Any]  # berth(cmd, *args) -> CompletedProcess, on one backend


@pytest.fixture
def both(fake_gpus: Any, slurm: Any) -> Iterator[dict[str, Berth]]:
    """``{"local": berth, "slurm": berth}``: the CLI on a berth daemon over 4 fake GPUs and on
    the test Slurm (4 GPUs, 2 shards each)."""
    rig = daemon_rig()(fake_gpus)
    cli = Cli(fake_gpus, slurm)

    def on(backend: str) -> Berth:
        def berth(cmd: str, *args: str) -> Any:
            return cli(cmd, "--backend", backend, *args, BERTH_SOCKET=rig.socket)

        return berth

    try:
        rig.start()
        yield {"local": on("local"), "slurm": on("slurm")}
    finally:
        rig.cleanup()


def _submit(berth: Berth, *args: str) -> str:
    out = berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return str(out.stdout.strip())


def _state(berth: Berth, job: str) -> str:
    return next((str(r["state"]) for r in _rows(berth) if r["id"] == job), "")


def _rows(berth: Berth) -> list[dict[str, Any]]:
    """`queue --all --json` as JobInfo rows on either backend (the local daemon's JSON is its
    own: its rows are read the way the Local backend reads them)."""
    data = json.loads(berth("queue", "--all", "--json").stdout)
    if isinstance(data, dict):
        from berth.backends.local import info

        return [info(r).to_dict() for r in data["jobs"]]
    return list(data)


def _runs(berth: Berth, job: str) -> None:
    wait_until(lambda: _state(berth, job) == "RUNNING", timeout=20, message=f"{job} runs")


def _outcome(berth: Berth, job: str) -> tuple[int, str]:
    """`berth wait JOB`: its exit status and its line without the job's id."""
    out = berth("wait", job)
    return out.returncode, out.stdout.removeprefix(f"job {job}: ")


def test_wait_exits_the_same_for_failed_and_cancelled_jobs(both: dict[str, Berth]) -> None:
    seen = {}
    for name, berth in both.items():
        failed = _submit(berth, "--", "sh", "-c", "exit 3")
        killed = _submit(berth, "--", "sh", "-c", "kill -9 $$")
        running = _submit(berth, "--", "sleep", "60")
        pending = _submit(berth, "--hold", "--", "true")
        _runs(berth, running)
        assert berth("cancel", running, pending).returncode == 0
        seen[name] = [_outcome(berth, j) for j in (failed, killed)]
        seen[name] += [_outcome(berth, j)[0] for j in (running, pending)]
        seen[name].append(berth("wait", failed, running).returncode)  # the first that failed
    assert seen["local"] == seen["slurm"] == [
        (3, "FAILED (exit code 3)\n"), (137, "FAILED (exit code 137)\n"), 1, 1, 3,
    ]  # fmt: skip


def test_a_timed_out_job_exits_as_a_cancelled_one(both: dict[str, Berth]) -> None:
    """A real TIMEOUT on the local daemon (-t 1s); Slurm's limits are whole minutes, so its
    side is Slurm's own words for a job it timed out (SIGTERM: ExitCode 0:15), read as the
    backend reads them."""
    from berth.backends import slurm_query as q
    from berth.backends.base import exit_status

    job = _submit(both["local"], "-t", "1s", "--", "sleep", "60")
    local = both["local"]("wait", job)
    row = q.squeue_rows("7|7|N/A|N/A|TIMEOUT|None|1:00|root|gres:gpu:1|localhost|N/A|1|debug|x\n")[0]
    row.exit_code = q.exit_code("0:15")
    assert local.stdout.startswith(f"job {job}: TIMEOUT")
    assert local.returncode == exit_status(row) == 1


def test_queue_folds_arrays_unless_r_and_fills_the_gpus_column(both: dict[str, Berth]) -> None:
    for name, berth in both.items():
        array = berth("submit", "--array", "0-3%1", "-J", "arr", "--", "sleep", "60")
        assert array.returncode == 0, array.stderr
        arr = array.stdout.split()[2].rstrip(":")
        _submit(berth, "-g", "2", "-J", "two", "--", "sleep", "60")
        _submit(berth, "-g", "0.5", "-J", "half", "--", "sleep", "60")
        _runs(berth, f"{arr}_0")

        def table(*args: str) -> list[list[str]]:
            out = berth("queue", "--noheader", *args)  # noqa: B023 (called at once)
            assert out.returncode == 0, out.stderr
            rows = [line.split() for line in out.stdout.splitlines()]
            slurm_only = (1, 6) if name == "slurm" else ()  # noqa: B023 (PARTITION, NODES)
            return [[c for k, c in enumerate(r) if k not in slurm_only] for r in rows]

        folded = {r[0]: r for r in table()}
        assert folded[f"{arr}_[1-3%1]"][1:4] == ["arr", "root", "PD"], name
        assert folded[f"{arr}_0"][3] == "R", name
        expanded = {r[0]: r for r in table("-r")}
        assert {f"{arr}_{i}" for i in range(4)} <= set(expanded), name
        assert not any("[" in i for i in expanded), name
        gpus = {r[1]: r[5] for r in table("-r")}
        assert gpus == {"arr": "1", "two": "2", "half": "0.5"}, name


def test_a_failed_dependency_cancels_the_job_on_both(both: dict[str, Berth]) -> None:
    seen = {}
    for name, berth in both.items():
        failed = _submit(berth, "--", "sh", "-c", "exit 3")
        then = _submit(berth, "--dependency", f"afterok:{failed}", "--", "true")
        seen[name] = _outcome(berth, then)
        row = next(r for r in _rows(berth) if r["id"] == then)
        assert row["state"] == "CANCELLED", name
    assert seen["local"] == seen["slurm"] == (1, "CANCELLED\n")


def test_cancel_refuses_a_job_nobody_knows_and_changes_nothing(both: dict[str, Berth]) -> None:
    for name, berth in both.items():
        running = _submit(berth, "--", "sleep", "60")
        ended = _submit(berth, "--", "true")
        assert berth("wait", ended).returncode == 0
        _runs(berth, running)
        out = berth("cancel", running, "99999")
        assert out.returncode == 2 and "no job 99999" in out.stderr, name
        assert _state(berth, running) == "RUNNING", name
        out = berth("cancel", ended, running)
        assert out.returncode == 0, name
        assert out.stdout.splitlines()[0] == f"job {ended}: already COMPLETED", name
        assert _outcome(berth, running)[0] == 1


def test_the_st_codes_are_the_schedulers() -> None:
    from berth.core.states import CODES as CORE
    from berth.state_codes import CODES

    assert CODES == {s.value: c for s, c in CORE.items()}


def test_cancel_by_state_and_the_log_of_a_job_not_started(both: dict[str, Berth]) -> None:
    for name, berth in both.items():
        running = _submit(berth, "--", "sleep", "60")
        held = _submit(berth, "--hold", "--", "true")
        _runs(berth, running)
        logs = berth("logs", held)
        assert logs.returncode == 0 and logs.stdout == "", name
        assert logs.stderr.startswith(f"job {held} has not started ("), name
        out = berth("cancel", "--all-mine", "--state", "PD")
        assert (out.returncode, out.stdout) == (0, f"job {held}: cancelled\n"), name
        assert _state(berth, running) == "RUNNING", name
        assert berth("cancel", "--all-mine", "--state", "XX").returncode == 2, name


def test_a_cancelled_jobs_exit_code_is_the_signals_on_both(both: dict[str, Berth]) -> None:
    """One rule (issue 22.4): a job a signal ended reports 128 + the signal, as a shell says
    (Slurm's ExitCode 0:15 -> 143, not sacct's 0:0 of the allocation); one cancelled before it
    ran has none."""
    seen = {}
    for name, berth in both.items():
        running = _submit(berth, "--", "sleep", "60")
        pending = _submit(berth, "--hold", "--", "true")
        _runs(berth, running)
        assert berth("cancel", running, pending).returncode == 0
        for job in (running, pending):
            wait_until(lambda: _state(berth, job) == "CANCELLED", timeout=20,  # noqa: B023
                       message=f"{name}: {job} cancelled")  # fmt: skip
        codes = {r["id"]: r["exit_code"] for r in _rows(berth)}
        seen[name] = (codes[running], codes[pending])
    assert seen["local"] == seen["slurm"] == (143, None)


def test_queue_json_gives_rows_of_one_shape_on_both(both: dict[str, Berth]) -> None:
    """`queue --json`'s rows have the one row shape (berth.wire.jobrow: its keys, in its
    order) on both backends, with the same values where both know them; Slurm's own fields
    (its word for the state) come after them."""
    from berth.wire.jobrow import FIELDS

    seen = {}
    for name, berth in both.items():
        failed = _submit(berth, "-g", "0.5", "-J", "rowed", "--", "sh", "-c", "exit 3")
        held = _submit(berth, "--hold", "-g", "2", "-J", "rowed", "--", "true")
        assert berth("wait", failed).returncode == 3
        data = json.loads(berth("queue", "--all", "--json").stdout)
        rows = {str(r["id"]): r for r in (data["jobs"] if isinstance(data, dict) else data)}
        seen[name] = [rows[failed], rows[held]]
        assert berth("cancel", held).returncode == 0
    for name, rows in seen.items():
        for row in rows:
            assert list(row)[: len(FIELDS)] == list(FIELDS), (name, row)
    values = {
        name: [(r["name"], r["state"], r["st"], r["exit_code"], r["gpus"]) for r in rows]
        for name, rows in seen.items()
    }
    assert values["local"] == values["slurm"] == [
        ("rowed", "FAILED", "F", 3, 0.5), ("rowed", "PENDING", "PD", None, 2),
    ]  # fmt: skip
    assert [r["native"] for r in seen["slurm"]] == ["FAILED", "PENDING"]
