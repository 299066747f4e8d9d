"""/metrics gives what the stock DCGM Grafana dashboard queries, from NVML through the fake
library: clocks, energy, memory temperature, PCIe and NVLink, encoder/decoder, the last XID;
a reading the GPU does not give is left out; a lost GPU keeps its UUID; per-holder memory
counts a shared GPU once."""

from __future__ import annotations

import os
from typing import Any

from helpers import wait_until
from test_web_metrics import metrics, one

TELEMETRY = {
    "sm_clock": 1410,
    "mem_clock": 1593,
    "energy_mj": 123456789,
    "memory_temp": 47,
    "pcie_tx_bytes": 1200 << 10,
    "pcie_rx_bytes": 3400 << 10,
    "pcie_replay": 2,
    "enc_util": 5,
    "dec_util": 6,
    "nvlink_tx_kib": 1000,
    "nvlink_rx_kib": 24,
    "xid": [],
}


def start(web: Any, gpus: int, bare: tuple[int, ...] = (), **fields: Any) -> Any:
    """The web rig started over GPUs that have ``fields``, but for those in ``bare`` (XIDs
    must be supported before the daemon first reads a GPU: it registers for its events then)."""
    fake = web.daemon.fake
    setup = fake.setup

    def with_fields(**kw: Any) -> Any:
        setup(**kw, **fields)
        for i in bare:
            fake.update(i, **{key: None for key in fields})
        return fake

    fake.setup = with_fields
    return web.start(gpus=gpus)


def test_dcgm_exporter_defaults_from_nvml_and_unsupported_left_out(web: Any) -> None:
    start(web, 2, bare=(1,), **TELEMETRY)  # GPU 1 gives none of them
    web.daemon.fake.update(0, util=37)
    s = wait_until(lambda: (m := metrics(web)) and one(m, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == 37
                   and m, timeout=10, message="the readings polled")  # fmt: skip
    uuid0 = web.daemon.fake.uuids[0]
    expected = {
        "DCGM_FI_DEV_SM_CLOCK": 1410,
        "DCGM_FI_DEV_MEM_CLOCK": 1593,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 123456789,
        "DCGM_FI_DEV_MEMORY_TEMP": 47,
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": 1200,
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": 3400,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 2,
        "DCGM_FI_DEV_ENC_UTIL": 5,
        "DCGM_FI_DEV_DEC_UTIL": 6,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 1024,
        "DCGM_FI_DEV_XID_ERRORS": 0,  # none yet
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.37,
    }
    for name, value in expected.items():
        assert one(s, name, gpu="0", UUID=uuid0, modelName="NVIDIA A100-SXM4-80GB") == value, name
        if name != "DCGM_FI_PROF_GR_ENGINE_ACTIVE":  # (GPU 1 still has a utilisation)
            assert not [lab for n, lab, _ in s if n == name and lab["gpu"] == "1"], name
    body = web.get("/metrics")[2].decode()
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in body
    assert "# TYPE DCGM_FI_DEV_SM_CLOCK gauge" in body
    # XIDs raised after the daemon started watching: the last one is the reading.
    web.daemon.fake.update(0, xid=[13, 79])
    wait_until(lambda: one(metrics(web), "DCGM_FI_DEV_XID_ERRORS", gpu="0") == 79,
               timeout=10, message="the XID seen")  # fmt: skip
    web.daemon.fake.update(0, energy_mj=123999999)
    wait_until(lambda: one(metrics(web), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0")
               == 123999999, timeout=10, message="energy counted on")  # fmt: skip


def test_a_lost_gpu_keeps_its_uuid(web: Any) -> None:
    start(web, 2)
    uuid1 = web.daemon.fake.uuids[1]
    s = metrics(web)
    assert one(s, "berth_gpu_healthy", gpu="1") == 1
    web.daemon.fake.inject(1, "*", "GPU_IS_LOST")

    def lost() -> list[Any] | None:
        s = metrics(web)
        return s if one(s, "berth_gpu_healthy", gpu="1") == 0 else None

    s = wait_until(lost, timeout=10, message="the GPU seen lost")
    assert one(s, "berth_gpu_healthy", gpu="1", UUID=uuid1) == 0  # not UNKNOWN-1
    assert not [lab for _, lab, _ in s if "UNKNOWN" in lab.get("UUID", "")]
    assert not [lab for n, lab, _ in s if n == "DCGM_FI_DEV_GPU_TEMP" and lab["gpu"] == "1"]


def test_holder_memory_counts_a_shared_gpu_once(web: Any) -> None:
    start(web, 1)
    gate = os.path.join(str(web.daemon.fake.root), "go")
    wrap = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    a = web.daemon.submit(wrap=wrap, name="a", gpus=0.5)
    b = web.daemon.submit(wrap=wrap, name="b", gpus=0.25)
    wait_until(lambda: all(web.daemon.job(j)["state"] == "RUNNING" for j in (a, b)),
               timeout=10, message="both share the GPU")  # fmt: skip
    web.daemon.fake.update(0, memory_used=3 << 30)

    def split() -> list[Any] | None:
        s = metrics(web)
        held = [(lab["hpc_job"], v) for n, lab, v in s
                if n == "berth_gpu_holder_memory_used_bytes"]  # fmt: skip
        return s if len(held) == 2 and sum(v for _, v in held) > 0 else None

    s = wait_until(split, timeout=10, message="both holders' memory")
    per_job = {lab["hpc_job"]: v for n, lab, v in s if n == "berth_gpu_holder_memory_used_bytes"}
    assert per_job == {str(a): 2 << 30, str(b): 1 << 30}  # by share: 0.5 and 0.25 of 0.75
    fb = [v for n, lab, v in s if n == "DCGM_FI_DEV_FB_USED"]
    assert fb == [3072, 3072]  # (as DCGM: each holder's series carries the whole GPU)
    open(gate, "w").close()
    web.daemon.wait_done([a, b])
