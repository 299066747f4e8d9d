"""The admin's notifications, delivered (issue 36.3): retries with backoff, then a line in the
audit log (`berth admin log`); filters by event, user and project; mail through SMTP; the
queue's bound drops the oldest, counted in the audit log; posting never waits for a receiver.
(The daemon's side: test_notify_daemon.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until
from notifykit import Receiver, SmtpSink

from berth.config import notify as config_notify
from berth.daemon.engine.notify_out import Outbox
from berth.errors import ConfigError


def _sinks(raw: dict[str, Any]) -> tuple[config_notify.Sink, ...]:
    return config_notify.read("/etc/berth/config.toml", raw).sinks()


def _msg(event: str, user: str | None = "alice", project: str | None = None,
         events: tuple[str, ...] = (), job: int = 7) -> dict[str, Any]:  # fmt: skip
    return {"event": event, "events": events or (event,), "user": user, "project": project,
            "job": {"id": job, "name": "n"}, "text": f"job {job} {event}",
            "subject": f"berth job {job} {event}", "mail_text": f"job {job}: {event}\n"}  # fmt: skip


def _audit(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_failing_receiver_is_tried_again_with_backoff(tmp_path: Path) -> None:
    log = tmp_path / "enforce.log"
    with Receiver(fail_first=2) as rx:
        hook = {"url": rx.url, "retries": 3, "backoff": 0.05, "headers": {"X-Token": "t0k"}}
        box = Outbox(_sinks({"webhooks": [hook]}), str(log))
        box.post(_msg("job_fail"))
        wait_until(lambda: rx.posts, timeout=20, message="delivered on the third try")
        assert rx.tries == 3 and rx.events() == ["job_fail"]
        assert rx.posts[0]["text"] == "job 7 job_fail" and "mail_text" not in rx.posts[0]
        assert rx.headers[0]["X-Token"] == "t0k"
        assert rx.headers[0]["Content-Type"] == "application/json"
        wait_until(lambda: box.sent == 1, timeout=5)
        box.close()
    assert _audit(log) == []


def test_a_receiver_that_keeps_failing_is_a_line_of_the_audit_log(tmp_path: Path) -> None:
    log = tmp_path / "enforce.log"
    with Receiver(fail_first=100) as rx:
        hook = {"url": rx.url, "retries": 2, "backoff": 0.02}
        box = Outbox(_sinks({"webhooks": [hook]}), str(log))
        started = time.monotonic()
        box.post(_msg("job_timeout", job=12))
        entry = wait_until(lambda: _audit(log), timeout=20, message="the failure logged")[0]
        assert rx.tries == 3 and time.monotonic() - started >= 0.02 + 0.04  # (doubling)
        box.close()
    assert entry["class"] == "notify" and entry["action"] == "undelivered"
    assert entry["event"] == "job_timeout" and entry["job"] == 12 and entry["user"] == "alice"
    assert "HTTP Error 500" in entry["reason"] and "(tried 3 time(s))" in entry["reason"]
    assert "secret-token" not in json.dumps(entry)  # (a hook's path may be its secret)
    assert box.failed == 1 and box.sent == 0


def test_receivers_get_only_the_events_users_and_projects_they_ask_for(tmp_path: Path) -> None:
    with Receiver() as every, Receiver() as fails, Receiver() as alice, Receiver() as vision:
        box = Outbox(_sinks({"webhooks": [
            {"url": every.url},
            {"url": fails.url, "events": ["job_fail", "gpu_lost"]},
            {"url": alice.url, "users": ["alice"]},
            {"url": vision.url, "projects": ["vision"], "events": ["job_end"]},
        ]}), str(tmp_path / "log"))  # fmt: skip
        box.post(_msg("job_begin", user="bob", project="vision"))
        box.post(_msg("job_fail", user="bob", events=("job_end", "job_fail")))
        box.post(_msg("job_end", user="alice", project="vision"))
        box.post(_msg("gpu_lost", user=None))
        wait_until(lambda: box.sent == 4 + 2 + 2 + 1, timeout=20, message="all delivered")
        box.close()
    assert every.events() == ["job_begin", "job_fail", "job_end", "gpu_lost"]
    assert fails.events() == ["job_fail", "gpu_lost"]  # (a job's end that failed is both)
    assert alice.events() == ["job_end", "gpu_lost"]  # (a GPU is about no one: it passes)
    assert vision.events() == ["job_end"]  # (bob's failure was of no project)


def test_mail_goes_through_smtp_to_the_admins_only(tmp_path: Path) -> None:
    with SmtpSink() as smtp:
        mail = {"to": ["gpu-admins@lab.example", "pi@lab.example"], "from": "berth@host",
                "smtp": f"127.0.0.1:{smtp.port}", "events": ["job_fail"]}  # fmt: skip
        box = Outbox(_sinks({"mail": mail}), str(tmp_path / "log"))
        message = _msg("job_fail")
        message["subject"] = "berth job 7 (x\nBcc: evil@example.org) FAILED"  # (a job's name)
        box.post(_msg("job_begin"))
        box.post(message)
        wait_until(lambda: smtp.mails, timeout=20, message="the mail arrived")
        wait_until(lambda: box.sent == 1, timeout=5)
        box.close()
    (got,) = smtp.mails
    assert got["from"] == "berth@host"
    assert got["to"] == ["gpu-admins@lab.example", "pi@lab.example"]
    assert "Subject: berth job 7 (x?Bcc: evil@example.org) FAILED" in got["data"]
    assert "\nBcc:" not in got["data"] and "job 7: job_fail" in got["data"]


def test_the_bound_drops_the_oldest_and_the_log_counts_them(tmp_path: Path) -> None:
    log = tmp_path / "enforce.log"
    with Receiver(hang=True) as rx:
        box = Outbox(_sinks({"webhooks": [{"url": rx.url, "retries": 0}]}), str(log), bound=3)
        box.post(_msg("job_begin", job=1))
        wait_until(lambda: rx.tries == 1, timeout=20, message="the worker waits on the hook")
        started = time.monotonic()
        for n in range(2, 7):
            box.post(_msg("job_begin", job=n))
        assert time.monotonic() - started < 1.0  # (posting never waits for the receiver)
        assert box.dropped == 2
        rx.released.set()
        wait_until(lambda: len(rx.posts) == 4, timeout=20, message="the rest delivered")
        box.close()
    assert [p["job"]["id"] for p in rx.posts] == [1, 4, 5, 6]
    (entry,) = _audit(log)
    assert entry["action"] == "dropped" and entry["count"] == 2 and entry["class"] == "notify"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"webhooks": [{"url": "file:///etc/shadow"}]}, "url = 'file:///etc/shadow' must be an http"),
        ({"webhooks": [{"url": "http://h/", "events": ["job_explode"]}]},
         "events has 'job_explode'; known: job_begin"),
        ({"webhooks": [{"url": "http://h/", "headers": {"X": "a\r\nHost: evil"}}]},
         "must be a header name"),
        ({"webhooks": [{"url": "http://h/", "retry": 3}]}, "unknown key 'retry'; known: url"),
        ({"webhooks": [{"url": "http://h/", "timeout": "0s"}]}, "timeout = '0s' must be from"),
        ({"mail": {"to": ["-oQ/tmp"]}}, "to: '-oQ/tmp' must be one mail address"),
        ({"mail": {"to": ["a@b"], "smtp": "localhost"}}, "smtp = 'localhost' must be HOST:PORT"),
        ({"hooks": []}, "unknown key 'hooks' in [notify]"),
    ],
)
def test_a_bad_notify_table_is_refused_naming_the_value(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as e:
        _sinks(raw)
    assert "config file '/etc/berth/config.toml'" in str(e.value) and says in str(e.value)


def test_mail_without_smtp_goes_to_the_hosts_sendmail(tmp_path: Path, monkeypatch: Any) -> None:
    spool = tmp_path / "spool"
    mta = tmp_path / "mta"
    mta.mkdir()
    (mta / "sendmail").write_text(f'#!/bin/sh\n{{ echo "args: $*"; cat; }} > {spool}\n')
    (mta / "sendmail").chmod(0o755)
    monkeypatch.setenv("PATH", f"{mta}:/usr/bin:/bin")
    box = Outbox(_sinks({"mail": {"to": ["admins@lab.example"]}}), str(tmp_path / "log"))
    box.post(_msg("gpu_lost", user=None))
    wait_until(lambda: box.sent == 1, timeout=20, message="handed to sendmail")
    box.close()
    text = spool.read_text()
    assert text.startswith("args: -i -- admins@lab.example\n")
    assert "Subject: berth job 7 gpu_lost" in text and "To: admins@lab.example" in text
