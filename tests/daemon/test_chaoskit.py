"""The chaos test's own tools (chaoskit.py): what it kills must be what it means to kill."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from typing import Any

from chaoskit import ours, supervisors
from helpers import wait_until


def test_a_job_its_supervisor_is_starting_is_not_taken_for_an_idle_supervisor(tmp_path: Any):
    """A job between its spawn and its exec bears its supervisor's name (``berth-sup``): the
    chaos took one for an idle supervisor once and killed it, and its job, killed by SIGKILL,
    was reported as a product fault (seed 134). Here a ``berth-sup`` with a child of that
    name: only the parent is a supervisor."""
    named = tmp_path / "berth-sup"
    named.symlink_to(shutil.which("bash") or "/bin/bash")
    marker = f"CHAOSKIT_MARK={tmp_path}"
    proc = subprocess.Popen(
        [str(named), "-c", f"{named} -c 'sleep 60; :' & wait"],
        env={**os.environ, "CHAOSKIT_MARK": str(tmp_path)}, start_new_session=True,
    )  # fmt: skip
    try:

        def both() -> dict[int, str] | None:
            procs = ours(marker)
            return procs if list(procs.values()).count("berth-sup") == 2 else None

        found = wait_until(both, timeout=10, message="a berth-sup and its child berth-sup")
        assert supervisors(found) == [proc.pid]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
