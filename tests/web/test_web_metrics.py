"""/metrics: valid Prometheus text, DCGM names with the holder as labels, and berth's queue
figures: the wait and dispatch-gap histograms and the outcomes follow what really happened."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

from helpers import wait_until

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample, after checking the text is well formed (each family declared)."""
    typed: dict[str, str] = {}
    out = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            typed[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = _LINE.match(line)
        assert m, f"malformed line: {line!r}"
        name = m.group(1)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or family in typed, f"{name} has no TYPE"
        labels = dict(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((name, labels, float(m.group(3))))
    return out


def one(samples: list[Any], name: str, **labels: str) -> float:
    found = [
        v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items())
    ]
    assert len(found) == 1, (name, labels, found)
    return float(found[0])


def metrics(web: Any) -> list[tuple[str, dict[str, str], float]]:
    status, headers, body = web.get("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(body.decode())


def gate(web: Any, name: str) -> tuple[str, str]:
    path = os.path.join(str(web.daemon.fake.root), name)
    return f"while [ ! -e {path} ]; do sleep 0.02; done", path


def test_histograms_and_outcomes_follow_the_jobs(web: Any) -> None:
    web.start(gpus=1)
    wrap_a, gate_a = gate(web, "a.go")
    a = web.daemon.submit(wrap=wrap_a, name="first")
    wait_until(lambda: web.daemon.job(a)["state"] == "RUNNING", timeout=10, message="a runs")
    b = web.daemon.submit(wrap="exit 3", name="second")  # waits for the only GPU
    s = metrics(web)
    assert one(s, "berth_queue_jobs", state="RUNNING") == 1
    assert one(s, "berth_queue_jobs", state="PENDING") == 1
    assert one(s, "berth_job_wait_seconds_count") == 1
    assert one(s, "DCGM_FI_DEV_GPU_UTIL", gpu="0", hpc_job=str(a), hpc_user="root") == 0
    assert one(s, "berth_gpu_holder", gpu="0", hpc_job=str(a), kind="job") == 1
    open(gate_a, "w").close()  # a ends; b starts on the GPU it freed, then fails
    web.daemon.wait_done([a, b])

    def settled() -> list[Any] | None:
        s = metrics(web)
        return s if one(s, "berth_jobs_finished_total", outcome="FAILED") == 1 else None

    s = wait_until(settled, timeout=10, message="both outcomes counted")
    assert one(s, "berth_jobs_finished_total", outcome="COMPLETED") == 1
    assert one(s, "berth_job_wait_seconds_count") == 2
    assert one(s, "berth_dispatch_gap_seconds_count") == 1  # b was waiting when a freed it
    gap = one(s, "berth_dispatch_gap_seconds_sum")
    job_a, job_b = web.daemon.job(a), web.daemon.job(b)
    expected = job_b["attempts"][0]["start"] - job_a["attempts"][0]["end"]
    assert abs(gap - expected) < 1e-3 and 0 <= gap < 2
    buckets = [(lab["le"], v) for n, lab, v in s if n == "berth_dispatch_gap_seconds_bucket"]
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert buckets[-1] == ("+Inf", 1)
    # A job submitted after the GPU was freed did not wait for it: no gap counted.
    c = web.daemon.submit(wrap="true", name="third")
    web.daemon.wait_done([c])
    s = wait_until(lambda: (m := metrics(web)) and one(m, "berth_job_wait_seconds_count") == 3 and m,
                   timeout=10, message="the third start seen")  # fmt: skip
    assert one(s, "berth_dispatch_gap_seconds_count") == 1


def test_dcgm_readings_and_a_daemonless_claim_as_holder(web: Any) -> None:
    web.start(gpus=2)
    web.daemon.fake.update(1, power_mw=250000, temp=61)  # (the workload brings util and memory)
    holder = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "--only", "1", "--",
         *web.daemon.workload("--seconds", "60", "--util", "42", "--mem", "10G")],
        env=web.daemon.env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(str(web.daemon.fake.root), "run.err"), "w"),
        start_new_session=True,
    )  # fmt: skip
    try:

        def claimed() -> list[Any] | None:
            s = metrics(web)
            held = [
                lab for n, lab, _ in s if n == "berth_gpu_holder" and lab.get("kind") == "claim"
            ]
            util = [v for n, lab, v in s if n == "DCGM_FI_DEV_GPU_UTIL" and lab["gpu"] == "1"]
            return s if held and util and util[0] >= 42 else None  # (and the reading polled)

        err = os.path.join(str(web.daemon.fake.root), "run.err")
        s = wait_until(claimed, timeout=15, message=f"the claim seen ({open(err).read()!r})")
        labels = next(lab for n, lab, _ in s if n == "berth_gpu_holder" and lab["kind"] == "claim")
        assert labels["gpu"] == "1" and labels["hpc_user"] == "root"
        assert labels["hpc_job"].startswith("claim-")
        util = [(lab, v) for n, lab, v in s if n == "DCGM_FI_DEV_GPU_UTIL" and lab["gpu"] == "1"]
        assert len(util) == 1 and util[0][0]["hpc_job"] == labels["hpc_job"] and util[0][1] >= 42
        assert one(s, "DCGM_FI_DEV_POWER_USAGE", gpu="1") == 250
        assert one(s, "DCGM_FI_DEV_GPU_TEMP", gpu="1") == 61
        used = [v for n, lab, v in s if n == "DCGM_FI_DEV_FB_USED" and lab["gpu"] == "1"]
        assert used == [10240]  # MiB, as DCGM
        assert one(s, "DCGM_FI_DEV_FB_USED", gpu="0") == 0  # free GPU: no holder labels
        free = [lab for n, lab, _ in s if n == "DCGM_FI_DEV_FB_USED" and lab["gpu"] == "0"]
        assert "hpc_job" not in free[0] and free[0]["modelName"] == "NVIDIA A100-SXM4-80GB"
        assert one(s, "berth_user_gpus_held", user="root") == 1
        secs = "berth_user_gpu_seconds_total"
        wait_until(lambda: [v for n, lab, v in metrics(web) if n == secs and v > 0],
                   timeout=10, message="GPU time counted")  # fmt: skip
    finally:
        os.killpg(holder.pid, 9)
        holder.wait()


