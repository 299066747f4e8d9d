"""What `berth queue` / `berth show` print (issue 10, point 8): any job name prints (a name
that is not UTF-8, control characters), `queue --json` is the daemon's JSON passed through,
and a waiting job whose GPU is lost says so. Every screen escapes the same way (issue 20.13,
20.14): `berth status` and `queue --start` too."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import wait_until


def _berth(daemon, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    # stdout as under a UTF-8 locale such as en_US.UTF-8: strict (the C and C.UTF-8 locales
    # would let lone surrogates through, and this machine may have no other).
    env = {**daemon.env, "PYTHONIOENCODING": "utf-8:strict"}
    return subprocess.run([sys.executable, "-m", "berth.cli.main", *args], env=env,
                          capture_output=True, text=True, errors="surrogateescape",
                          timeout=30, check=False)  # fmt: skip


def test_a_job_name_that_is_not_utf8_prints(daemon):
    daemon.start()
    out = daemon.berth("submit", "--parsable", "--hold", "-J", "\udcff", "--", "true")  # -J $'\xff'
    assert out.returncode == 0, out.stderr
    esc = daemon.berth("submit", "--parsable", "--hold", "-J", "a\x1b[2Jb", "--", "true")
    queue = _berth(daemon, "queue")
    assert queue.returncode == 0, queue.stderr
    assert "\\xff" in queue.stdout and "a\\x1b[2Jb" in queue.stdout
    assert "\x1b" not in queue.stdout
    shown = _berth(daemon, "show", esc.stdout.strip())
    assert shown.returncode == 0 and "(a\\x1b[2Jb)" in shown.stdout, shown.stderr
    rows = json.loads(_berth(daemon, "queue", "--json").stdout)["jobs"]
    assert [r["name"] for r in rows] == ["\udcff", "a\x1b[2Jb"]


TITLE = "a\x1b]0;pwned\x07b\udcff"  # sets the window title; then a byte not UTF-8
SHOWN = "a\\x1b]0;pwned\\x07b\\xff"


def test_every_screen_escapes_names_and_survives_a_lone_surrogate(daemon):
    daemon.start(gpus=1)
    running = daemon.submit("sleep", "60", name=TITLE)
    daemon.submit("true", hold=True, name="\udcff")  # -J $'\xff'
    daemon.submit("true", hold=True, name="\ud800x")  # no byte at all: JSON's \\ud800
    wait_until(lambda: daemon.job(running)["state"] == "RUNNING", message="job runs")
    status = _berth(daemon, "status")
    assert status.returncode == 0, status.stderr
    assert f"({SHOWN}) of" in status.stdout and "\x1b" not in status.stdout
    start = _berth(daemon, "queue", "--start")
    assert start.returncode == 0, start.stderr
    assert "\\xff" in start.stdout and "\\ud800x" in start.stdout, start.stdout
    assert "\x1b" not in start.stdout
    shown = _berth(daemon, "show", str(running))
    assert shown.returncode == 0 and f"({SHOWN})" in shown.stdout, shown.stderr


def test_queue_json_is_the_daemons_json_passed_through(daemon):
    daemon.start()
    daemon.submit("true", hold=True, name="x")
    with daemon.client() as c:
        c.send("queue", all=False)
        raw = c.receive_raw()
    out = _berth(daemon, "queue", "--json")
    assert out.returncode == 0, out.stderr
    # byte for byte what the daemon sent, but its "ok": not decoded and encoded again
    assert out.stdout.encode() == b"{" + raw[len(b'{"ok":true,') :] + b"\n"
    assert json.loads(out.stdout)["jobs"][0]["name"] == "x"


def test_a_lost_gpu_makes_waiting_jobs_say_so(daemon):
    daemon.fake.setup(n=2, memory="80G")
    daemon.start("--poll-interval", "0.1", gpus=None)
    daemon.fake.inject(1, "*", "GPU_IS_LOST")
    wait_until(lambda: daemon.call("status")["gpus"]["1"]["uuid"].startswith("UNKNOWN"),
               message="the daemon sees GPU 1 lost")  # fmt: skip
    job_id = daemon.submit("true", gpus=2)

    def reason() -> str:
        return str(daemon.job(job_id)["reason"] or "")

    wait_until(lambda: reason().startswith("GpuUnhealthy"), timeout=10, message="GpuUnhealthy")
    assert "GPU 1 unhealthy" in reason()
    queue = daemon.berth("queue")
    assert "(GpuUnhealthy)" in queue.stdout
    daemon.fake.inject(1, "*", None)  # back (after a reset): the job runs
    assert daemon.wait_done([job_id], timeout=15)[job_id]["state"] == "COMPLETED"
