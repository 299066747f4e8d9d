"""``-t`` as sbatch reads it, ``--time-limit`` as mgpu_srun's seconds (issue 27, point 9): a
bare ``-t 3`` is three minutes (it was three seconds), and submit's reply says what limit
stops the job."""

from __future__ import annotations

import json

import pytest

from berth.errors import UsageError
from berth.units import parse_slurm_time


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3", 180.0), ("90", 5400.0), ("1.5", 90.0), ("1:30", 90.0), ("2:00:00", 7200.0),
     ("1-12", 129600.0), ("1-00:30", 88200.0), ("90s", 90.0), ("10m", 600.0), ("2h", 7200.0),
     ("inf", float("inf"))],
)  # fmt: skip
def test_slurm_time_reads_a_bare_number_as_minutes(text: str, seconds: float) -> None:
    assert parse_slurm_time(text) == seconds


@pytest.mark.parametrize("text", ["-3", "soon", "1:2:3:4", "nan"])
def test_a_bad_time_names_the_value(text: str) -> None:
    with pytest.raises(UsageError, match=f"invalid -t/--time {text!r}"):
        parse_slurm_time(text)


def _limit(daemon, job_id: int) -> float | None:  # type: ignore[no-untyped-def]
    shown = json.loads(daemon.berth("show", "--json", str(job_id)).stdout)
    limit: float | None = shown["time_limit"]
    return limit


def test_submit_minutes_and_seconds(daemon):
    daemon.start()
    minutes = daemon.berth("submit", "--hold", "-t", "3", "--", "true")
    assert minutes.returncode == 0, minutes.stderr
    assert "  time limit 3:00 (-t)\n" in minutes.stderr
    seconds = daemon.berth("submit", "--hold", "--time-limit", "600", "--", "true")
    assert "  time limit 10:00 (-t)\n" in seconds.stderr
    none = daemon.berth("submit", "--hold", "--", "true")
    assert "  no time limit\n" in none.stderr
    ids = [int(r.stdout.split()[2]) for r in (minutes, seconds, none)]
    assert [_limit(daemon, i) for i in ids] == [180.0, 600.0, None]


def test_the_daemons_limit_is_said_at_submit(daemon):
    daemon.start("--max-job-time", "1h")
    out = daemon.berth("submit", "--hold", "--", "true")
    assert "  time limit 1:00:00 (the daemon's --max-job-time)\n" in out.stderr


def test_both_spellings_at_once_are_refused(daemon):
    daemon.start()
    out = daemon.berth("submit", "-t", "5", "--time-limit", "5", "--", "true")
    assert out.returncode == 2 and "give one" in out.stderr and "-t '5'" in out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_help_says_both_units(daemon):
    out = daemon.berth("submit", "--help").stdout
    assert "MINUTES" in out and "SECONDS" in out and "mgpu_srun" in out