def test_two_shares_one_process_holds_are_one_series() -> None:
    """Two shares of one GPU held by one process gave two identical series (issue 20.16),
    which Prometheus rejects: holders of the same labels are one series, shares summed."""
    from types import SimpleNamespace

    from berth.web.metrics import render
    from berth.web.observe import Histogram

    claim = {"kind": "claim", "pid": 4242, "user": "alice", "share": 0.25}
    gpu = {
        "index": 0, "uuid": "GPU-0", "name": "A100", "util": 50, "mem_util": 1,
        "memory_used": 1 << 30, "memory_total": 80 << 30, "power": 100, "temp": 40,
        "paused": False, "healthy": True,
        "holders": [claim, {**claim, "share": 0.5}, {"kind": "job", "id": 7, "user": "bob"}],
    }  # fmt: skip
    observer = SimpleNamespace(
        queue_counts=dict, wait=Histogram([1.0]), gap=Histogram([1.0]), finished={},
        started_at=0.0,
    )  # fmt: skip
    text = render([gpu], observer, SimpleNamespace(gpu_seconds={}), {})  # type: ignore[arg-type]
    samples = parse(text)
    series = [(n, tuple(sorted(lab.items()))) for n, lab, _ in samples]
    assert len(series) == len(set(series)), "a series given twice"
    assert one(samples, "berth_gpu_holder", hpc_job="claim-4242") == 0.75
    assert one(samples, "berth_gpu_holder", hpc_job="7") == 1.0
    assert len([1 for n, _, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"]) == 2


def test_enforcement_shows_in_metrics_and_the_pages_state(web: Any) -> None:
    """Issue 25: an intruding process and an idle holder as /metrics and /api/state show them
    (the page's ``enforce`` field: findings, idle, policy, actions)."""
    web.start(gpus=2)
    job = web.daemon.submit(*web.daemon.workload("--mem", "1G", "--util", "0"), gpu_ids=[0])
    wait_until(lambda: web.daemon.job(job)["state"] == "RUNNING", message="the job runs")
    intruder = web.daemon.fake.spawn_workload(visible="0", mem="2G")

    def listed() -> list[tuple[str, dict[str, str], float]] | None:
        samples = metrics(web)
        return samples if any(n == "berth_enforce_process_bytes" for n, _, _ in samples) else None

    samples = wait_until(listed, timeout=10, message="the intruder in /metrics")
    labels = {"class": "intrusion", "pid": str(intruder.pid), "victim": f"job {job}"}
    assert one(samples, "berth_enforce_process_bytes", gpu="0", **labels) == 2 * (1 << 30)
    state = web.json("/api/state")
    found = state["enforce"]["findings"]
    assert [(f["class"], f["pid"], f["gpu"]) for f in found] == [("intrusion", intruder.pid, 0)]
    assert state["enforce"]["policy"]["intrusion"] == "observe"


def test_projects_usage_and_quotas_in_metrics_and_the_page_state(web: Any) -> None:
    path = web.daemon.fake.root / "config.toml"
    path.write_text("[projects.vision]\nmax_gpus = 1\nmax_queued = 10\nshares = 2\n[projects.nlp]\n")
    web.daemon.env["BERTH_CONFIG"] = str(path)
    web.start(gpus=2)
    a = web.daemon.submit("sleep", "60", project="vision")
    b = web.daemon.submit("sleep", "60", project="vision")
    wait_until(lambda: web.daemon.job(a)["state"] == "RUNNING", timeout=15)
    assert web.daemon.job(b)["reason"].startswith("ProjectGpuLimit")

    def seen() -> list[Any] | None:
        samples = metrics(web)  # (made at most once a second: wait for one made since)
        held = [v for n, lab, v in samples
                if n == "berth_project_gpus_held" and lab.get("project") == "vision"]  # fmt: skip
        return samples if held == [1.0] else None

    samples = wait_until(seen, timeout=10, message="vision's GPU in /metrics")
    assert one(samples, "berth_project_jobs", project="vision", state="PENDING") == 1
    assert one(samples, "berth_project_jobs", project="nlp", state="RUNNING") == 0
    assert one(samples, "berth_project_max_gpus", project="vision") == 1
    assert one(samples, "berth_project_max_queued", project="vision") == 10
    assert one(samples, "berth_project_shares", project="vision") == 2
    assert not [v for n, lab, v in samples if n == "berth_project_max_gpus" and
                lab.get("project") == "nlp"]  # (no limit: no sample)  # fmt: skip
    usage = one(samples, "berth_project_usage_gpu_hours", project="vision")
    assert 0 < usage < 0.1  # (the running job's seconds so far)
    rows = {p["project"]: p for p in web.json("/api/state")["projects"]}
    assert (rows["vision"]["gpus"], rows["vision"]["pending"], rows["vision"]["max_gpus"]) == (
        1.0, 1, 1.0)  # fmt: skip
    assert rows["nlp"]["running"] == 0


def test_a_finished_job_saved_again_is_not_counted_again() -> None:
    """A job saved once more after it finished (a note after its end) added its start to the
    wait histogram again: 3 waits for 2 jobs, seen once in the suite."""
    from types import SimpleNamespace

    from berth.core.job import Attempt, Job
    from berth.core.states import State
    from berth.web.observe import Observer

    front = SimpleNamespace(view=lambda kind: [], follow=lambda fn: None)
    observer = Observer(front)  # type: ignore[arg-type]
    job = Job(1, 100.0)
    observer.committed([job], [], True)
    job.attempts = [Attempt(1, 110.0, gpus=(0,))]
    job.state = State.RUNNING
    observer.committed([], [job], True)
    job.attempts = [Attempt(1, 110.0, gpus=(0,), end=120.0, outcome=State.FAILED)]
    job.state = State.FAILED
    observer.committed([], [job], True)
    for _ in range(2):  # (saved again after its end)
        observer.committed([], [job], True)
    assert (observer.wait.count, observer.finished) == (1, {"FAILED": 1})


def test_starts_that_meet_a_limit_of_the_system_show_in_metrics() -> None:
    """``berth_starts_exhausted`` is 1 while starts wait for descriptors, memory or processes
    (berth/daemon/engine/exhausted.py), else 0."""
    from types import SimpleNamespace

    from berth.web.metrics import render
    from berth.web.observe import Histogram

    observer = SimpleNamespace(
        queue_counts=dict, wait=Histogram([1.0]), gap=Histogram([1.0]), finished={},
        started_at=0.0,
    )  # fmt: skip
    for now in (True, False):
        text = render(
            [], observer, SimpleNamespace(gpu_seconds={}), {}, starts_exhausted=now,  # type: ignore[arg-type]
        )
        assert one(parse(text), "berth_starts_exhausted") == (1 if now else 0)
