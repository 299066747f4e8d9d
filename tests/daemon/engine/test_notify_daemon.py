"""The daemon tells the admin's receivers (issue 36.3): a job's begin and end once durable
(a name is data in Slack's text), a GPU lost, a reservation's start and end; a receiver that
hangs delays no job's start, and what it never took is in `berth admin log`; a job's own
``--mail-type`` mails its ``--mail-user`` when it begins. (Delivery itself:
test_notify_out.py.)"""

from __future__ import annotations

import json
import os
import stat

from helpers import wait_until
from notifykit import Receiver


def _config(daemon, text: str) -> None:
    path = daemon.fake.root / "config.toml"
    path.write_text(text)
    daemon.env["BERTH_CONFIG"] = str(path)


def test_jobs_begin_and_end_are_posted_with_a_slack_text(daemon):
    with Receiver() as rx:
        hook = f'url = "{rx.url}"\nheaders = {{ Authorization = "Bearer abc" }}\n'
        _config(daemon, f"[[notify.webhooks]]\n{hook}")
        daemon.start("--poll-interval", "0.2", gpus=2)
        bad = daemon.submit("sh", "-c", "exit 3", name="<!channel> & co {0}")
        daemon.wait_done([bad])
        wait_until(lambda: len(rx.posts) >= 2, timeout=20, message="begin and end posted")
        begin, end = rx.posts[:2]
        assert begin["event"] == "job_begin" and end["event"] == "job_fail"
        assert end["job"]["id"] == bad and end["job"]["state"] == "FAILED"
        assert end["job"]["exit_code"] == 3 and end["job"]["name"] == "<!channel> & co {0}"
        assert "(&lt;!channel&gt; &amp; co {0}) of root ended FAILED (exit code 3)" in end["text"]
        assert "<!channel>" not in end["text"] and rx.headers[0]["Authorization"] == "Bearer abc"
        held = daemon.submit("true", hold=True)
        daemon.call("cancel", job_ids=[held])
        wait_until(lambda: len(rx.posts) >= 3, timeout=20, message="the cancel posted")
        assert rx.posts[2]["event"] == "job_end" and rx.posts[2]["job"]["state"] == "CANCELLED"
        # a retry puts the job back in the queue: job_requeue, with the attempt's reason
        again = daemon.submit("sh", "-c", "exit 1", retries=1)
        requeued = wait_until(lambda: [p for p in rx.posts if p["event"] == "job_requeue"],
                              timeout=20, message="the retry told")  # fmt: skip
        assert requeued[0]["job"]["id"] == again and "was requeued" in requeued[0]["text"]
        daemon.call("cancel", job_ids=[again])
        # a GPU lost (NVML says so) is told once
        daemon.fake.inject(1, "*", "GPU_IS_LOST")
        lost = wait_until(lambda: [p for p in rx.posts if p["event"] == "gpu_lost"], timeout=20)
        assert lost[0]["gpu"]["index"] == 1 and "GPU 1" in lost[0]["text"]
        # a reservation's start and end
        r = daemon.berth("admin", "reserve", "-g", "1", "--user", "alice", "--start", "now",
                         "--duration", "2s")  # fmt: skip
        assert r.returncode == 0, r.stderr

        def told() -> list[str] | None:
            got = [p["event"] for p in rx.posts if "reservation" in p]
            return got if len(got) >= 2 else None

        got = wait_until(told, timeout=30, message="the reservation's start and end told")
        assert got == ["reservation_start", "reservation_end"]
        assert len([p for p in rx.posts if p["event"] == "gpu_lost"]) == 1
        ends = [p["job"]["id"] for p in rx.posts if p["event"] in ("job_end", "job_fail")]
        begins = [p["job"]["id"] for p in rx.posts if p["event"] == "job_begin"]
        assert sorted(ends) == [bad, held, again] and sorted(begins) == [bad, again]  # (cancelled before its retry)
        # an array's tasks are named as everywhere: ID_TASK
        array = daemon.submit("true", array="0-1")

        def tasks() -> list[str] | None:
            got = sorted(p["job"]["array"] for p in rx.posts
                         if p["event"] == "job_end" and p["job"]["array"])  # fmt: skip
            return got if len(got) == 2 else None

        named = wait_until(tasks, timeout=20, message="the tasks' ends told")
        assert named == [f"{array}_0", f"{array}_1"]
        assert any(f"job {array}_1 (true) of root ended COMPLETED" in p["text"] for p in rx.posts)


