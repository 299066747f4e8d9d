"""The queue commands end to end: CLI -> client -> socket -> daemon -> supervisor -> job."""

from __future__ import annotations

import json
import os
import stat

from helpers import wait_until


def test_submit_queue_show_logs(daemon):
    daemon.start()
    out = daemon.berth("submit", "-J", "hello", "--", "sh", "-c", "echo hi; sleep 0.3; echo bye")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Submitted job ")
    job_id = int(out.stdout.split()[-1])
    queue = daemon.berth("queue")
    which, columns = queue.stdout.splitlines()[:2]
    assert which.startswith("your own daemon on " + daemon.socket)
    assert columns.split() == ["JOBID", "NAME", "USER", "ST", "TIME", "GPUS", "NODELIST(REASON)"]
    bare = daemon.berth("queue", "--noheader").stdout
    assert not bare.startswith(("your", "JOBID"))
    follow = daemon.berth("logs", "-f", str(job_id))
    assert follow.returncode == 0 and follow.stdout == "hi\nbye\n"
    shown = daemon.berth("show", str(job_id))
    assert f"Job {job_id} (hello)" in shown.stdout and "COMPLETED" in shown.stdout
    data = json.loads(daemon.berth("show", "--json", str(job_id)).stdout)
    assert data["state"] == "COMPLETED" and data["command"] == [
        "sh",
        "-c",
        "echo hi; sleep 0.3; echo bye",
    ]
    listed = json.loads(daemon.berth("queue", "--all", "--json").stdout)
    assert [r["id"] for r in listed["jobs"]] == [job_id]
    assert listed["daemon"]["socket"] == daemon.socket and listed["daemon"]["system"] is False
    assert json.loads(daemon.berth("queue", "--json").stdout)["jobs"] == []


def test_parsable_wait_and_exit_status(daemon):
    daemon.start()
    out = daemon.berth("submit", "--parsable", "--", "true")
    assert out.returncode == 0 and out.stdout.strip().isdigit()
    waited = daemon.berth("submit", "--wait", "--", "sh", "-c", "exit 3")
    assert waited.returncode == 3
    assert "FAILED" in waited.stderr


def test_interactive_streams_output(daemon):
    daemon.start()
    out = daemon.berth("submit", "-i", "--", "sh", "-c", "echo one; echo two >&2")
    assert out.returncode == 0
    assert out.stdout == "one\ntwo\n"  # one log for both
    err = str(daemon.fake.root / "%j.err")
    out = daemon.berth("submit", "-i", "-e", err, "--", "sh", "-c", "echo one; echo two >&2")
    assert out.returncode == 0
    assert out.stdout == "one\n" and "two\n" in out.stderr


