"""Admin reservations through the daemon (issue 24.1): `berth admin reserve`/`reservations`/
`unreserve`; others' jobs wait as (Reservation) in plain words, the holders' start; kept across
a restart in the middle of a window; the window's end wakes the daemon by its timer (no poll);
overlaps refused by name; bad input refused with nothing kept."""

from __future__ import annotations

import json
import os
import time

from helpers import wait_until
from userkit import NOBODY, request_as

OTHER = "nobody"  # a user other than the test's (root): a holder who submits nothing


def _reserve(daemon, *args: str) -> dict:
    out = daemon.berth("admin", "reserve", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["reservation"]


def _row(daemon, job_id: int) -> dict:
    return next(r for r in daemon.call("queue")["jobs"] if r["id"] == job_id)


def test_others_wait_as_reservation_across_a_restart_until_unreserved(daemon):
    daemon.start()
    r = _reserve(daemon, "--user", OTHER, "--gpu-ids", "0-3", "--start", "now",
                 "--duration", "2h", "--reason", "paper deadline")  # fmt: skip
    assert r["gpus"] == [0, 1, 2, 3] and r["holders"] == OTHER and r["open"]
    job_id = daemon.submit("true", time_limit=60.0)
    wait_until(lambda: _row(daemon, job_id)["reason"] == "Reservation", timeout=10,
               message="(Reservation)")  # fmt: skip
    detail = _row(daemon, job_id)["reason_detail"]
    assert detail.startswith(f"Reservation: GPUs 0,1,2,3 are reserved for {OTHER} for another")
    assert detail.endswith(f"(reservation {r['id']})")
    plain = daemon.berth("queue").stdout
    assert "(Reservation)" in plain
    assert f"reservation {r['id']}  GPUs 0,1,2,3 for {OTHER}" in plain
    assert "paper deadline" in plain
    status = daemon.berth("status").stdout
    assert f"reserved for {OTHER} until" in status
    shown = json.loads(daemon.berth("status", "--json").stdout)["queue"]["reservations"]
    assert [x["id"] for x in shown] == [r["id"]] and shown[0]["note"] == "paper deadline"
    assert daemon.call("queue")["reservations"][0]["holders"] == OTHER
    daemon.stop()  # a restart in the middle of the window: the reservation is kept
    daemon.start()
    listed = json.loads(daemon.berth("admin", "reservations", "--json").stdout)
    assert [x["id"] for x in listed["reservations"]] == [r["id"]]
    assert daemon.call("status")["reservations"][0]["gpus"] == [0, 1, 2, 3]
    wait_until(lambda: _row(daemon, job_id)["reason"] == "Reservation", timeout=10,
               message="(Reservation) after the restart")  # fmt: skip
    text = daemon.berth("admin", "reservations").stdout
    assert f"GPU 0   {str(r['id'])[-1] * 10}" in text  # the timeline: reserved from now
    out = daemon.berth("admin", "unreserve", str(r["id"]))
    assert out.returncode == 0 and f"removed reservation {r['id']}" in out.stdout
    assert daemon.wait_done([job_id], timeout=20)[job_id]["state"] == "COMPLETED"
    assert daemon.berth("admin", "reservations").stdout == "no reservations\n"


def test_the_holders_jobs_start_on_the_gpus_chosen_for_them(daemon):
    daemon.start()
    r = _reserve(daemon, "--user", "root", "-g", "2", "--start", "now", "--duration", "1h")
    assert r["gpus"] == [0, 1]  # (any 2, chosen at creation: the lowest free of reservations)
    job_id = daemon.submit("true")
    assert daemon.wait_done([job_id], timeout=20)[job_id]["state"] == "COMPLETED"
    assert daemon.job(job_id)["attempts"][0]["gpus"][0] in (0, 1)  # its reserved GPUs first
    group = _reserve(daemon, "--group", "root", "-g", "2", "--start", "now", "--duration", "1h")
    assert group["gpus"] == [2, 3] and group["holders"] == "group root"
    again = daemon.submit("true", gpu_ids=[3])  # root is a member of group root (pwd)
    assert daemon.wait_done([again], timeout=20)[again]["state"] == "COMPLETED"


def test_the_window_closes_on_time_without_polling(daemon):
    daemon.start("--poll-interval", "60")  # (no poll wakes it: the window's timer does)
    _reserve(daemon, "--user", OTHER, "-g", "4", "--start", "now", "--duration", "3s")
    job_id = daemon.submit("true")  # no time limit: kept off until the window ends
    wait_until(lambda: _row(daemon, job_id)["reason"] == "Reservation", timeout=10,
               message="(Reservation)")  # fmt: skip
    assert daemon.wait_done([job_id], timeout=20)[job_id]["state"] == "COMPLETED"


def test_a_job_without_a_time_limit_is_kept_off_gpus_reserved_later(daemon):
    daemon.start()
    _reserve(daemon, "--user", OTHER, "-g", "4", "--start", "now+1d", "--duration", "1h")
    open_ended = daemon.submit("true")
    wait_until(lambda: _row(daemon, open_ended)["reason"] == "Reservation", timeout=10,
               message="(Reservation)")  # fmt: skip
    assert "a job without a time limit (-t) may run into it" in _row(
        daemon, open_ended)["reason_detail"]  # fmt: skip
    short = daemon.submit("true", time_limit=600.0)  # ends long before it opens: backfill
    assert daemon.wait_done([short], timeout=20)[short]["state"] == "COMPLETED"


def test_overlaps_and_bad_input_are_refused_and_change_nothing(daemon):
    daemon.start()
    first = _reserve(daemon, "--user", OTHER, "--gpu-ids", "0,1", "--start", "now+1h",
                     "--duration", "2h")  # fmt: skip
    out = daemon.berth("admin", "reserve", "--user", "root", "--gpu-ids", "1,2",
                       "--start", "now+2h", "--duration", "2h")  # fmt: skip
    assert out.returncode != 0
    assert f"GPU 1 overlap reservation {first['id']} (GPUs 0,1 for {OTHER}" in out.stderr
    out = daemon.berth("admin", "reserve", "--user", "root", "-g", "3", "--start", "now+1h",
                       "--duration", "1h")  # fmt: skip
    assert out.returncode != 0 and "-g 3: only 2 GPUs are free of other reservations" in out.stderr
    later = _reserve(daemon, "--user", "root", "--gpu-ids", "1", "--start", "now+3h",
                     "--duration", "1h")  # (right after the first: no overlap)  # fmt: skip
    assert later["gpus"] == [1]
    for args, says in (
        (("--user", "no-such-user-x", "-g", "1"), "no user 'no-such-user-x' on this machine"),
        (("--group", "no-such-group-x", "-g", "1"), "no group 'no-such-group-x'"),
        (("-g", "1"), "name who holds the reservation"),
        (("--user", "root"), "say which GPUs: -g N"),
        (("--user", "root", "--gpu-ids", "9"), "no GPU '9' here"),
    ):
        out = daemon.berth("admin", "reserve", *args, "--start", "now+5h", "--duration", "1h")
        assert out.returncode != 0 and says in out.stderr, (args, out.stderr)
    out = daemon.berth("admin", "reserve", "--user", "root", "-g", "1", "--start", "soonish",
                       "--duration", "1h")  # fmt: skip
    assert out.returncode != 0 and "invalid --start 'soonish'" in out.stderr
    out = daemon.berth("admin", "reserve", "--user", "root", "-g", "1", "--start", "now",
                       "--duration", "0")  # fmt: skip
    assert out.returncode != 0 and "--duration '0': must be positive" in out.stderr
    out = daemon.berth("admin", "unreserve", "99")
    assert out.returncode != 0 and "no reservation 99" in out.stderr
    kept = daemon.call("reservations")["reservations"]
    assert [r["id"] for r in kept] == [first["id"], later["id"]]
    assert time.time() < kept[0]["start"]


def test_only_admins_reserve_and_the_holders_own_jobs_start(daemon):
    daemon.start()
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)  # let nobody reach the socket
    now = time.time()
    refused = request_as(NOBODY, daemon.socket, "reserve", users=[OTHER], count=1, start=now,
                         end=now + 3600)  # fmt: skip
    assert refused.get("code") == "NOT_OWNER" and "may not reserve GPUs" in refused["message"]
    assert request_as(NOBODY, daemon.socket, "reservations")["ok"]["reservations"] == []
    r = _reserve(daemon, "--user", OTHER, "-g", "4", "--start", "now", "--duration", "1h")
    assert request_as(NOBODY, daemon.socket, "unreserve", id=r["id"]).get("code") == "NOT_OWNER"
    mine = daemon.submit("true", time_limit=60.0)
    wait_until(lambda: _row(daemon, mine)["reason"] == "Reservation", timeout=10,
               message="root's job kept off nobody's GPUs")  # fmt: skip
    spec = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "stdout": "/dev/null", "stderr": "/dev/null"}  # fmt: skip
    theirs = request_as(NOBODY, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    assert daemon.wait_done([theirs], timeout=20)[theirs]["state"] == "COMPLETED"
    assert _row(daemon, mine)["reason"] == "Reservation"


def test_the_window_from_the_options() -> None:
    import argparse

    import pytest

    from berth.cli.admin_reserve import request
    from berth.errors import UsageError

    def args(**kw: object) -> argparse.Namespace:
        base = {"user": ["alice"], "group": [], "project": [], "gpus": 2, "gpu_ids": None,
                "start": "2026-12-01 22:00", "duration": None, "end": None,
                "allow_unlimited": False, "reason": None}  # fmt: skip
        return argparse.Namespace(**{**base, **kw})

    start = time.mktime((2026, 12, 1, 22, 0, 0, 0, 0, -1))
    night = request(args(end="06:00"))  # a clock time alone: the start's day, or the next
    assert night["start"] == start and night["end"] == time.mktime((2026, 12, 2, 6, 0, 0, 0, 0, -1))
    assert request(args(duration="2h"))["end"] == start + 7200
    assert request(args(gpus=None, gpu_ids="0-1", duration="1h"))["gpus"] == [0, 1]
    with pytest.raises(UsageError, match="--duration 2h, or --end TIME"):
        request(args())
    with pytest.raises(UsageError, match="must be after --start"):
        request(args(end="2026-12-01T21:00"))
    with pytest.raises(UsageError, match="say which GPUs"):
        request(args(gpus=None, duration="1h"))
