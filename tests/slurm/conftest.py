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
from slurmkit import BackendRig, Cli, daemon_rig, start_cluster
from slurmrig import SlurmRig


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


@pytest.fixture
def berth(fake_gpus: Any, slurm: SlurmRig) -> Cli:
    """The berth CLI against the test Slurm (``BERTH_BACKEND=slurm``)."""
    return Cli(fake_gpus, slurm)


@pytest.fixture(params=["local", "slurm"])
def backend(request: pytest.FixtureRequest, fake_gpus: Any) -> Iterator[BackendRig]:
    """Each backend in turn: the local daemon (4 fake GPUs) and the test Slurm (4 GPUs)."""
    if request.param == "local":
        from berth.backends.local import Local

        rig = daemon_rig()(fake_gpus)
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
