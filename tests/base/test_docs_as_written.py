"""Commands of README and docs/, run as written, do what the pages say (issue 40.7): `berth
watch --scan` without a daemon exits 5 as README and `berth help exit-codes` say; `simulate
--start-day 30 --days 14` with no job in that window says so (it blamed the inventory);
`berth help admin limits` prints `admin limits`' help (it printed `admin`'s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from berth.cli.main import main
from berth.errors import EXIT_NO_DAEMON

ROOT = Path(__file__).resolve().parents[2]
PHILLY = ROOT / "tests" / "sim" / "data" / "philly_head300.csv"


def _berth(*args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run([sys.executable, "-m", "berth.cli.main", *args], capture_output=True,
                          text=True, timeout=60, check=False, env=env)  # fmt: skip


def test_watch_scan_without_a_daemon_exits_5(tmp_path: Path) -> None:
    assert "5   the daemon is not reachable" in _berth("help", "exit-codes").stdout
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("-- true\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "BERTH_SOCKET": str(tmp_path / "none.sock"), "BERTH_CONFIG": ""}  # fmt: skip
    r = _berth("watch", "--scan", "--state", str(tmp_path / "s.json"), str(jobs), env=env)
    assert r.returncode == EXIT_NO_DAEMON, (r.returncode, r.stderr)
    assert "1 line(s) wait for it" in r.stderr, r.stderr


def test_simulate_a_window_without_jobs_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/simulate.md's command on a trace of a few hours: no job arrives from day 30
    code = main(["simulate", str(PHILLY), "--inventory", "8x8", "--start-day", "30",
                 "--days", "14", "--policy", "fifo,balanced"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "no job of" in err and "arrives from day 30 to day 44" in err, err
    assert "inventory" not in err, err
    assert "choose --start-day and --days within that" in err


def test_help_of_an_admin_action_is_its_own() -> None:
    r = _berth("help", "admin", "limits")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: berth admin limits"), r.stdout
    assert "--max-gpus" in r.stdout
    r = _berth("help", "admin", "nosuch")
    assert r.returncode == 2 and "its actions are limits" in r.stderr, r.stderr
