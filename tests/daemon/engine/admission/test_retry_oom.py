"""--retry-oom (issue 33.3), as gpusched: a job that ended FAILED and whose log says CUDA out
of memory is queued once more as a new job with more (a share -> a whole GPU), visible in
`berth queue` and `berth show` (a retry of job N, and why); never without --retry-oom, never
twice, never for a log that is not the job's own file; dry runs say what would happen."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until

from berth.daemon.engine.admission.oom_retry import _died_of_oom

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
       "79.15 GiB total capacity)")  # fmt: skip


def _dies_of_oom(daemon: Any) -> str:
    """A shell line: use the GPU a moment, then fail as PyTorch does when memory runs out."""
    work = " ".join(daemon.workload("--mem", "2G", "--seconds", "0.3"))
    return f"{work}; echo '{OOM}' >&2; exit 1"


def _submit(daemon: Any, *args: str) -> int:
    out = daemon.berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def _rows(daemon: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = daemon.call("queue", all=True)["jobs"]
    return rows


def test_a_job_that_died_of_cuda_oom_is_retried_once_with_a_whole_gpu(daemon):
    daemon.start("--poll-interval", "0.2")
    job = _submit(daemon, "-g", "0.5", "--retry-oom", "--wrap", _dies_of_oom(daemon))
    assert daemon.wait_done([job])[job]["state"] == "FAILED"
    retry = wait_until(
        lambda: next((r for r in _rows(daemon) if r.get("retry_of") == job), None),
        timeout=15, message="the retry is queued",
    )  # fmt: skip
    shown = daemon.job(retry["id"])  # (`show` answers as soon as `queue` lists it)
    assert shown["request"]["gpus"] == 1  # (it had half a GPU: now a whole one)
    assert shown["retry_of"] == job and "CUDA out of memory" in shown["retry_why"]
    assert f"retry of job {job}: CUDA out of memory" in shown["history"][0]["detail"]
    text = daemon.berth("show", str(retry["id"])).stdout
    assert f"retry of job {job}: CUDA out of memory" in text
    queue = daemon.berth("queue", "--all").stdout
    assert f"retry of {job} (CUDA OOM)" in queue
    wait_until(lambda: daemon.job(job)["oom_retried"] == retry["id"], timeout=15,
               message="the first says it was retried (once its save is committed)")  # fmt: skip
    assert f"retried as job {retry['id']}" in daemon.berth("show", str(job)).stdout
    # The retry dies the same way: it is not retried again (decided as its end commits).
    assert daemon.wait_done([retry["id"]])[retry["id"]]["state"] == "FAILED"
    assert [r["id"] for r in _rows(daemon)] == [job, retry["id"]]


def test_without_retry_oom_or_without_oom_nothing_is_queued_again(daemon):
    daemon.start("--poll-interval", "0.2")
    plain = _submit(daemon, "-g", "0.5", "--wrap", _dies_of_oom(daemon))
    other = _submit(daemon, "-g", "0.5", "--retry-oom", "--wrap", "echo 'ValueError'; exit 3")
    ended = daemon.wait_done([plain, other])
    assert ended[plain]["state"] == ended[other]["state"] == "FAILED"
    wait_until(lambda: f"job {other} failed, and the end of its log does not say CUDA out "
               "of memory: not retried" in open(daemon.log).read(), timeout=15,
               message="its log was read")  # fmt: skip
    # (plain's end asked for nothing: decided as its end committed, before `queue` answers)
    assert sorted(r["id"] for r in _rows(daemon)) == [plain, other]


def test_whole_gpus_of_the_largest_memory_have_nothing_more_to_get(daemon):
    daemon.start("--poll-interval", "0.2")
    job = _submit(daemon, "-g", "1", "--retry-oom", "--wrap", _dies_of_oom(daemon))
    assert daemon.wait_done([job])[job]["state"] == "FAILED"
    wait_until(lambda: "nothing more to give" in open(daemon.log).read(), timeout=15,
               message="the daemon's log says why it is not retried")  # fmt: skip
    assert [r["id"] for r in _rows(daemon)] == [job]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("-g", "0.5"), "queued once more, with whole GPUs"),
        (("--mem", "8G"), "queued once more, with whole GPUs"),
        (("-g", "1", "--mem", "8G"),
         "queued once more, on the GPUs of the most memory here (if it has more)"),
        (("-g", "1"), "not queued again: it has whole GPUs, nothing more to give"),
    ],
)
def test_the_dry_run_says_what_retry_oom_would_do(daemon, args, words):
    daemon.start()
    out = daemon.berth("submit", "--dry-run", *args, "--retry-oom", "--", "true")
    assert out.returncode == 0, out.stderr
    assert f"if it dies of CUDA out of memory: {words} (--retry-oom)" in out.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--array", "0-3", "--retry-oom"), "--retry-oom is for one job, not an --array"),
        (("-g", "0", "--retry-oom"), "job field 'retry_oom'"),
    ],
)
def test_retry_oom_where_it_cannot_apply_is_refused(daemon, args, words):
    daemon.start()
    out = daemon.berth("submit", *args, "--", "true")
    assert out.returncode != 0 and words in out.stderr
    assert _rows(daemon) == []


def test_only_the_jobs_own_regular_log_is_read(tmp_path):
    """What the log says is the user's input, read by root: never through a symbolic link,
    never another user's file, never a FIFO (which would block), only the file's end."""
    mine = tmp_path / "mine.out"
    mine.write_text("x" * (200 << 10) + OOM + "\n")
    me = os.getuid()
    assert _died_of_oom([str(mine)], me) == "torch.OutOfMemoryError"  # (its first sign)
    assert _died_of_oom([str(mine)], me + 1) is None  # (not the job's user's file)
    link = tmp_path / "link.out"
    link.symlink_to(mine)
    assert _died_of_oom([str(link)], me) is None
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    assert _died_of_oom([str(fifo)], me) is None
    assert _died_of_oom(["/dev/null", str(tmp_path / "gone.out"), str(mine)], me) is not None
    early = tmp_path / "early.out"  # (said long before the end: not how this job ended)
    early.write_text(OOM + "\n" + "y" * (200 << 10))
    assert _died_of_oom([str(early)], me) is None
    for words in ("CUDA_ERROR_OUT_OF_MEMORY", "RESOURCE_EXHAUSTED: OOM when allocating"):
        mine.write_text(f"... {words} ...\n")
        assert _died_of_oom([str(mine)], me) is not None


def test_the_jobs_that_depend_on_it_follow_its_retry_even_across_a_restart(daemon):
    """afterok/afternotok on a job --retry-oom retries read the retry's end, as a requeued
    Slurm job's dependents do: before, `afterok` was cancelled (DependencyNeverSatisfied) and
    `afternotok` ran as soon as the first attempt failed."""
    daemon.start("--poll-interval", "0.2")
    mark, gate = daemon.fake.root / "oom-once", daemon.fake.root / "gate"
    line = (f"if [ -e {mark} ]; then while [ ! -e {gate} ]; do sleep 0.05; done; exit 0; fi; "
            f"touch {mark}; {_dies_of_oom(daemon)}")  # fmt: skip
    job = _submit(daemon, "-g", "0.5", "--retry-oom", "--wrap", line)
    ok = _submit(daemon, "-g", "0.5", "--dependency", f"afterok:{job}", "--wrap", "true")
    notok = _submit(daemon, "-g", "0.5", "--dependency", f"afternotok:{job}", "--wrap", "true")
    assert daemon.wait_done([job])[job]["state"] == "FAILED"
    retry = wait_until(lambda: daemon.job(job)["oom_retried"], timeout=15,
                       message="the retry is queued, and the first says so durably")  # fmt: skip
    wait_until(lambda: f"retried as job {retry}" in (daemon.job(ok)["reason"] or ""),
               message="the dependent waits on the retry")  # fmt: skip
    daemon.kill9()  # the retry runs on; the daemon that starts reads who retried whom
    daemon.start("--poll-interval", "0.2")
    gate.touch()
    ended = daemon.wait_done([retry, ok, notok])
    assert ended[retry]["state"] == "COMPLETED"
    assert ended[ok]["state"] == "COMPLETED"
    assert ended[notok]["state"] == "CANCELLED"
    assert f"afternotok:{job} (retried as job {retry}): job {retry} COMPLETED" in str(
        daemon.job(notok)["history"]
    )
