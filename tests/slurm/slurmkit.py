"""Helpers of the Slurm tests (importable by name, unlike a conftest): starting a test
cluster for a fixture, the local daemon's rig, :class:`BackendRig`, and :class:`Cli` (the
berth command as a user types it, against the test Slurm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from slurmrig import SlurmRig, missing_binaries

from berth.wire.jobspec import JobSpec


def start_cluster(accounting: bool = False, nodes: int = 1) -> Iterator[SlurmRig]:
    """A test cluster of ``nodes`` nodes for the length of a fixture; skipped when Slurm (or,
    for accounting, slurmdbd and MariaDB) is not installed, but failed in CI, which installs
    them."""
    missing = missing_binaries(accounting, nodes)
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
    rig = SlurmRig(accounting=accounting, nodes=nodes)
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

    def job(self, *argv: str, **fields: Any) -> JobSpec:
        job: dict[str, Any] = {"env": dict(self.env), "cwd": self.cwd, "gpus": 1, **fields}
        if "wrap" not in fields:
            job["argv"] = list(argv)
        return JobSpec.from_dict(job)

    def sh(self, script: str, **fields: Any) -> JobSpec:
        """A job running ``sh -c script`` (the test's own shell text)."""
        return self.job("sh", "-c", script, **fields)


class Cli:
    def __init__(self, fake_gpus: Any, slurm: Any) -> None:
        self.root = str(fake_gpus.root)
        self.env = {**fake_gpus.env, **slurm.env, "BERTH_BACKEND": "slurm"}

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            env={**self.env, **env},
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def submit(self, *args: str) -> str:
        """`berth submit --parsable ARGS`: the job's id (the submit must succeed)."""
        out = self("submit", "--parsable", *args)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def state(self, job_id: str) -> str:
        """The job's state as `berth queue --all --json` gives it ("" if not listed)."""
        rows = json.loads(self("queue", "--all", "--json").stdout)
        return next((r["state"] for r in rows if r["id"] == job_id), "")

    def slurm(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A Slurm command (squeue...) against the test cluster."""
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=True
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", *args],
            env=self.env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def local_argv(argv: list[str], inject_arg: str | None, gpus: list[int]) -> list[str]:
    """The command the local queue runs for ``argv`` on GPUs ``gpus`` (machine indices, in the
    job's CUDA order): berth.daemon.engine.starts's calls of berth.wire.inject, which
    tests/daemon/engine/test_inject_requirements.py checks on the local daemon."""
    from berth.wire import inject

    out = [inject.fill(w, gpus) for w in argv]
    if inject_arg:
        flag, form = inject.parse(inject_arg)
        out = inject.rewrite(out, flag, inject.ids(gpus, form))
    return out
