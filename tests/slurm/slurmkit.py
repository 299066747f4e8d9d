"""Helpers of the Slurm tests (importable by name, unlike a conftest): starting a test
cluster for a fixture, the local daemon's rig, and :class:`BackendRig`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from slurmrig import SlurmRig, missing_binaries


def start_cluster(accounting: bool = False) -> Iterator[SlurmRig]:
    """A test cluster for the length of a fixture; skipped when Slurm (or, for accounting,
    slurmdbd and MariaDB) is not installed, but failed in CI, which installs them."""
    missing = missing_binaries(accounting)
    if missing:
        pkgs = "slurmctld slurmd slurm-client" + (" slurmdbd mariadb-server" if accounting else "")
        why = (
            f"not installed: {', '.join(missing)} (apt-get install --no-install-recommends {pkgs})"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run should have installed it")
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.fail("the test Slurm needs root (slurmd, mknod of its fake GPU devices)")
    rig = SlurmRig(accounting=accounting)
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()


def daemon_rig() -> Any:
    """tests/daemon/conftest.py's DaemonRig (a real berth daemon over fake GPUs), loaded by
    path: a conftest is not importable by name."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "daemon", "conftest.py")
    spec = importlib.util.spec_from_file_location("berth_tests_daemon_rig", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DaemonRig


class BackendRig:
    """A backend under test and what a test needs to build jobs for it."""

    def __init__(self, backend: Any, env: dict[str, str], cwd: str, kind: str) -> None:
        self.backend = backend
        self.env = env
        self.cwd = cwd
        self.kind = kind

    def job(self, *argv: str, **fields: Any) -> dict[str, Any]:
        job: dict[str, Any] = {"env": dict(self.env), "cwd": self.cwd, "gpus": 1, **fields}
        if "wrap" not in fields:
            job["argv"] = list(argv)
        return job

    def sh(self, script: str, **fields: Any) -> dict[str, Any]:
        """A job running ``sh -c script`` (the test's own shell text)."""
        return self.job("sh", "-c", script, **fields)
