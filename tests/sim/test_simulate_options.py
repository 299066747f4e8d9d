"""`berth simulate` never ignores an option (issue 32.3): a replay keeps the reservations it is
given (one-off and weekly), `--idle-reclaim` takes `--policy a,b` / `all`, and an option a mode
cannot use is refused by name (rc 2, the option and the mode named), changing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.core import POLICIES, Window
from berth.sim import workload
from berth.sim.engine import simulate
from berth.sim.traces import SimJob

DATA = Path(__file__).parent / "data"
TRACE = str(DATA / "philly_head300.csv")
H = 3600.0
REPLAY = ["simulate", TRACE, "--inventory", "8", "--load", "0.9", "--time-limits", "round"]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main([*REPLAY, *args, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_the_simulator_keeps_a_reservation_and_wakes_when_it_closes() -> None:
    """Two GPUs reserved for nobody from 0 to 10 h: the jobs start as the window closes
    (a pass at its end, with no arrival or end then), on the GPUs it kept."""
    jobs = [SimJob(1, 0.0, H, 1), SimJob(2, 0.0, H, 1)]
    for j in jobs:
        j.time_limit = H
    win = Window(1, (0, 1), 0.0, 10 * H, label="(the reservation)")
    res = simulate(jobs, workload.inventory("2"), reservations=[win])
    assert res.start == [10 * H, 10 * H]
    free = simulate(jobs, workload.inventory("2"))
    assert free.start == [0.0, 0.0]


def test_a_replay_keeps_the_reservation_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(capsys)
    kept = _run(capsys, "--reserve-gpus", "6", "--reserve-start", "7d", "--reserve-duration", "2d")
    waits = [r["wait_mean"] for r in (base["runs"][0], kept["runs"][0])]  # type: ignore[index]
    assert waits[1] > waits[0]  # six of eight GPUs kept for two days: jobs wait longer
    assert any("reserved GPUs 0,1,2,3,4,5 for (the reservation) from 7-00:00:00 after" in n
               for n in kept["notes"])  # type: ignore[union-attr]  # fmt: skip


def test_a_repeated_reservation_repeats_to_the_replays_end(capsys: pytest.CaptureFixture[str]) -> None:
    once = ["--reserve-gpus", "7", "--reserve-start", "6d", "--reserve-duration", "12h"]
    first = _run(capsys, *once)
    weekly = _run(capsys, *once, "--reserve-every", "1d")
    note = next(n for n in weekly["notes"] if n.startswith("reserved"))  # type: ignore[union-attr]
    assert "times every 1-00:00:00" in note
    assert weekly["runs"][0]["wait_mean"] > first["runs"][0]["wait_mean"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("args", "flag", "mode"),
    [
        (["--fill", "--policy", "sjf"], "--policy", "--fill"),
        (["--idle-reclaim", "2h", "--reserve-gpus", "2"], "--reserve-gpus", "--idle-reclaim"),
        (["--seeds", "1-3"], "--seeds", "a replay"),
        (["--assume", "2h"], "--assume", "a replay"),
        (["--idle-reclaim", "2h", "--fairshare", "on"], "--fairshare", "--idle-reclaim"),
        (["--idle-reclaim", "2h", "--predict", "on"], "--predict", "--idle-reclaim"),
        (["--fill", "--predict", "both"], "--predict", "--fill"),
    ],
)
def test_an_option_the_mode_cannot_use_is_refused_by_name(
    args: list[str], flag: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", TRACE, "--inventory", "8", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{flag} is not an option of {mode}" in captured.err


def test_what_if_refuses_a_replay_only_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--what-if", "--reserve-every", "7d"]) == 2
    assert "--reserve-every is not an option of --what-if" in capsys.readouterr().err


def test_reservation_options_without_gpus_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*REPLAY, "--reserve-start", "1d", "--reserve-duration", "2h"]) == 2
    assert "--reserve-start needs the GPUs to reserve" in capsys.readouterr().err


def test_idle_reclaim_takes_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    idle = ["simulate", TRACE, "--inventory", "8", "--idle-reclaim", "2h", "--json"]
    assert main([*idle, "--policy", "fifo,sjf"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["model"]["policy"] for x in lines] == ["fifo", "sjf"]
    assert main([*idle, "--policy", "all"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["model"]["policy"] for x in lines] == list(POLICIES)


def test_a_replay_runs_each_policy_without_and_with_predictions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--predict both`: [scheduling] predict's effect on one's own queue, policy by policy
    (simulate(predict=True) is tests/sim/test_sim_predict.py's)."""
    out = _run(capsys, "--policy", "fifo,guarded", "--predict", "both")
    rows = out["runs"]
    assert [(r["policy"], r["predict"]) for r in rows] == [  # type: ignore[union-attr,index]
        ("fifo", False), ("fifo+predict", True), ("guarded", False), ("guarded+predict", True),
    ]  # fmt: skip
    only = _run(capsys, "--policy", "fifo", "--predict", "on")
    assert [r["policy"] for r in only["runs"]] == ["fifo+predict"]  # type: ignore[union-attr,index]
