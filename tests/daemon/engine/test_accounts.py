"""The daemon's side of fair share and limits (berth.daemon.engine.accounts), on a store of its own:
the config's [scheduling] and [limits], levels of limits (user, then everyone at runtime,
then the config), the usage book kept across a reopen, checks at submit, the queue summary."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from berth import config
from berth.core import Job, Request, State, transition
from berth.daemon.engine.accounts import EVERYONE, UNLIMITED, Accounts
from berth.daemon.engine.jobtable import JobTable
from berth.daemon.store.store import Store
from berth.errors import ConfigError
from berth.wire.protocol import ProtocolError


@pytest.fixture
def cfg_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    return path


def test_config_sections(cfg_file: Path) -> None:
    cfg_file.write_text(
        '[scheduling]\nfairshare = false\nfairshare_half_life = "1d"\n'
        '[limits]\nmax_gpus = 2\nmax_jobs = 5\nmax_time = "1h"\n'
    )
    cfg = config.load()
    assert (cfg.fairshare, cfg.fairshare_half_life) == (False, 86400.0)
    assert (cfg.limit_max_gpus, cfg.limit_max_jobs, cfg.limit_max_time) == (2.0, 5, 3600.0)
    cfg_file.write_text('[scheduling]\nfairshare_half_life = "inf"\n[limits]\nmax_time = "inf"\n')
    cfg = config.load()
    assert cfg.fairshare_half_life == math.inf and cfg.limit_max_time is None
    for text, words in (
        ("[limits]\nmax_gpus = 0\n", "max_gpus = 0 must be in (0, 1024]"),
        ("[limits]\nmax_jobs = 0\n", "max_jobs = 0 must be >= 1"),
        ('[limits]\nmax_time = "soon"\n', "invalid [limits] max_time 'soon'"),
        ('[scheduling]\nfairshare_half_life = "0"\n', "fairshare_half_life = '0' must be positive"),
        ('[scheduling]\nfairshare = "yes"\n', "must be true or false"),
    ):
        cfg_file.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(words)):
            config.load()


def _accounts(tmp_path: Path, cfg_text: str = "") -> tuple[Accounts, Store]:
    path = tmp_path / "config.toml"
    path.write_text(cfg_text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTH_CONFIG", str(path))
        cfg = config.load()
    store = Store.open(str(tmp_path / "berth.db"))
    return Accounts(store, cfg), store


def test_limits_levels_user_then_everyone_then_config(tmp_path: Path) -> None:
    acc, store = _accounts(tmp_path, "[limits]\nmax_gpus = 4\nmax_jobs = 10\n")
    assert acc.limit("alice", "max_gpus") == 4.0 and acc.limit("alice", "max_time") is None
    assert acc.limit("alice", "shares") == 1.0
    acc.set(store, EVERYONE, {"max_gpus": 2.0})
    acc.set(store, "alice", {"max_gpus": UNLIMITED, "shares": 3.0})
    assert acc.limit("bob", "max_gpus") == 2.0  # the runtime default beats the config's
    assert acc.limit("alice", "max_gpus") is None  # "none" for alice, whatever the default
    assert acc.limit("alice", "shares") == 3.0 and acc.limit("alice", "max_jobs") == 10.0
    lim = acc.user_limits()
    assert lim is not None and lim.of("alice") is None and lim.of("bob") == 2.0
    # kept in the store: a new Accounts (the daemon restarted) reads them back
    again = Accounts(store, config.Config())
    assert again.limit("alice", "shares") == 3.0 and again.limit("bob", "max_gpus") == 2.0
    acc.set(store, "alice", {"max_gpus": "default", "shares": "default"})
    assert "alice" not in acc.rows and store.limits().get("alice") is None
    assert acc.limit("alice", "max_gpus") == 2.0


def test_checks_at_submit(tmp_path: Path) -> None:
    acc, store = _accounts(tmp_path, '[limits]\nmax_jobs = 2\nmax_time = "1h"\nmax_gpus = 2\n')
    alice, bob = 1, 0  # (their unfinished jobs: the engine's JobTable.count_of)
    assert acc.check_submit("alice", Request(gpus=1), None, alice) == 3600.0
    assert acc.check_submit("alice", Request(gpus=1), 60.0, alice) == 60.0
    with pytest.raises(ProtocolError, match="-t 2:00:00 is more than alice may ask"):
        acc.check_submit("alice", Request(gpus=1), 7200.0, alice)
    with pytest.raises(ProtocolError, match="-g 4: alice may hold at most 2 GPUs at once"):
        acc.check_submit("alice", Request(gpus=4), None, alice)
    with pytest.raises(ProtocolError, match="alice has 1 jobs queued or running and this"):
        acc.check_submit("alice", Request(gpus=1), None, alice, count=2)
    assert acc.check_submit("bob", Request(gpus=1), None, bob, count=2) == 3600.0
    # a share holds its whole GPU against max_gpus (issue 41.3): -g 0.5 under a limit of 0.5
    # could never start
    acc.set(store, "carol", {"max_gpus": 0.5})
    with pytest.raises(ProtocolError, match=r"-g 0.5: carol may hold at most 0.5 GPUs at once "
                       r"\(a share counts as its whole GPU\)"):  # fmt: skip
        acc.check_submit("carol", Request(gpus=0.5), None, 0)


def test_usage_is_kept_and_running_jobs_count(tmp_path: Path) -> None:
    acc, store = _accounts(tmp_path, '[scheduling]\nfairshare_half_life = "inf"\n')
    job = Job(id=1, submit_time=0.0, user="alice", request=Request(gpus=2))
    transition(job, State.RUNNING, now=100.0, gpus=(0, 1))
    live = acc.fair([job], 150.0)
    assert live is not None and live.usage == {"alice": 100.0}
    transition(job, State.COMPLETED, now=200.0, exit_code=0)
    rows = acc.ended(job, 200.0)
    assert rows == [("alice", 200.0, 200.0)]
    with store.tx():
        store.db.executemany(Store.USAGE_SQL, rows)
    cfg = config.Config()
    cfg.fairshare_half_life = math.inf
    again = Accounts(store, cfg)  # (the daemon restarted)
    assert again.book.value("alice", 1e9) == 200.0
    summary = acc.summary([], 300.0)
    assert summary[0]["user"] == "alice" and summary[0]["usage_gpu_hours"] == 200.0 / 3600


def test_fair_share_off_gives_the_pass_nothing(tmp_path: Path) -> None:
    acc, _ = _accounts(tmp_path, "[scheduling]\nfairshare = false\n")
    assert acc.fair([], 0.0) is None and acc.user_limits() is None


def test_a_projects_usage_is_its_own_row_and_never_a_users(tmp_path: Path) -> None:
    acc, store = _accounts(
        tmp_path, '[scheduling]\nfairshare_half_life = "inf"\n[projects.vision]\nshares = 2\n'
    )
    job = Job(id=1, submit_time=0.0, user="alice", project="vision", request=Request(gpus=2))
    transition(job, State.RUNNING, now=100.0, gpus=(0, 1))
    live = acc.fair([job], 150.0)
    assert live is not None and live.project_usage == {"vision": 100.0}
    assert live.project_shares == {"vision": 2.0}
    transition(job, State.COMPLETED, now=200.0, exit_code=0)
    rows = acc.ended(job, 200.0)
    assert rows == [("alice", 200.0, 200.0), ("project:vision", 200.0, 200.0)]
    with store.tx():
        store.db.executemany(Store.USAGE_SQL, rows)
    again = Accounts(store, config.Config())  # (the daemon restarted)
    assert again.book.entries == {"alice": (200.0, 200.0)}  # (no user "project:vision")
    assert again.projects.book.value("vision", 200.0) == 200.0
    (row,) = acc.projects.summary([], 300.0)
    assert row["project"] == "vision" and row["usage_gpu_hours"] == 200.0 / 3600


def test_projects_checks_at_submit(tmp_path: Path) -> None:
    acc, _ = _accounts(
        tmp_path,
        '[projects.vision]\nmax_queued = 2\nusers = ["alice"]\n[projects.open]\n'
        '[scheduling]\ndefault_project = "open"\n',
    )
    p = acc.projects
    table = JobTable()  # (the engine's unfinished jobs, which count each project's)
    table[1] = Job(id=1, submit_time=0.0, user="alice", project="vision")
    counts = table.projects()
    assert p.check("bob", None, counts, 1) == "open"  # (the default)
    assert p.check("alice", "vision", counts, 1) == "vision" and counts["vision"] == 2
    with pytest.raises(ProtocolError, match="project vision has 2 jobs queued or running"):
        p.check("alice", "vision", counts, 1)
    with pytest.raises(ProtocolError, match="--project 'vision': bob is not a member of it"):
        p.check("bob", "vision", {}, 1)
    p.default = "vision"  # (a default the user may not charge says where it came from)
    with pytest.raises(ProtocolError, match="default_project 'vision': bob is not a member"):
        p.check("bob", None, {}, 1)
    with pytest.raises(ProtocolError, match=r"no such project here \(projects: open, vision\)"):
        p.check("alice", "nope", {}, 1)
