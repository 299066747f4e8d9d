"""`berth wait ID...` (until jobs end; exits with their outcome) and `--notify CMD` /
`--mail-user` (run as the job's user once its end is durable, never changing the job's
record) (issue 12.6)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from helpers import wait_until
from userkit import NOBODY, request_as


def _berth(daemon, *args: str, env: dict[str, str] | None = None, timeout: float = 30):
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", *args], env={**daemon.env, **(env or {})},
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_wait_blocks_until_the_jobs_end_and_exits_with_their_outcome(daemon):
    daemon.start(gpus=2)
    gate = daemon.fake.root / "gate"
    slow = daemon.submit("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done")
    ok = daemon.submit("true")
    failed = daemon.submit("sh", "-c", "exit 3")
    waiter = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "wait", str(ok), str(slow)],
        env=daemon.env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    daemon.wait_done([ok])
    time.sleep(0.3)  # (what it must not do: return while job `slow` still runs)
    assert waiter.poll() is None
    gate.touch()
    out, _ = waiter.communicate(timeout=20)
    assert waiter.returncode == 0
    assert out == f"job {ok}: COMPLETED (exit code 0)\njob {slow}: COMPLETED (exit code 0)\n"
    r = _berth(daemon, "wait", str(ok), str(failed))
    assert r.returncode == 3 and f"job {failed}: FAILED (exit code 3)" in r.stdout
    hold = daemon.submit("true", hold=True)
    r = _berth(daemon, "wait", "--timeout", "0.2", str(hold))
    assert r.returncode == 6 and "has not ended" in r.stderr
    r = _berth(daemon, "wait", "999")
    assert r.returncode == 2 and "no job 999" in r.stderr


def test_notify_runs_after_the_end_is_recorded_with_the_facts(daemon):
    daemon.start(gpus=1)
    out = daemon.fake.root / "notified"
    show = f"{sys.executable} -m berth.cli.main show $BERTH_JOB_ID | head -1"
    cmd = f"{{ env | grep ^BERTH_JOB_ | sort; {show}; }} > {out}"
    r = _berth(daemon, "submit", "--parsable", "-J", "named", "--notify", cmd, "--",
               "sh", "-c", "echo hi; exit 4")  # fmt: skip
    job_id = int(r.stdout)
    wait_until(out.exists, timeout=20, message="the notification ran")
    text = wait_until(lambda: out.read_text() if out.read_text().count("\n") >= 10 else "")
    assert f"BERTH_JOB_ID={job_id}\n" in text and "BERTH_JOB_NAME=named\n" in text
    assert "BERTH_JOB_STATE=FAILED\n" in text and "BERTH_JOB_EXIT_CODE=4\n" in text
    assert "BERTH_JOB_REASON=exit code 4\n" in text and "BERTH_JOB_GPUS=0\n" in text
    assert f"Job {job_id} (named) of root: FAILED" in text  # its end was durable already
    # a notification that fails (or never ends) changes nothing of the job's record
    r = _berth(daemon, "submit", "--parsable", "--notify", "exit 9", "--", "true")
    done = int(r.stdout)
    assert daemon.wait_done([done])[done]["state"] == "COMPLETED"
    # a job cancelled before it started is notified too
    mark = daemon.fake.root / "cancelled"
    r = _berth(daemon, "submit", "--parsable", "--hold", "--notify",
               f"echo $BERTH_JOB_STATE > {mark}", "--", "true")  # fmt: skip
    assert _berth(daemon, "cancel", r.stdout.strip()).returncode == 0
    wait_until(lambda: mark.exists() and mark.read_text() == "CANCELLED\n", timeout=20)


def test_notify_runs_as_the_jobs_user(daemon):
    daemon.start(gpus=1)
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    out_dir = Path(daemon.sockdir) / "theirs"  # (a directory nobody can reach)
    out_dir.mkdir()
    out_dir.chmod(0o777)
    spec = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "stdout": str(out_dir / "%j.out"), "notify": f"id -u > {out_dir}/who"}  # fmt: skip
    reply = request_as(NOBODY, daemon.socket, "submit", job=spec)
    assert "ok" in reply, reply
    job_id = reply["ok"]["job_id"]
    row = daemon.wait_done([job_id])[job_id]
    assert row["state"] == "COMPLETED", daemon.job(job_id)["attempts"][0]["reason"]
    who = out_dir / "who"
    wait_until(lambda: who.exists() and who.read_text().strip(), timeout=20)
    assert who.read_text().strip() == str(NOBODY)


def test_mail_user_needs_a_local_mta_and_mails_the_end(daemon):
    daemon.start(gpus=1)
    bare = {"PATH": os.path.dirname(sys.executable) + ":/bin"}  # (no sendmail there)
    if not any(os.path.exists(f"{d}/sendmail") for d in ("/usr/sbin", "/usr/lib")):
        r = _berth(daemon, "submit", "--mail-user", "me@example.org", "--", "true", env=bare)
        assert r.returncode == 2 and "no mail transfer agent here" in r.stderr
        assert daemon.call("queue", all=True)["jobs"] == []
    mta = daemon.fake.root / "mta"
    mta.mkdir()
    spool = daemon.fake.root / "spool"
    (mta / "sendmail").write_text(f'#!/bin/sh\n{{ echo "to: $*"; cat; }} > {spool}\n')
    (mta / "sendmail").chmod(stat.S_IRWXU)
    env = {"PATH": f"{mta}:{os.environ['PATH']}"}
    r = _berth(daemon, "submit", "--parsable", "-J", "mailed", "--mail-user", "me@example.org",
               "--", "true", env=env)  # fmt: skip
    job_id = int(r.stdout)
    wait_until(lambda: spool.exists() and "Output:" in spool.read_text(), timeout=20)
    text = spool.read_text()
    assert text.startswith("to: -i -- me@example.org\n")
    assert f"Subject: berth job {job_id} (mailed) COMPLETED" in text
    r = _berth(daemon, "submit", "--mail-user=-oQ/tmp", "--", "true", env=env)  # (an option)
    assert r.returncode == 2 and "give one address" in r.stderr
