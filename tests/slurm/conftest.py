"""Fixtures of the Slurm tests (see slurmrig.py for the cluster itself).

``slurm_cluster`` (session): one real slurmctld + slurmd with 4 fake GPUs (8 shards), started
once (about 1 s) and always stopped at the end of the session, jobs first.
``slurm`` (function): that cluster, with ``SLURM_CONF`` set in ``os.environ`` for in-process
calls; every job a test leaves is cancelled (and waited for) after it.

When the Slurm programs are not installed the tests are skipped, except in CI (``CI=true``):
.ci/run installs them, so their absence there is a broken machine, not a reason to skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from slurmrig import SlurmRig, missing_binaries


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmRig]:
    missing = missing_binaries()
    if missing:
        why = (
            f"Slurm is not installed (missing {', '.join(missing)}): apt-get install "
            "--no-install-recommends slurmctld slurmd slurm-client"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run should have installed it")
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.fail("the test Slurm needs root (slurmd, mknod of its fake GPU devices)")
    rig = SlurmRig()
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()


@pytest.fixture
def slurm(slurm_cluster: SlurmRig, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmRig]:
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    try:
        yield slurm_cluster
    finally:
        slurm_cluster.clear()
