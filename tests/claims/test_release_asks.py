"""`berth release` asks before it ends anything, and only when it can (issue 40.5): with no
terminal to ask on and no answer piped in, it says to add -y and exits with the usage code
(before: "nothing done", exit 1, and no word of -y); an answer piped in still counts."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from test_multiuser import _claim, _claims


def _release(*args: str, stdin: Any = subprocess.DEVNULL, input: str | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "release", *args],
        stdin=None if input is not None else stdin, input=input,
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_release_without_y_and_no_terminal_says_y_and_exits_2(shared: Any) -> None:
    _claims_dir, run = shared
    run.start("berth-test-a", lambda: _claim("0"), hold=True)
    run.start("berth-test-a", lambda: _claim("2"), hold=True)
    r = _release("0", "2")  # stdin: /dev/null (cron, a script, ssh without -t)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "no terminal" in r.stderr and "berth release 0 2 -y" in r.stderr, r.stderr
    assert _claims() == [(0, "berth-test-a"), (2, "berth-test-a")]  # nothing ended
    # an answer piped in is an answer
    no = _release("0", "2", input="n\n")
    assert no.returncode == 1 and "nothing done" in no.stdout, no.stderr
    assert _claims() == [(0, "berth-test-a"), (2, "berth-test-a")]
    yes = _release("0", "2", "--grace", "5", input="y\n")
    assert yes.returncode == 0 and "ended 2 claim(s)" in yes.stdout, yes.stderr
    assert _claims() == []
