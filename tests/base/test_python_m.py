"""``python -m berth`` is the ``berth`` command (issue 27, point 11)."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_berth_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "berth", "--version"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("berth ")
    bad = subprocess.run([sys.executable, "-m", "berth", "nosuch"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "unknown command 'nosuch'" in bad.stderr
