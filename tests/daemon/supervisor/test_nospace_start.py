"""A supervisor that cannot write its start (the run file's ``go`` line, on a full disk) does
not run the command and says ``nospace``: the daemon keeps the job waiting (issue 41.7).
``/dev/full`` stands for the full disk: every write to it fails with ENOSPC."""

from __future__ import annotations

import os

from berth.daemon.supervisor import attempt, gate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def _run(tmp_path: Path, run_fd: int) -> dict[str, object]:
    marker = tmp_path / "ran"
    log = str(tmp_path / "out.log")
    msg = {
        "job": 7, "attempt": 1, "path": str(tmp_path / "7.1"),
        "spec": {
            "argv": ["sh", "-c", f"echo ran > {marker}"], "cwd": os.getcwd(),
            "env": {"PATH": os.defpath}, "stdout": log, "stderr": log,
        },
    }  # fmt: skip
    wait, opener = gate.make()
    gate.open_all([opener])  # the start is durable
    os.close(opener)
    r, w = os.pipe()
    umask = os.umask(0o022)
    try:
        result = attempt.AttemptRun(msg, run_fd, (), None, r, wait).run()
    finally:
        os.umask(umask)
        for fd in (r, w, run_fd):
            os.close(fd)
    return {**result, "ran": marker.exists()}


def test_a_start_whose_run_file_is_full_never_runs_and_says_nospace(tmp_path: Path) -> None:
    result = _run(tmp_path, os.open("/dev/full", os.O_WRONLY))
    assert result["ran"] is False
    assert result["unstarted"] is True
    assert "cannot write its run file" in str(result["nospace"])
    assert "No space left on device" in str(result["nospace"])
    assert result["nospace_path"] == str(tmp_path / "7.1")  # (the state disk's: all wait)


def test_a_start_whose_run_file_takes_go_runs(tmp_path: Path) -> None:  # (the control)
    result = _run(tmp_path, os.open(tmp_path / "7.1", os.O_RDWR | os.O_CREAT, 0o600))
    assert result["rc"] == 0 and not result.get("nospace")
    assert result["ran"] is True
    assert (tmp_path / "7.1").read_bytes().startswith(b"go\n")
