"""The top-level help's Admin line lists every `berth admin` action (issue 40.6), and
`berth help admin` shows the first hour's commands."""

from __future__ import annotations

import argparse
import subprocess
import sys

from berth.cli import admin
from berth.cli.main import USAGE, _parser


def test_the_admin_line_lists_every_admin_command() -> None:
    parser = _parser("admin", admin)
    actions = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    block = USAGE[USAGE.index("Admin:") : USAGE.index("Plan:")]
    words = {w.strip(",") for w in block.split()}
    missing = sorted(set(actions.choices) - words)
    assert missing == [], f"the Admin line of `berth help` lacks {missing}"
    assert {"install", "doctor", "backup", "restore", "uninstall"} <= set(actions.choices)


def test_help_admin_starts_with_install_and_doctor() -> None:
    out = subprocess.run([sys.executable, "-m", "berth", "help", "admin"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0
    examples = out.stdout[out.stdout.index("Examples:") :].splitlines()[2:4]
    assert "berth admin install --enable" in examples[0] and "doctor" in out.stdout
