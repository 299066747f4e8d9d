"""contrib/systemd (docs/admin.md): the unit runs the system daemon so that jobs survive its
restarts, and the tmpfiles line makes /run/berth as the claims and the socket need it."""

from __future__ import annotations

import configparser
import os
import shlex
from pathlib import Path

from berth.cli import daemon as daemon_cli
from berth.cli.main import _parser
from berth.wire.paths import SYSTEM_SOCKET, SYSTEM_STATE_DIR

CONTRIB = Path(__file__).resolve().parents[2] / "contrib" / "systemd"


def test_the_unit_starts_the_system_daemon_and_leaves_jobs_alone() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(CONTRIB / "berth.service")
    service = unit["Service"]
    assert service["KillMode"] == "process"  # a stop or restart must not kill the jobs
    for sandbox in ("PrivateTmp", "ProtectHome", "ProtectSystem", "NoNewPrivileges",
                    "RuntimeDirectory", "User", "DynamicUser"):  # fmt: skip
        assert sandbox not in service, sandbox
    argv = shlex.split(service["ExecStart"])
    assert argv[1] == "daemon"
    args = _parser("daemon", daemon_cli).parse_args(argv[2:])
    assert args.system and args.foreground


def test_tmpfiles_makes_the_shared_run_dir_and_the_state_dir() -> None:
    lines = [
        line.split()
        for line in (CONTRIB / "berth-tmpfiles.conf").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ["d", "/run/berth", "1777", "root", "root", "-"] in lines
    assert ["d", "/var/lib/berth", "0711", "root", "root", "-"] in lines
    assert os.path.dirname(SYSTEM_SOCKET) == "/run/berth" and SYSTEM_STATE_DIR == "/var/lib/berth"
