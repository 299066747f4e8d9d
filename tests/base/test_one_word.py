"""One word, one thing (issue 38). ``release`` is the claims' (`berth release`: end the claims
on GPUs); letting a held job go is ``release_job`` everywhere on the wire, as the CLI's
`berth release-job` and MCP's ``release_job`` say it. Pausing GPUs is ``pause`` (and
``resume``): `berth admin drain` (``undrain``) is its other name in the CLI only. Read from the
protocol's table and the daemon's handler table; that the CLI's names work:
tests/daemon/engine/test_fair_users.py's drain test."""

from __future__ import annotations

from berth.daemon.requests.handlers import HANDLERS
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