def test_a_hanging_receiver_delays_no_start_and_its_failures_are_logged(daemon):
    with Receiver(hang=True, fail_first=100) as rx:  # (released: it answers 500)
        _config(daemon, f'[[notify.webhooks]]\nurl = "{rx.url}"\ntimeout = "60s"\nretries = 0\n')
        daemon.start(gpus=1)
        first = daemon.submit("true")
        wait_until(lambda: rx.tries >= 1, timeout=20, message="the hook holds the worker")
        second = daemon.submit("true")  # (needs the GPU the first freed: a start of its own)
        done = daemon.wait_done([first, second], timeout=20)
        assert {r["state"] for r in done.values()} == {"COMPLETED"}
        assert rx.tries == 1  # (the worker still waits on the first message)
        rx.released.set()

        def undelivered():
            r = daemon.berth("admin", "log", "--json")
            entries = json.loads(r.stdout)["entries"]
            return [e for e in entries if e.get("action") == "undelivered"] or None

        entry = wait_until(undelivered, timeout=30, message="the failure in berth admin log")[0]
        assert entry["event"] == "job_begin" and entry["job"] == first
        assert "HTTP Error 500" in entry["reason"] and "secret-token" not in json.dumps(entry)
        text = daemon.berth("admin", "log").stdout
        host = rx.url.split("/hook/")[0]
        assert f"undelivered notify  {host}/... job_begin job {first}  (HTTPError" in text


def test_mail_type_begin_mails_the_user_when_the_job_starts(daemon):
    daemon.start(gpus=1)
    mta = daemon.fake.root / "mta"
    mta.mkdir()
    spool = daemon.fake.root / "spool"
    (mta / "sendmail").write_text(f'#!/bin/sh\n{{ echo "to: $*"; cat; echo .; }} >> {spool}\n')
    (mta / "sendmail").chmod(stat.S_IRWXU)
    daemon.env["PATH"] = f"{mta}:{os.environ['PATH']}"  # (the job's: the daemon mails by it)
    gate = daemon.fake.root / "gate"
    r = daemon.berth("submit", "--parsable", "-J", "b", "--mail-user", "me@example.org",
                     "--mail-type", "begin", "--", "sh", "-c",
                     f"while [ ! -e {gate} ]; do sleep 0.05; done")  # fmt: skip
    assert r.returncode == 0, r.stderr
    job = int(r.stdout)
    assert daemon.job(job)["mail_type"] == "BEGIN"
    assert "  mail when:  BEGIN\n" in daemon.berth("show", str(job)).stdout
    began = wait_until(lambda: spool.exists() and "began" in spool.read_text(), timeout=20)
    assert began and f"Subject: berth job {job} (b) began" in spool.read_text()
    assert f"Job {job} (b) of root began on GPU(s) 0." in spool.read_text()
    gate.touch()
    daemon.wait_done([job])
    # its end is not mailed (BEGIN only): a later job's end mail comes after where it would be
    r = daemon.berth("submit", "--parsable", "-J", "e", "--mail-user", "me@example.org",
                     "--", "true")  # fmt: skip
    wait_until(lambda: "(e) COMPLETED" in spool.read_text(), timeout=20)
    assert "(b) COMPLETED" not in spool.read_text()
    # REQUEUE: a retry put it back in the queue
    r = daemon.berth("submit", "--parsable", "-J", "r", "--mail-user", "me@example.org",
                     "--mail-type", "REQUEUE", "--retries", "1", "--", "sh", "-c", "exit 1")  # fmt: skip
    again = int(r.stdout)
    wait_until(lambda: "(r) was requeued" in spool.read_text(), timeout=20)
    assert f"Job {again} (r) of root was requeued (exit code 1)." in spool.read_text()
    daemon.call("cancel", job_ids=[again])
    r = daemon.berth("submit", "--mail-type", "END", "--", "true")
    assert r.returncode == 2 and "give --mail-user ADDR too" in r.stderr
    r = daemon.berth("submit", "--mail-user", "me@x", "--mail-type", "SOMETIMES", "--", "true")
    assert r.returncode == 2 and "--mail-type 'SOMETIMES': give BEGIN, END, FAIL" in r.stderr
