"""When outside use makes a GPU unavailable (issue 27, point 5; the GPU Job Scheduler's
--mem-threshold / --load-threshold): by default any process outside berth does; with
[scheduling] outside_max_memory / outside_max_util, light outside use leaves the GPU to
berth's jobs, and the pending reason names the rule when it does not."""

from __future__ import annotations

import pytest
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


STRICT = "[scheduling]\noutside_max_memory = 0.05\noutside_max_util = 30\n"
LIGHT = "[scheduling]\noutside_max_memory = 0.25\noutside_max_util = 30\n"


def _select(daemon, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    out = daemon.berth("select", "--explain", *args)
    return out.returncode, out.stdout + out.stderr


@pytest.mark.parametrize("rule", ["", STRICT], ids=["default", "strict"])
def test_select_and_the_daemon_judge_outside_use_alike(daemon, rule):
    """An outside process using 8 GB of an 80 GB GPU at 20% (issue 27, point 5): with the
    default rule `berth select --explain` and the daemon both keep off the GPU; with a stricter
    rule both say so in the same words, naming the rule, also where select's own filters let
    processes through (--max-procs 1)."""
    if rule:
        _config(daemon, rule)
    daemon.fake.setup(n=1, memory="80G")
    outside = daemon.fake.spawn_workload(visible="0", mem="8G", util=20)
    daemon.start("--poll-interval", "0.2")
    job = daemon.submit("true")

    def reason() -> str:
        return str(daemon.job(job).get("reason") or "")

    wait_until(lambda: "outside berth" in reason(), timeout=20, message="pending on outside use")
    said = reason().split("held by ", 1)[-1]  # the daemon's words for GPU 0
    rc, explained = _select(daemon)
    assert rc == 1 and "GPU 0:" in explained and "1 process" in explained  # both: not GPU 0
    rc, relaxed = _select(daemon, "--max-procs", "1")
    if rule:
        assert said == (
            "1 process outside berth (10% of its memory > 5%: "
            "[scheduling] outside_max_memory/outside_max_util)"
        )
        assert said in explained and said in relaxed and rc == 1
        ran = daemon.berth("run", "--max-procs", "1", "--timeout", "0", "--", "true")
        assert ran.returncode != 0 and said in ran.stderr, ran.stderr  # berth run: the same
    else:
        assert said == "1 process outside berth" and "outside_max" not in explained
    outside.kill()
    outside.wait()
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"


def test_light_outside_use_leaves_the_gpu_to_select_too(daemon):
    """Within the rule the daemon runs its job there, and select, with its filters letting a
    process through, qualifies the GPU: the rule does not keep it off."""
    _config(daemon, LIGHT)
    daemon.fake.setup(n=1, memory="80G")
    daemon.fake.spawn_workload(visible="0", mem="8G", util=20)
    daemon.start("--poll-interval", "0.2")
    job = daemon.submit("true")
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"
    rc, explained = _select(daemon, "--max-procs", "1")
    assert rc == 0 and "outside" not in explained, explained


def test_shares_go_beside_outside_use_with_its_memory_counted_whole_gpus_never(daemon):
    """docs/scheduling.md, "What counts as used": by default an outside process keeps
    whole-GPU jobs off its GPU ("a whole-GPU job never goes where outside processes run");
    shares may go beside it, its memory counting against what they declare (80G card, 8G
    outside: 75G does not fit, 70G does), with or without the admin's rule."""
    daemon.fake.setup(n=1, memory="80G")
    outside = daemon.fake.spawn_workload(visible="0", mem="8G", util=1)
    daemon.start("--poll-interval", "0.2")
    whole = daemon.submit("true")
    too_big = daemon.submit("true", gpus=0.5, mem=75 * 2**30)
    fits = daemon.submit("true", gpus=0.5, mem=70 * 2**30)
    assert daemon.wait_done([fits], timeout=20)[fits]["state"] == "COMPLETED"

    def reason(job: int) -> str:
        return str(daemon.job(job).get("reason") or "")

    said = "GPU 0 held by 1 process outside berth, 72.0G free"  # (why: its memory)
    wait_until(lambda: reason(too_big).endswith(said), timeout=20,
               message="the share that does not fit beside the outside 8G waits")  # fmt: skip
    wait_until(lambda: "outside berth" in reason(whole), timeout=20,
               message="the whole-GPU job waits for the outside process")  # fmt: skip
    assert {daemon.job(j)["state"] for j in (whole, too_big)} == {"PENDING"}
    outside.kill()
    outside.wait()
    done = daemon.wait_done([whole, too_big], timeout=20)
    assert {r["state"] for r in done.values()} == {"COMPLETED"}
