"""A supervisor that meets a limit of the system while starting its attempt (no descriptor
left for the job's log: EMFILE) does not run the command, and says ``exhausted`` with the
errno's name (not a failure: the daemon keeps the job waiting, berth/daemon/engine/exhausted.py).
The attempt runs in a forked child whose ``RLIMIT_NOFILE`` is its lowest free descriptor."""

from __future__ import annotations

import json
import os
import resource

from berth.daemon.supervisor import attempt, gate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def _lowest_free() -> int:
    fd = os.dup(0)  # (the lowest free descriptor is what dup gives)
    os.close(fd)
    return fd


def _run(tmp_path: Path, limit: bool) -> dict[str, object]:
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
    run_fd = os.open(tmp_path / "7.1", os.O_RDWR | os.O_CREAT, 0o600)
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            if limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (_lowest_free(), 4096))
            result = attempt.AttemptRun(msg, run_fd, (), None, r, wait).run()
            os.write(out_w, json.dumps(result).encode())
            code = 0
        finally:
            os._exit(code)
    for fd in (r, w, run_fd, wait, out_w):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(out_r, "rb") as f:
        data = f.read()
    assert os.waitstatus_to_exitcode(status) == 0, data
    return {**json.loads(data), "ran": marker.exists()}


def test_a_start_without_a_descriptor_for_its_log_never_runs_and_says_exhausted(
    tmp_path: Path,
) -> None:
    result = _run(tmp_path, limit=True)
    assert result["ran"] is False
    assert result["unstarted"] is True
    assert result["exhausted"] == "EMFILE"
    assert "cannot open log file" in str(result["nospace"])
    assert "Too many open files" in str(result["nospace"])
    assert result["nospace_path"] is None  # (no path of the state disk's to blame)
    assert b"go" not in (tmp_path / "7.1").read_bytes()  # (nothing ran: no go line)


def test_a_start_with_descriptors_runs(tmp_path: Path) -> None:  # (the control)
    result = _run(tmp_path, limit=False)
    assert result["rc"] == 0 and not result.get("exhausted")
    assert result["ran"] is True
