"""The daemon runs `berth admin doctor`'s checks at start and logs each (issue 39.2)."""

from __future__ import annotations

import os
from typing import Any


def test_the_daemon_logs_the_doctors_checks_at_start(daemon: Any) -> None:
    """issue 39.2: the daemon runs `berth admin doctor`'s checks at start and logs each."""
    os.makedirs(daemon.fake.claims_dir, exist_ok=True)
    os.chmod(daemon.fake.claims_dir, 0o755)  # (a claims dir of the wrong mode: said at start)
    daemon.start(gpus=2)
    with open(daemon.log) as f:
        said = f.read()
    assert "check ok    nvml: driver 550.54.15" in said, said
    assert f"WARNING check fail  claims dir: {daemon.fake.claims_dir} has mode 0755" in said
    assert "check " in said and " socket:" not in said  # (its own socket: not checked)
