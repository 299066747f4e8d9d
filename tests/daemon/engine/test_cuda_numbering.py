"""The GPUs a queued job sees are the ones it was given, in NVML's numbering, whatever the
shell it was submitted from said (docs/devices.md, "Device order": "Jobs that berth starts
always get CUDA_DEVICE_ORDER=PCI_BUS_ID"; docs/scheduling.md; ../shared/DESIGN.md invariant
4). A user of the system daemon submits from a shell that names another GPU and CUDA's
default order (`CUDA_VISIBLE_DEVICES=0`, `CUDA_DEVICE_ORDER=FASTEST_FIRST`, and berth's own
variables set by hand): the environment is captured with the job (`--export ALL`), and each
job must still see exactly its GPUs, two shares of one GPU the same one."""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_system_mode import System
from userkit import A, berth_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

SHOW = ('echo "cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER gpus=$BERTH_GPUS '
        'uuids=$BERTH_GPU_UUIDS"')  # fmt: skip
SHELL = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
         "BERTH_GPUS": "0", "BERTH_GPU_UUIDS": "GPU-bogus"}  # fmt: skip


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def test_a_job_sees_its_own_gpus_whatever_the_submitting_shell_said(system: System) -> None:
    system.start()
    uuids = system.rig.fake.uuids
    asks = {"whole": ("-g", "1", "--gpu-ids", "3"), "half1": ("-g", "0.5", "--gpu-ids", "2"),
            "half2": ("-g", "0.5", "--gpu-ids", "2"), "pair": ("-g", "2", "--gpu-ids", "0,1"),
            "cpu": ("-g", "0",)}  # fmt: skip
    ids = {}
    for name, how in asks.items():
        out = berth_as(A, "submit", "--parsable", *how, "-o", f"{system.shared}/{name}.out",
                       "--wrap", SHOW, env={**system.env, **SHELL})  # fmt: skip
        assert out.returncode == 0, out.stderr
        ids[name] = int(out.stdout.split()[0])
    done = system.rig.wait_done(list(ids.values()), timeout=30)
    assert {done[i]["state"] for i in ids.values()} == {"COMPLETED"}
    seen = {n: open(f"{system.shared}/{n}.out").read().strip() for n in asks}
    assert seen["whole"] == f"cvd=3 order=PCI_BUS_ID gpus=3 uuids={uuids[3]}"
    assert seen["half1"] == seen["half2"] == f"cvd=2 order=PCI_BUS_ID gpus=2 uuids={uuids[2]}"
    assert seen["pair"] == f"cvd=0,1 order=PCI_BUS_ID gpus=0,1 uuids={uuids[0]},{uuids[1]}"
    assert seen["cpu"] == "cvd=-1 order=PCI_BUS_ID gpus= uuids="
    # both halves were given GPU 2 (two shares of one GPU: the same one for both)
    spans = [system.rig.job(ids[n])["attempts"][0] for n in ("half1", "half2")]
    assert spans[0]["gpus"] == spans[1]["gpus"] == [2]
