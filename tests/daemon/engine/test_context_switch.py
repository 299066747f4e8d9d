"""mgpu_srun's context switch by default (issue 27, point 2): the daemon says what a time limit
does to a job that did not (end it, or requeue it at the end of the queue, at most N times),
and a -t above the daemon's limit is then switched at that limit, not refused."""

from __future__ import annotations


def _outcomes(daemon, job_id: int) -> list[str]:  # type: ignore[no-untyped-def]
    return [a["outcome"] for a in daemon.job(job_id)["attempts"]]


def test_the_daemon_requeues_at_its_limit_then_ends(daemon):
    daemon.start("--max-job-time", "0.4", "--kill-after", "0.2", "--on-time-limit", "requeue",
                 "--max-requeues", "1")  # fmt: skip
    plain = daemon.submit(*daemon.workload("--seconds", "60"))
    longer = daemon.berth("submit", "--parsable", "-t", "2h", "--", *daemon.workload(
        "--seconds", "60"))  # fmt: skip
    assert longer.returncode == 0, longer.stderr  # above --max-job-time: accepted, switched
    opted_out = daemon.berth("submit", "--parsable", "--no-requeue", "--", *daemon.workload(
        "--seconds", "60"))  # fmt: skip
    ids = [plain, int(longer.stdout), int(opted_out.stdout)]
    done = daemon.wait_done(ids, timeout=30)
    assert [done[i]["state"] for i in ids] == ["TIMEOUT", "TIMEOUT", "TIMEOUT"]
    assert _outcomes(daemon, plain) == ["PREEMPTED", "TIMEOUT"]
    assert _outcomes(daemon, ids[1]) == ["PREEMPTED", "TIMEOUT"]
    assert _outcomes(daemon, ids[2]) == ["TIMEOUT"]


def test_the_default_still_ends_and_refuses_a_longer_t(daemon):
    daemon.start("--max-job-time", "1h")
    out = daemon.berth("submit", "-t", "2h", "--", "true")
    assert out.returncode == 2 and "more than this daemon allows" in out.stderr
    asked = daemon.berth("submit", "--parsable", "--hold", "--requeue", "-t", "2h", "--", "true")
    assert asked.returncode == 0, asked.stderr  # its own --requeue: switched at 1h
    job = daemon.job(int(asked.stdout))
    assert job["requeue"] is True and job["max_requeues"] is None


def test_max_requeues_of_its_own(daemon):
    daemon.start("--kill-after", "0.2")
    out = daemon.berth("submit", "--parsable", "--time-limit", "0.4", "--max-requeues", "2", "--",
                       *daemon.workload("--seconds", "60"))  # fmt: skip
    job_id = int(out.stdout)
    assert daemon.wait_done([job_id], timeout=30)[job_id]["state"] == "TIMEOUT"
    assert _outcomes(daemon, job_id) == ["PREEMPTED", "PREEMPTED", "TIMEOUT"]
    bad = daemon.berth("submit", "--no-requeue", "--max-requeues", "1", "--", "true")
    assert bad.returncode == 2 and "give one of them" in bad.stderr


def test_show_says_what_the_limit_does(daemon):
    daemon.start("--on-time-limit", "requeue", "--max-requeues", "3")
    held = daemon.submit("true", hold=True)
    shown = daemon.berth("show", str(held)).stdout
    assert "then requeued at the end of the queue (3 of 3 times left)" in shown
    assert "  request:    1 GPU\n" in shown
    half = daemon.berth("submit", "--parsable", "--hold", "-g", "0.5", "--no-requeue", "--",
                        "true")  # fmt: skip
    shown = daemon.berth("show", half.stdout.strip()).stdout
    assert "  request:    0.5 of a GPU" in shown and "requeued" not in shown
