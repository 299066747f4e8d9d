"""When outside use makes a GPU unavailable (issue 27, point 5; the GPU Job Scheduler's
--mem-threshold / --load-threshold): by default any process outside berth does; with
[scheduling] outside_max_memory / outside_max_util, light outside use leaves the GPU to
berth's jobs, and the pending reason names the rule when it does not."""

from __future__ import annotations

from helpers import wait_until


def _config(daemon, text: str) -> None:  # type: ignore[no-untyped-def]
    path = daemon.fake.root / "config.toml"
    path.write_text(text)
    daemon.env["BERTH_CONFIG"] = str(path)


def test_light_outside_use_leaves_the_gpu_to_berth(daemon):
    _config(daemon, "[scheduling]\noutside_max_memory = 0.25\noutside_max_util = 30\n")
    daemon.fake.setup(n=1, memory="80G")
    daemon.fake.spawn_workload(visible="0", mem="8G", util=20)  # 10% of memory, 20% busy
    daemon.start("--poll-interval", "0.2")
    job = daemon.submit("true")
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"


def test_heavy_outside_use_and_the_default_keep_it_busy_saying_why(daemon):
    _config(daemon, "[scheduling]\noutside_max_memory = 0.05\noutside_max_util = 30\n")
    daemon.fake.setup(n=1, memory="80G")
    outside = daemon.fake.spawn_workload(visible="0", mem="8G", util=20)
    daemon.start("--poll-interval", "0.2")
    job = daemon.submit("true")

    def reason() -> str:
        return str(daemon.job(job).get("reason") or "")

    wait_until(lambda: "outside_max_memory" in reason(), timeout=20, message="the rule named")
    assert "10% of its memory > 5%" in reason() and daemon.job(job)["state"] == "PENDING"
    outside.kill()
    outside.wait()
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"


def test_by_default_any_outside_process_keeps_the_gpu_busy(daemon):
    daemon.fake.setup(n=1, memory="80G")
    outside = daemon.fake.spawn_workload(visible="0", mem="1G", util=1)
    daemon.start("--poll-interval", "0.2")
    job = daemon.submit("true")
    wait_until(lambda: "outside berth" in str(daemon.job(job).get("reason") or ""), timeout=20,
               message="pending on outside use")  # fmt: skip
    outside.kill()
    outside.wait()
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"
