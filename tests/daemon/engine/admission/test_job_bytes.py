"""What a job's bytes may cost the daemon (issue 41.4, DESIGN invariant 8): 60 submits of an
8 MiB argv were all accepted (`berth.db` +482 MB, the daemon's memory 72 -> 603 MB). Each job,
every field of it, is bounded by ``[limits] max_job_bytes`` (client and daemon), and the
bytes of each user's unfinished jobs in the store by ``[limits] max_user_bytes``; a refused
submit changes nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from berth import config
from berth.client import DaemonError
from berth.errors import ConfigError
from berth.wire.protocol import MAX_REQUEST


def _db_bytes(state_dir: str) -> int:
    base = os.path.join(state_dir, "berth.db")
    return sum(os.path.getsize(p) for p in (base, base + "-wal") if os.path.exists(p))


def _job(**fields: Any) -> dict[str, Any]:
    return {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "hold": True,
            **fields}  # fmt: skip


def _refused(daemon: Any, kind: str, **fields: Any) -> str:
    try:
        reply = daemon.call(kind, **fields)
    except DaemonError as e:
        return str(e)
    raise AssertionError(f"accepted: {reply}")


def _config(daemon: Any, text: str) -> None:
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write(text)
    daemon.env["BERTH_CONFIG"] = path


def test_a_huge_argv_is_refused_whole_by_the_daemon_and_changes_nothing(daemon: Any) -> None:
    """The hostile submit: an argv of 4 MiB (under the 8 MiB frame) was accepted and stored."""
    daemon.start()
    daemon.call("submit", job=_job())  # (the database warmed up)
    before = _db_bytes(daemon.state_dir)
    queued = daemon.call("queue", all=True)["jobs"]
    for argv in (["echo", "x" * (4 << 20)], ["echo", *["y" * 1000] * 300]):
        message = _refused(daemon, "submit", job=_job(argv=argv))
        assert "more than one job may be (256K, [limits] max_job_bytes)" in message, message
        assert "nothing was queued" in message and "in a file" in message
    # one job of a jobs file: the whole request refused, its first job not queued either
    message = _refused(daemon, "submit_all", jobs=[_job(), _job(argv=["echo", "z" * 300_000])])
    assert message.startswith("job 2 of 2: the job is 293K") and "max_job_bytes" in message
    assert daemon.call("queue", all=True)["jobs"] == queued
    assert _db_bytes(daemon.state_dir) - before < 64 * 1024


def test_the_client_refuses_before_sending(daemon: Any) -> None:
    """`berth submit` says the size, the limit and what to do, with no daemon to ask."""
    out = daemon.berth("submit", "--", "echo", *["a" * 1000] * 300)  # (no argument > 128K)
    assert out.returncode == 2, out.stderr
    assert re.search(r"the job is 29\dK \(its command", out.stderr), out.stderr
    assert "[limits] max_job_bytes" in out.stderr
    assert "put long arguments in a file" in out.stderr
    assert "daemon" not in out.stderr.lower()  # (refused before any daemon was looked for)


def test_each_users_bytes_in_the_store_are_bounded(daemon: Any) -> None:
    """``max_user_bytes``: a user's unfinished jobs keep at most so much in the store; the
    refusal names the limit; a restart keeps the count; jobs that end give their bytes back;
    an array's shared spec counts once."""
    _config(daemon, '[limits]\nmax_user_bytes = "8M"\n')
    daemon.start()
    big = ["echo", "b" * (200 * 1024)]
    ids = []
    while True:
        try:
            ids.append(int(daemon.call("submit", job=_job(argv=big))["job_id"]))
        except DaemonError as e:
            message = str(e)
            break
        assert len(ids) < 60, "never refused"
    assert len(ids) == 40  # 40 x 200K (and their other fields) fill 8M
    assert "keep 7.8M in this daemon's store and this would add 200K" in message, message
    assert "the most is 8.0M ([limits] max_user_bytes" in message
    # kept across a restart: the same refusal
    daemon.stop()
    daemon.start()
    assert "[limits] max_user_bytes" in _refused(daemon, "submit", job=_job(argv=big))
    # jobs that end give their bytes back
    daemon.call("cancel", job_ids=ids[:1])
    daemon.call("submit", job=_job(argv=big))
    # an array's tasks share one spec: 100 tasks of a 100K command count 100K (+256 a task)
    array = daemon.call("submit", job=_job(argv=["echo", "c" * (100 * 1024)], array="0-99"))
    assert len(array["tasks"]) == 100
    assert "max_user_bytes" in _refused(daemon, "submit", job=_job(argv=big))


def test_the_limit_keys_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    cfg = config.Config()
    assert (cfg.limit_max_job_bytes, cfg.limit_max_user_bytes) == (256 << 10, 256 << 20)
    assert config.MAX_REQUEST_SIZE == MAX_REQUEST  # (a job may be at most a request frame)
    path.write_text('[limits]\nmax_job_bytes = "1M"\nmax_user_bytes = "1G"\n')
    cfg = config.load()
    assert (cfg.limit_max_job_bytes, cfg.limit_max_user_bytes) == (1 << 20, 1 << 30)
    for text, words in (
        ('[limits]\nmax_job_bytes = "9M"\n', "max_job_bytes = '9M' must be in (0, 8M]"),
        ("[limits]\nmax_job_bytes = 0\n", "max_job_bytes = 0 must be in (0, 8M]"),
        ('[limits]\nmax_user_bytes = "1M"\n', "max_user_bytes = '1M' must be in [8M, 1T]"),
        ('[limits]\nmax_user_bytes = "lots"\n', "[limits] max_user_bytes:"),
        ("[limits]\nmax_job_bytes = true\n", "max_job_bytes"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(words)):
            config.load()
