"""A job id on the command line is ASCII digits (``12``, or ``12_3`` for an array's task):
str.isdigit() alone takes "²" (then int() fails with a traceback) and "٣" (which int() reads
as 3: the wrong job)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", ["show", "cancel", "wait", "logs"])
@pytest.mark.parametrize("text", ["²", "1²", "٣", "12_٣", "-1"])
def test_a_job_id_that_is_not_ascii_digits_is_refused_by_name(
    command: str, text: str, tmp_path: object
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", command, text],
        env={"PATH": "/usr/bin:/bin", "BERTH_SOCKET": f"{tmp_path}/none.sock", "BERTH_CONFIG": ""},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"invalid job id {text!r}: expected 12 or 12_3" in out.stderr
    assert "Traceback" not in out.stderr
