"""CPU-only jobs on the local queue (issue 34.3): ``-g 0`` runs with no GPU and
``CUDA_VISIBLE_DEVICES=-1`` (CUDA sees none), while every GPU is taken, at most ``[limits]
cpu_slots`` at once (the rest wait: Resources), as a preprocessing step of an ``afterok``
chain; `berth queue` shows 0 GPUs; what is about GPUs is refused for it."""

from __future__ import annotations

import os
from typing import Any

from helpers import wait_until


def _state(daemon: Any, job: str) -> str:
    state: str = daemon.job(int(job))["state"]
    return state


def test_cpu_only_jobs_run_beside_full_gpus_within_their_slots(daemon: Any) -> None:
    config = os.path.join(daemon.fake.root, "berth.toml")
    with open(config, "w") as f:
        f.write("[limits]\ncpu_slots = 1\n")
    daemon.env["BERTH_CONFIG"] = config
    daemon.start()
    gate = os.path.join(daemon.fake.root, "gate")
    busy = daemon.berth("submit", "--parsable", "-g", "4", "--", "sleep", "60").stdout.strip()
    wait_until(lambda: _state(daemon, busy) == "RUNNING", timeout=20, message="GPUs taken")
    daemon.env["CUDA_VISIBLE_DEVICES"] = "0,1"  # (the submitting shell's: not the job's)
    first = daemon.berth("submit", "--parsable", "-g", "0", "--", "sh", "-c",
                         f'echo "cvd=$CUDA_VISIBLE_DEVICES gpus=[$BERTH_GPUS]"; '
                         f"while [ ! -e {gate} ]; do sleep 0.05; done")  # fmt: skip
    del daemon.env["CUDA_VISIBLE_DEVICES"]
    assert first.returncode == 0, first.stderr
    prep = first.stdout.strip()
    second = daemon.berth("submit", "--parsable", "-g", "0", "--", "echo", "second")
    chained = daemon.berth("submit", "--parsable", "-g", "0", "--dependency",
                           f"afterok:{prep}", "--", "echo", "trained")  # fmt: skip
    wait_until(lambda: _state(daemon, prep) == "RUNNING", timeout=20, message="it starts")
    other = second.stdout.strip()
    wait_until(lambda: daemon.job(int(other)).get("reason"), timeout=20, message="a reason")
    assert _state(daemon, other) == "PENDING"  # (one slot, and it is taken)
    assert "Resources" in daemon.job(int(other))["reason"]
    line = next(w for w in daemon.berth("queue").stdout.splitlines() if w.split()[:1] == [prep])
    assert line.split()[5] == "0", line
    open(gate, "w").close()
    done = daemon.wait_done([int(prep), int(other), int(chained.stdout)])
    assert all(r["state"] == "COMPLETED" for r in done.values()), done
    assert daemon.berth("logs", prep).stdout == "cvd=-1 gpus=[]\n"
    assert daemon.berth("logs", chained.stdout.strip()).stdout == "trained\n"
    assert _state(daemon, busy) == "RUNNING"
    daemon.berth("cancel", busy)


def test_what_is_about_gpus_is_refused_for_a_cpu_only_job(daemon: Any) -> None:
    daemon.start()
    for extra in (["--gpu-ids", "1"], ["--mem", "1G"], ["--inject-arg", "--cuda"],
                  ["--gpu-name", "A100"]):  # fmt: skip
        out = daemon.berth("submit", "-g", "0", *extra, "--", "true")
        assert out.returncode == 2, (extra, out.stderr)
        assert "this job asks for none ('gpus' 0: CPU only)" in out.stderr, out.stderr
    held = daemon.berth("submit", "--parsable", "--hold", "-g", "0", "--", "true").stdout
    more = daemon.berth("update", held.strip(), "-g", "1")
    assert more.returncode == 2 and "keeps GPUs or none as it was submitted" in more.stderr
    gpu = daemon.berth("submit", "--parsable", "--hold", "--", "true").stdout.strip()
    none = daemon.berth("update", gpu, "-g", "0")
    assert none.returncode == 2 and "keeps GPUs or none as it was submitted" in none.stderr
    assert daemon.job(int(gpu))["request"]["gpus"] == 1
