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


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def test_watch_fits_80x24_follows_a_resize_and_quits_on_q(fake_gpus: Any) -> None:
    """Issue 23.7: at 80x24 with more to show than fits, each frame fits the window (nothing
    scrolls into the scrollback), a resize redraws to the new size at once, `q` quits.
    Issue 40.2: there, 8 busy GPUs, the last one lost, are every one on screen, a line each
    (their processes folded into it); a taller window unfolds them."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for this test (apt-get install tmux)")
    fake_gpus.setup(n=8)
    for i in range(8):
        fake_gpus.spawn_workload(visible=str(i), mem="1G", util=10)
        fake_gpus.spawn_workload(visible=str(i), mem="1G", util=10)
    fake_gpus.inject(7, "*", "GPU_IS_LOST")
    session = f"berth-fit-{uuid.uuid4().hex[:8]}"
    env = " ".join(f"{k}='{v}'" for k, v in fake_gpus.vars.items())
    cmd = f"env {env} {sys.executable} -m berth.cli.main status --watch 0.2; echo EXIT=$?; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd],
                   check=True)  # fmt: skip
    target = f"{session}:0.0"

    def screen() -> list[str]:
        return _tmux("capture-pane", "-p", "-t", target).rstrip("\n").split("\n")

    def frames_seen() -> int:
        return int(_tmux("display", "-p", "-t", target, "#{history_size}").strip() or 0)

    def gpu_lines() -> dict[int, str]:
        return {int(ln[:3]): ln for ln in screen() if ln[:3].strip().isdigit()}

    try:
        wait_until(lambda: "GPU  NAME" in "\n".join(screen()), timeout=20, message="a frame")
        first = screen()[0]
        wait_until(lambda: screen()[0] != first, timeout=20, message="a refresh")  # (the clock)
        shown = screen()
        assert len(shown) <= 24 and all(len(line) <= 80 for line in shown)
        assert shown[0].endswith("q or Ctrl-C to stop") and frames_seen() == 0  # no scrollback
        lines = gpu_lines()
        assert sorted(lines) == list(range(8)), shown  # every GPU, the lost one too
        assert "UNHEALTHY: GPU is lost" in lines[7], shown
        assert all("busy: 2 procs (root)" in lines[i] for i in range(7)), shown  # folded in
        assert any("a window" in line and "shows each process" in line for line in shown)
        _tmux("resize-window", "-t", session, "-x", "120", "-y", "60")
        wait_until(lambda: sum("workload" in line for line in screen()) >= 14, timeout=20,
                   message="a redraw at the new size, unfolded")  # fmt: skip
        assert sorted(gpu_lines()) == list(range(8))
        assert frames_seen() == 0  # (refreshed at 60 rows: still nothing in the scrollback)
        _tmux("send-keys", "-t", target, "q")
        wait_until(lambda: "EXIT=0" in "\n".join(screen()), timeout=20, message="q quits")
        assert "Traceback" not in "\n".join(screen())
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
