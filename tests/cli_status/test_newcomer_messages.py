"""What a newcomer meets first reads plainly (issue 27, point 11): a declared GPU's memory in
`status`, `berth help config` without reStructuredText markup, one prefix per error, one
wording for a bad -g, and a state directory that is a file refused without a traceback."""

from __future__ import annotations

from berth.errors import EXIT_USAGE


def test_status_shows_a_declared_gpus_memory(fake_gpus, tmp_path):
    fake_gpus.setup(n=1)
    fake_gpus.remove_state()
    cfg = tmp_path / "c.toml"
    cfg.write_text('[inventory]\ngpus = 2\nmemory = "80G"\n')
    r = fake_gpus.berth("status", env={"BERTH_CONFIG": str(cfg)})
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if "logical GPU" in line]
    assert len(rows) == 2 and all("80.0G total" in row for row in rows)


def test_help_config_has_no_markup(fake_gpus):
    out = fake_gpus.berth("help", "config").stdout
    assert "`$BERTH_CONFIG`" in out and "``" not in out
    assert "Example:\n" in out and "::\n" not in out


def test_an_error_is_prefixed_once(fake_gpus):
    r = fake_gpus.berth("submit")
    assert r.returncode == EXIT_USAGE
    assert r.stderr.startswith("berth submit: no command;") and "berth: berth" not in r.stderr


def test_bad_gpu_counts_are_worded_alike(fake_gpus):
    said = []
    for value, shown in (("-1", "-1"), ("abc", "'abc'"), ("1.5", "1.5"), ("2.5", "2.5")):
        r = fake_gpus.berth("submit", "-g", value, "--", "true")
        assert r.returncode == EXIT_USAGE
        said.append(r.stderr.replace(f"= {shown}:", "= V:"))
    assert len(set(said)) == 1 and said[0].startswith("berth: job field 'gpus' = V: must be")


def test_a_state_dir_that_is_a_file_is_refused(fake_gpus, tmp_path):
    afile = tmp_path / "state"
    afile.write_text("")
    r = fake_gpus.berth("daemon", env={"BERTH_STATE_DIR": str(afile),
                                       "BERTH_SOCKET": str(tmp_path / "s.sock")})  # fmt: skip
    assert r.returncode == EXIT_USAGE and "Traceback" not in r.stderr
    assert f"{str(afile)!r} exists and is not a directory" in r.stderr


def test_unavailable_without_gpus_is_honoured_with_nvml(fake_gpus, tmp_path):
    """scheduler.py's `-i 5 3 4` as `unavailable = [3, 4]` on a machine with a driver: GPUs 3
    and 4 are kept out (it was silently ignored)."""
    fake_gpus.setup(n=5)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[inventory]\nunavailable = [3, 4]\n")
    env = {"BERTH_CONFIG": str(cfg)}
    r = fake_gpus.berth("status", env=env)
    assert r.stdout.count("unavailable in config (inventory.unavailable)") == 2
    picked = {fake_gpus.berth("select", "-n", "3", env=env).stdout.strip() for _ in range(3)}
    assert picked == {"0,1,2"} or all(set(p.split(",")) == {"0", "1", "2"} for p in picked)
    assert fake_gpus.berth("select", "-n", "4", env=env).returncode == 1


def test_declaring_gpus_over_real_ones_warns(fake_gpus, tmp_path):
    fake_gpus.setup(n=8)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[inventory]\ngpus = 5\nunavailable = [3, 4]\n")
    r = fake_gpus.berth("status", env={"BERTH_CONFIG": str(cfg)})
    assert r.returncode == 0 and r.stdout.count("(declared, no telemetry)") == 5
    assert "gpus = 5 declares 5 logical GPUs, so berth does not manage the 8 NVIDIA GPUs" in (
        r.stderr
    )
    fake_gpus.remove_state()  # no driver: declaring is what such a machine needs, no note
    quiet = fake_gpus.berth("status", env={"BERTH_CONFIG": str(cfg)})
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_daemon_http_says_where_the_dashboard_is(fake_gpus, tmp_path):
    import json
    import socket

    fake_gpus.setup(n=1)
    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"BERTH_STATE_DIR": str(tmp_path / "state"), "BERTH_SOCKET": str(tmp_path / "d.sock")}
    r = fake_gpus.berth("daemon", "--http", f"127.0.0.1:{port}", env=env)
    try:
        assert r.returncode == 0, r.stderr
        assert f"dashboard: http://127.0.0.1:{port}/ (`berth web-token` signs" in r.stdout
    finally:
        fake_gpus.berth("daemon", "--stop", env=env)
    r = fake_gpus.berth("daemon", "--json", env=env)
    try:
        assert json.loads(r.stdout)["dashboard"] is None
    finally:
        fake_gpus.berth("daemon", "--stop", env=env)
