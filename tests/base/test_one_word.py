"""One word, one thing (issue 38). ``release`` is the claims' (`berth release`: end the claims
on GPUs); letting a held job go is ``release_job`` everywhere on the wire, as the CLI's
`berth release-job` and MCP's ``release_job`` say it. Pausing GPUs is ``pause`` (and
``resume``): `berth admin drain` (``undrain``) is its other name in the CLI only. Read from the
protocol's table and the daemon's handler table; that the CLI's names work:
tests/daemon/engine/test_fair_users.py's drain test.

An attempt (one execution of a job) is called an attempt wherever a class holds one: the
job's record of it is ``core.job.Attempt``; the daemon's handles on it ``ports.LiveAttempt``;
its start's bookkeeping ``engine.starts.AttemptStart``; the supervisor's run of it
``supervisor.attempt.AttemptRun``. What is not an attempt keeps its own word: a pass's
decision (``core.decisions.Start``), a pool's supervisor waiting for one
(``procs.pool.Slot``), a finished run's length for learning run times
(``core.runtimes.Run``, outside the daemon)."""

from __future__ import annotations

import ast
from pathlib import Path

from berth.daemon.requests.server import HANDLERS
from berth.wire import protocol


def test_releasing_a_held_job_is_release_job_and_release_is_the_claims_word() -> None:
    assert "release_job" in protocol.REQUESTS and "release_job" in HANDLERS
    assert "release" not in protocol.REQUESTS and "release" not in HANDLERS
    assert set(protocol.REQUESTS["release_job"]) == {"job_ids", "at"}


def test_the_cli_names_both_apart() -> None:
    from berth.cli.main import COMMANDS

    assert COMMANDS["release"][0] == "berth.cli.release"  # the claims'
    assert "release-job" in COMMANDS  # a held job's


def test_drain_is_pause_by_another_name_in_the_cli_only() -> None:
    # one request each: `berth admin drain` sends `pause` with a note, `undrain` `resume`
    assert "drain" not in protocol.REQUESTS and "undrain" not in protocol.REQUESTS
    assert "drain" not in HANDLERS and "undrain" not in HANDLERS
    assert set(protocol.REQUESTS["pause"]) == {"gpus", "note"}
    assert set(protocol.REQUESTS["resume"]) == {"gpus", "all"}


ROOT = Path(__file__).resolve().parents[2] / "berth"
ATTEMPT = {
    "berth/core/job.py": "Attempt",
    "berth/daemon/ports.py": "LiveAttempt",
    "berth/daemon/engine/starts.py": "AttemptStart",
    "berth/daemon/supervisor/attempt.py": "AttemptRun",
}
OTHER_WORDS = ("Run", "Launch", "Running", "Execution")  # (for an attempt, once, in the daemon)


def _classes(*parts: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(ROOT.joinpath(*parts).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        out[str(path.relative_to(ROOT.parent))] = names
    return out


def test_the_daemon_calls_an_attempt_an_attempt() -> None:
    found = {**_classes("core"), **_classes("daemon")}
    for where, name in ATTEMPT.items():
        assert name in found[where], (where, name)
    others = {w: [n for n in names if n in OTHER_WORDS] for w, names in _classes("daemon").items()}
    assert {w: n for w, n in others.items() if n} == {}
