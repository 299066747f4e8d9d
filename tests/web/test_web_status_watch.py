"""`berth status --watch` in a real terminal (tmux): it redraws in place, like nvitop, follows
the GPUs as they change, and Ctrl-C ends it cleanly (exit 0, no traceback)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from typing import Any

import pytest
from helpers import wait_until


def test_watch_redraws_in_place_and_ctrl_c_exits(fake_gpus: Any) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for this test (apt-get install tmux)")
    fake_gpus.setup(n=2)
    session = f"berth-watch-{uuid.uuid4().hex[:8]}"
    env = " ".join(f"{k}='{v}'" for k, v in fake_gpus.vars.items())
    cmd = f"env {env} {sys.executable} -m berth.cli.main status --watch 0.1; echo EXIT=$?; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30", cmd],
                   check=True)  # fmt: skip

    def screen() -> str:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                             capture_output=True, text=True, check=False)  # fmt: skip
        return out.stdout

    try:
        wait_until(lambda: "Ctrl-C to stop" in screen(), timeout=20, message="the first frame")
        fake_gpus.update(1, util=77)
        wait_until(lambda: "77%" in screen(), timeout=20, message="the new reading")
        shown = screen()
        assert shown.count("Ctrl-C to stop") == 1 and shown.count("GPU  NAME") == 1  # in place
        assert shown.splitlines()[0].endswith("Ctrl-C to stop")  # drawn from the top
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        wait_until(lambda: "EXIT=0" in screen(), timeout=20, message="exit 0 after Ctrl-C")
        assert "Traceback" not in screen()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