def test_environment_is_captured_and_export_none_drops_it(daemon):
    daemon.start()
    env = {**daemon.env, "BERTH_TEST_VAR": "captured"}
    import subprocess
    import sys

    def submit(*args: str) -> int:
        out = subprocess.run(
            [sys.executable, "-m", "berth.cli.main", "submit", "--parsable", *args, "--",
             "sh", "-c", "echo ${BERTH_TEST_VAR:-unset}"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return int(out.stdout)

    a, b = submit(), submit("--export", "NONE")
    daemon.wait_done([a, b])
    assert daemon.berth("logs", str(a)).stdout == "captured\n"
    assert daemon.berth("logs", str(b)).stdout == "unset\n"


def test_output_patterns_and_working_directory(daemon):
    daemon.start()
    workdir = os.path.join(daemon.fake.root, "work")
    os.mkdir(workdir)
    out = daemon.berth("submit", "--parsable", "-D", workdir, "-o", "out-%j.txt", "--", "pwd")
    job_id = int(out.stdout)
    daemon.wait_done([job_id])
    with open(os.path.join(workdir, f"out-{job_id}.txt")) as f:
        assert f.read() == workdir + "\n"


def test_command_is_never_run_by_a_shell(daemon):
    daemon.start()
    out = daemon.berth("submit", "--parsable", "--", "echo", "$HOME;", "touch", "pwned")
    job_id = int(out.stdout)
    daemon.wait_done([job_id])
    assert daemon.berth("logs", str(job_id)).stdout == "$HOME; touch pwned\n"
    assert not os.path.exists(os.path.join(daemon.fake.root, "pwned"))


def test_bad_submissions_change_nothing(daemon):
    daemon.start()
    for args in (["-g", "1.5", "--", "true"], ["-g", "-1", "--", "true"], ["--mem", "lots", "--", "true"],
                 ["-t", "soon", "--", "true"], ["--"], ["--gpu-ids", "9", "--", "true"],
                 ["--dependency", "afterok:999", "--", "true"], ["--dependency", "before:1", "--", "true"]):  # fmt: skip
        out = daemon.berth("submit", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1
    assert daemon.call("queue", all=True)["jobs"] == []


def test_requests_that_could_never_run_are_refused_at_submit(daemon):
    daemon.start()  # 4 GPUs of 80 GiB
    for args, needle in (
        (["-g", "9"], "this machine has 4 GPU(s)"),
        (["--mem", "100G"], "no GPU here has that much memory"),
        (["-g", "2", "--gpu-name", "H100"], "0 GPU(s) matching"),
    ):
        out = daemon.berth("submit", *args, "--", "true")
        assert out.returncode == 2, (args, out.stderr)
        assert needle in out.stderr, out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
    assert daemon.berth("submit", "-g", "4", "--mem", "80G", "--", "true").returncode == 0


def test_socket_is_private(daemon):
    daemon.start()
    assert stat.S_IMODE(os.stat(daemon.socket).st_mode) == 0o600


def test_status_section_shows_the_job_holding_each_gpu(daemon):
    from berth import config
    from berth.cli.status_queue import status_section

    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[1])
    daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[1])
    wait_until(lambda: daemon.job(job_id)["state"] == "RUNNING", message="running")
    section = status_section([], config.get())
    assert section is not None
    assert f"berth job {job_id}" in section.notes[1][0]
    assert "1 running, 1 waiting" in section.lines[0]


def test_background_daemon_start_and_stop(daemon):
    daemon.fake.setup(n=2, memory="80G")
    out = daemon.berth("daemon")
    assert out.returncode == 0, out.stderr
    assert "started" in out.stdout
    assert daemon.call("ping")["ok"]
    stop = daemon.berth("daemon", "--stop")
    assert stop.returncode == 0
    wait_until(lambda: not os.path.exists(daemon.socket), message="socket removed")


def test_a_command_that_cannot_start_fails_with_the_reason(daemon):
    daemon.start()
    missing = daemon.submit("no-such-program-xyz")
    row = daemon.wait_done([missing])[missing]
    assert row["state"] == "FAILED" and row["exit_code"] == 127
    job = daemon.job(missing)
    assert "command not found: 'no-such-program-xyz'" in job["attempts"][0]["reason"]
    gone = os.path.join(daemon.fake.root, "gone")
    os.mkdir(gone)
    job_id = daemon.call("submit", job={"argv": ["true"], "env": {}, "cwd": gone})["job_id"]
    os.rmdir(gone)  # may race the start; either way the job must not be lost
    row = daemon.wait_done([job_id])[job_id]
    assert row["state"] in ("COMPLETED", "FAILED")


def test_pty_job_has_a_terminal_and_attach_relays_it(daemon):
    import socket
    import struct

    daemon.start()
    script = "test -t 0 && test -t 1 && echo tty-ok; read line; stty size; echo got:$line"
    job_id = daemon.submit(wrap=script, pty=True)
    job = wait_until(lambda: (j := daemon.job(job_id))["attach"] and j, message="attachable")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    wait_until(lambda: conn.connect_ex(job["attach"]) == 0, message="pty socket")
    conn.sendall(struct.pack("HH", 33, 111) + b"hello\r")
    seen = b""
    conn.settimeout(10)
    while b"got:hello" not in seen:
        chunk = conn.recv(4096)
        if not chunk:
            break
        seen += chunk
    conn.close()
    row = daemon.wait_done([job_id])[job_id]
    assert row["state"] == "COMPLETED"
    log = daemon.berth("logs", str(job_id)).stdout
    assert "tty-ok" in log and "got:hello" in log and "33 111" in log
    out = daemon.berth("attach", str(daemon.submit("true")))
    assert out.returncode == 1 and "--pty" in out.stderr


def test_berth_status_shows_queue_jobs_per_gpu(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[2], name="trainer")
    wait_until(lambda: daemon.job(job_id)["state"] == "RUNNING", message="running")
    out = daemon.berth("status")
    assert out.returncode == 0, out.stderr
    assert f"berth job {job_id} (trainer)" in out.stdout
    assert "1 running, 0 waiting" in out.stdout
    data = json.loads(daemon.berth("status", "--json").stdout)
    assert data["queue"]["gpus"]["2"]["jobs"][0]["id"] == job_id


def test_exit_with_stops_the_daemon_when_that_process_ends(daemon):
    import subprocess

    holder = subprocess.Popen(["sleep", "60"])
    try:
        daemon.start("--exit-with", str(holder.pid))
        assert daemon.call("ping")["pid"] == daemon.proc.pid
    finally:
        holder.kill()
        holder.wait()
    assert daemon.proc.wait(timeout=15) == 0
    bad = daemon.berth("daemon", "--foreground", "--exit-with", "999999999")
    assert bad.returncode == 2 and "--exit-with 999999999" in bad.stderr


def test_logs_lines_gives_the_tail(daemon):
    daemon.start()
    job = daemon.submit("sh", "-c", "for i in 1 2 3 4 5; do echo line $i; done")
    daemon.wait_done([job])
    assert daemon.berth("logs", "-n", "2", str(job)).stdout == "line 4\nline 5\n"
    assert daemon.berth("logs", "-n", "0", str(job)).stdout == ""
    assert daemon.berth("logs", "-n", "9", str(job)).stdout.count("line") == 5
    follow = daemon.berth("logs", "-f", "-n", "1", str(job))
    assert follow.returncode == 0 and follow.stdout == "line 5\n"
    bad = daemon.berth("logs", "-n", "-3", str(job))
    assert bad.returncode == 2 and "-n/--lines -3" in bad.stderr


def test_last_lines_reads_only_the_tail(tmp_path):
    from berth.cli.logs import last_lines

    for content in (b"", b"a", b"a\n", b"a\nb", b"\n\n", b"x" * 70000 + b"\ny\nz\n"):
        path = tmp_path / "log"
        path.write_bytes(content)
        for n in (0, 1, 2, 5):
            want = b"".join(content.splitlines(keepends=True)[-n:]) if n else b""
            assert content[last_lines(str(path), n) :] == want, (content[:20], n)


def test_pause_help_does_not_offer_resume_all_and_ranges_pause_gpus(daemon, capsys):
    from berth.cli.main import main

    assert main(["help", "pause"]) == 0
    pause_help = capsys.readouterr().out
    assert "\n  --all" not in pause_help  # --all is resume's (issue 10.8)
    assert main(["help", "resume"]) == 0
    assert "\n  --all " in capsys.readouterr().out
    daemon.start()
    out = daemon.berth("pause", "1-2")
    assert out.returncode == 0 and out.stdout == "paused GPUs: 1, 2\n", out.stderr
    assert daemon.berth("pause", "--all").returncode == 2
    out = daemon.berth("resume", "1,2")
    assert out.returncode == 0 and out.stdout == "paused GPUs: none\n", out.stderr


def test_logs_of_a_job_that_never_ran_say_why(daemon):
    """Issue 27.11: `berth logs` of a job cancelled while pending printed nothing, rc 0 (and
    `-f` rc 1, silently): it says the job's state and that there is no output."""
    daemon.start()
    job = daemon.submit("true", hold=True)
    daemon.call("cancel", job_ids=[job])
    out = daemon.berth("logs", str(job))
    assert out.stdout == "" and f"job {job} ended CANCELLED" in out.stderr
    assert "wrote no output" in out.stderr
    followed = daemon.berth("logs", "-f", str(job))
    assert followed.returncode == 1 and f"job {job} ended CANCELLED" in followed.stderr
