"""berth against a real NVIDIA driver (issue 26): these tests run only where one answers.

On a machine without one every test here is skipped at collection with the reason ("no NVIDIA
driver: ...") in pytest's summary (``-ra``): never silently passed. ``bash bench/real_gpu.sh``
runs them on a GPU machine after bench/real_gpu.py.

``BERTH_GPU_REHEARSAL=fake`` runs them against tests/fakenvml instead (one H100-like fake
GPU; the fake workload stands in for the PyTorch program; what needs torch or nvidia-smi is
skipped as not available): a rehearsal, so the real run does not trip on a typo.

Everything that touches the driver runs in a child process with a clean environment: the
session fixture of tests/conftest.py preloads the fake library into pytest's own process when
other areas run in the same session, and it is overridden here (no C compiler needed on the
GPU machine). The rig is bench/real_gpu.py's (loaded by path): ``gpu`` gives a fresh
:class:`Rig` (a work directory under /tmp, a claims directory of its own, the GPU program)
whose ``start_prog`` starts a PyTorch program (real) or its stand-in (rehearsal).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gpukit import HERE, REHEARSAL, no_driver, real_gpu

_why: list[str | None] = []  # computed once, when a test of this directory is collected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [it for it in items if HERE in Path(str(it.path)).parents]
    if not mine:
        return
    if not _why:
        _why.append(no_driver())
    if _why[0] is None:
        return
    skip = pytest.mark.skip(reason=_why[0])
    for item in mine:
        if item.get_closest_marker("rehearsal") is None:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rehearsal: bench/real_gpu.py without a GPU; not skipped for want of a driver"
    )


@pytest.fixture(scope="session", autouse=True)
def fakenvml_lib_dir() -> str:
    """Overrides tests/conftest.py's: nothing is built or preloaded for these tests."""
    return ""


@pytest.fixture
def gpu() -> Iterator[Any]:
    """A fresh rig (bench/real_gpu.py's ``Rig``); what it started is killed at teardown."""
    rig = real_gpu.new_rig(REHEARSAL)  # its environment leaves the fake out unless rehearsing
    try:
        yield rig
    finally:
        real_gpu.kill_marked(rig.mark)
        shutil.rmtree(rig.work, ignore_errors=True)
