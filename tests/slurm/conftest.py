"""Fixtures of the Slurm tests (see slurmrig.py for the cluster itself).

``slurm_cluster`` (session): one real slurmctld + slurmd with 4 fake GPUs (8 shards), started
once (about 1 s) and always stopped at the end of the session, jobs first.
``slurm`` (function): that cluster, with ``SLURM_CONF`` set in ``os.environ`` for in-process
calls; every job a test leaves is cancelled (and waited for) after it.
``backend`` (function, two params): a :class:`BackendRig` for the local daemon (a real berth
daemon over 4 fake GPUs) and for the test Slurm: the conformance suite runs against both.

When the Slurm programs are not installed the tests are skipped, except in CI (``CI=true``):
.ci/run installs them, so their absence there is a broken machine, not a reason to skip.
"""

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


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmRig]:
    yield from start_cluster()


@pytest.fixture
def slurm(slurm_cluster: SlurmRig, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmRig]:
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    try:
        yield slurm_cluster
    finally:
        slurm_cluster.clear()


def _daemon_rig() -> Any:
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


@pytest.fixture(params=["local", "slurm"])
def backend(request: pytest.FixtureRequest, fake_gpus: Any) -> Iterator[BackendRig]:
    """Each backend in turn: the local daemon (4 fake GPUs) and the test Slurm (4 GPUs)."""
    if request.param == "local":
        from berth.backends.local import Local

        rig = _daemon_rig()(fake_gpus)
        try:
            rig.start()
            yield BackendRig(Local(rig.socket), rig.env, str(fake_gpus.root), "local")
        finally:
            rig.cleanup()
    else:
        from berth.backends.slurm import Slurm

        cluster = request.getfixturevalue("slurm")
        env = {**fake_gpus.env, **cluster.env}
        log_dir = os.path.join(str(fake_gpus.root), "slurm-logs")
        yield BackendRig(Slurm(log_dir=log_dir), env, str(fake_gpus.root), "slurm")
