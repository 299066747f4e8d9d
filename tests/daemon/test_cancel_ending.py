"""A cancel of a job whose supervisor died, while what it left is being ended (SIGTERM, then
SIGKILL after --kill-after; the job shows RUNNING until it has gone, then LOST), answers that
it is being ended: it answered "starting"."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from helpers import alive, wait_until

from berth.daemon.supervisor.runfile import read_run_file


def test_a_cancel_while_a_dead_supervisors_job_is_ended_says_so(daemon: Any) -> None:
    daemon.start("--kill-after", "300", gpus=1)  # (the window: ended by the test below)
    job = daemon.submit("bash", "-c", "trap '' TERM; sleep 300 & wait; sleep 300", gpu_ids=[0])
    run = os.path.join(daemon.state_dir, "run", f"{job}.1")
    info = wait_until(lambda: (i := read_run_file(run)).get("job") and i, message="it runs")
    os.kill(int(info["sup"]), signal.SIGKILL)
    wait_until(lambda: f"job {job}: end" in Path(daemon.log).read_text(),
               message="its leftovers' ending logged")  # fmt: skip
    assert alive(int(info["job"]))  # (it ignores SIGTERM: its ending waits for SIGKILL)
    said = daemon.call("cancel", job_ids=[job])["cancelled"][str(job)]
    assert said.startswith("being ended"), said
    assert "supervisor died" in said, said
    r = daemon.berth("cancel", str(job))
    assert r.returncode == 0 and "being ended" in r.stdout + r.stderr, (r.stdout, r.stderr)
    os.killpg(int(info["job"]), signal.SIGKILL)  # (not waiting out --kill-after)
    row = daemon.wait_done([job])[job]
    assert row["state"] == "LOST", row
