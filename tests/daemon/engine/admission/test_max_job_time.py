"""The daemon's maximum job time (issue 10, point 4): from the config file as from the flag; a
longer -t is refused at submit naming both values; `berth show` gives the limit in force."""

from __future__ import annotations

import json


def _config(daemon, text: str) -> None:  # type: ignore[no-untyped-def]
    path = daemon.fake.root / "config.toml"
    path.write_text(text)
    daemon.env["BERTH_CONFIG"] = str(path)


def test_config_key_holds_without_the_flag(daemon):
    _config(daemon, '[daemon]\nmax_job_time = "0.3"\nkill_after = "0.2"\n')
    daemon.start()  # no --max-job-time: the config's key is in force
    job_id = daemon.submit(*daemon.workload("--seconds", "60"))
    assert daemon.wait_done([job_id], timeout=15)[job_id]["state"] == "TIMEOUT"
    shown = daemon.berth("show", str(job_id))
    assert "time limit: 0.3s (the daemon's --max-job-time; the job gave no -t)" in shown.stdout


def test_a_longer_time_limit_is_refused_at_submit(daemon):
    _config(daemon, '[daemon]\nmax_job_time = "1h"\n')
    daemon.start()
    out = daemon.berth("submit", "-t", "2:00:00", "--", "true")
    assert out.returncode == 2
    assert "-t 2:00:00 is more than this daemon allows: every job stops at 1:00:00" in out.stderr
    assert "ask for -t 1:00:00 or less, or leave -t out" in out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
    # the flag wins over the config file
    daemon.stop()
    daemon.start("--max-job-time", "3h")
    assert daemon.berth("submit", "--hold", "-t", "2:00:00", "--", "true").returncode == 0


def test_show_gives_the_limit_in_force(daemon):
    daemon.start("--max-job-time", "1h")
    own = daemon.submit("true", hold=True, time_limit=600)
    none = daemon.submit("true", hold=True)
    assert (
        "time limit: 10:00 (the daemon allows up to 1:00:00)"
        in daemon.berth("show", str(own)).stdout
    )
    assert "time limit: 1:00:00 (the daemon's --max-job-time; the job gave no -t)" in (
        daemon.berth("show", str(none)).stdout
    )
    data = json.loads(daemon.berth("show", "--json", str(none)).stdout)
    assert data["time_limit"] is None and data["max_job_time"] == 3600
    assert data["limit_in_force"] == 3600
