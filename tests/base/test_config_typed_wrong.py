"""Config keys as an admin types them wrong, through the CLI: each value here was taken before
and meant something else than it says (docs/admin.md "Configure"). Each is refused like every
other bad value: `berth status` exits 2 with one line naming the file, the key and the value,
and what to do.

Before: an empty path or name silently meant the default (``dir = ""``, ``admin_group = ""``,
``policy = ""``, ``partition = ""``; ``requirements = ""`` named the config file's folder); a
relative path was another place from each directory (``dir = "claims"``: one ledger per
working directory, GPUs handed out twice); ``max_job_time = 0`` was no limit at all and
``"400d"`` past what a job may ask; ``exempt_users = [1000]`` (a uid) exempted nobody; a key
written before any section was "unknown section [private]"; and an unknown ``policy`` stopped
the daemon without naming the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

CASES = [
    ('[claims]\ndir = ""', "[claims] dir = '' names no path: give one, or leave the key out"),
    ('[claims]\ndir = "claims"', "[claims] dir = 'claims' must be an absolute path (or start "
                                 "with ~/): a relative one is another place from each directory"),
    ('[claims]\nadmin_group = ""', "[claims] admin_group = '' is empty: give one, or leave the"),
    ('[daemon]\nsocket = "b.sock"', "[daemon] socket = 'b.sock' must be an absolute path"),
    ('[daemon]\nstate_dir = ""', "[daemon] state_dir = '' names no path"),
    ('[daemon]\npolicy = ""', "[daemon] policy = '' is empty"),
    ("[daemon]\nmax_job_time = 0", "[daemon] max_job_time = 0 must be positive"),
    ("[daemon]\nkill_after = 0", "[daemon] kill_after = 0 must be positive"),  # (was 30s)
    ("[daemon]\nkeep_finished = 0", "[daemon] keep_finished = 0 must be positive"),  # (kept all)
    ('[daemon]\nkill_after = "inf"', "[daemon] kill_after = 'inf' must be finite: a job that "
                                     "ignores SIGTERM would keep its GPUs for ever"),
    ('[daemon]\nmax_job_time = "400d"', "[daemon] max_job_time = '400d' must be at most 366 days"
                                        " (a job's longest -t); \"inf\" for no limit"),
    ('[limits]\nmax_time = "99999999d"', "[limits] max_time = '99999999d' must be at most 366"),
    ('[queue]\nrequirements = ""', "[queue] requirements = '' names no file"),
    ('[slurm]\npartition = ""', "[slurm] partition = '' is empty"),
    ('[slurm]\nlog_dir = "logs"', "[slurm] log_dir = 'logs' must be an absolute path"),
    ("[enforce]\nexempt_users = [1000]", "[enforce] exempt_users has 1000; give names"),
    ('[enforce]\nexempt_groups = [""]', "[enforce] exempt_groups has ''; give names"),
    ("private = true", "private = true is outside any section: put it under [daemon]"),
    ("gpus = 2", "gpus = 2 is outside any section: put it under [inventory]"),
    ("[inventory]\ngpus = true", "[inventory] gpus = true must be an integer"),
    ("[inventory]\ngpus = 2\nmemory = 80", "[inventory] memory = 80 is 80 MiB (a bare number is "
                                            'MiB), less than a GPU has: give the unit ("80G")'),
    ('[inventory]\ngpus = 2\nmemory = "0"', "[inventory] memory = '0' is 0 MiB"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), CASES)
def test_a_value_typed_wrong_is_refused(
    fake_gpus: Any, tmp_path: Path, text: str, said: str
) -> None:
    fake_gpus.setup(n=1)
    path = tmp_path / "config.toml"
    path.write_text(text + "\n")
    r = fake_gpus.berth("status", env={"BERTH_CONFIG": str(path)})
    assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
    assert r.stderr.startswith(f"berth: config file {str(path)!r}: {said}"), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_an_unknown_policy_names_the_config(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=1)
    path = tmp_path / "config.toml"
    path.write_text('[daemon]\npolicy = "fastest"\n')
    r = fake_gpus.berth("daemon", env={"BERTH_CONFIG": str(path)})
    assert r.returncode == 2, r.stderr
    assert f"berth: config {path}: [daemon] policy: unknown policy 'fastest': use one of" in (
        r.stderr
    )
    assert not Path(fake_gpus.socket).exists()


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--kill-after", "0", "give a finite time above 0"),  # (was 30s)
        ("--kill-after", "inf", "give a finite time above 0"),
        ("--max-job-time", "0", "above 0 and at most 366 days (inf: none)"),  # (was none)
        ("--max-job-time", "400d", "above 0 and at most 366 days"),
        ("--max-job-time", "1e400", "above 0 and at most 366 days"),  # (was none)
        ("--keep-finished", "0", "give a time above 0"),  # (was: kept for ever)
    ],
)
def test_the_daemons_flags_are_refused_alike(
    fake_gpus: Any, flag: str, value: str, said: str
) -> None:
    fake_gpus.setup(n=1)
    try:
        r = fake_gpus.berth("daemon", flag, value)
        assert r.returncode == 2, r.stderr
        assert f"berth: invalid {flag} {value!r}: {said}" in r.stderr
        assert not Path(fake_gpus.socket).exists()
    finally:  # (one that did start, before the fix, is not left running)
        fake_gpus.berth("daemon", "--stop")


def test_a_path_from_home_is_the_users(fake_gpus: Any, tmp_path: Path) -> None:
    """``~/`` is expanded (it was a folder named ``~`` in the working directory)."""
    fake_gpus.setup(n=1)
    home = tmp_path / "home"
    home.mkdir()
    path = tmp_path / "config.toml"
    path.write_text('[daemon]\nsocket = "~/b.sock"\nstate_dir = "~/state"\n')
    env = {"BERTH_CONFIG": str(path), "HOME": str(home), "BERTH_SOCKET": "",
           "BERTH_STATE_DIR": ""}  # fmt: skip
    try:
        r = fake_gpus.berth("daemon", env=env, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        wait_until(lambda: (home / "b.sock").exists(), message="the socket under ~")
        assert (home / "state").is_dir() and not (tmp_path / "~").exists()
        assert fake_gpus.berth("queue", env=env).returncode == 0
    finally:  # (from where it started: before the fix, its socket was ./~/b.sock)
        fake_gpus.berth("daemon", "--stop", env=env, cwd=str(tmp_path))
