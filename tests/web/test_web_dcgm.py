"""/metrics gives what the stock DCGM Grafana dashboard queries, from NVML through the fake
library: clocks, energy, memory temperature, PCIe and NVLink, encoder/decoder, the last XID;
a reading the GPU does not give is left out; a lost GPU keeps its UUID; per-holder memory
counts a shared GPU once."""

from __future__ import annotations

import json
import os
from typing import Any

from helpers import wait_until
from pagekit import card_text, js, open_page
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


def test_a_gpu_lost_before_the_web_first_reads_it_keeps_its_uuid_on_page_and_metrics(
    web: Any, browser: Any
) -> None:
    """Issue 40.3: the page and /metrics remembered a GPU's UUID only once they were first
    asked; lost before that, it was ``UNKNOWN-1``, "unknown GPU". The dashboard reads the
    UUIDs when it starts (the daemon's first read)."""
    start(web, 2)
    uuid1 = web.daemon.fake.uuids[1]
    web.daemon.fake.inject(1, "*", "GPU_IS_LOST")
    wait_until(  # (the daemon sees it lost before anyone asked the web side anything)
        lambda: web.daemon.call("status")["gpus"]["1"]["uuid"].startswith("UNKNOWN-"),
        timeout=10,
        message="the daemon to see GPU 1 lost",
    )
    s = metrics(web)
    assert one(s, "berth_gpu_healthy", gpu="1", UUID=uuid1) == 0
    assert not [lab for _, lab, _ in s if "UNKNOWN" in lab.get("UUID", "")]
    assert {lab["modelName"] for n, lab, _ in s if n == "DCGM_FI_DEV_FB_USED"} == {
        "NVIDIA A100-SXM4-80GB"
    }
    gpu = web.json("/api/state")["gpus"][1]
    assert (gpu["healthy"], gpu["uuid"], gpu["name"]) == (False, uuid1, "NVIDIA A100-SXM4-80GB")
    open_page(browser, web.url)
    card = card_text(browser, 1)
    assert "NVIDIA A100-SXM4-80GB" in card and "unknown GPU" not in card, card
    title = js(browser, "return document.querySelector(`.gpu[data-gpu='1'] .name`).title")
    assert title == uuid1


def test_per_user_utilisation_counts_a_shared_gpu_once_and_array_tasks_are_9_1(
    web: Any,
) -> None:
    """Issue 40.3: the Grafana per-user panel summed ``DCGM_FI_DEV_GPU_UTIL`` by
    ``hpc_user``: two ``-g 0.5`` tasks of one user on a GPU at 80 % made 160 %. The panel
    sums ``berth_gpu_holder_utilization`` (the GPU's utilisation split by share) instead;
    ``hpc_job`` names an array's task as the CLI does (9_1), never its internal id."""
    start(web, 1)
    gate = os.path.join(str(web.daemon.fake.root), "go")
    wrap = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    out = web.daemon.berth("submit", "--parsable", "--array", "1-2", "-g", "0.5", "--wrap", wrap)
    assert out.returncode == 0, out.stderr
    array = int(out.stdout.split(";")[0])
    rows = web.daemon.call("queue")["jobs"]
    tasks = {f"{r['array_job']}_{r['array_task']}": r["id"] for r in rows}
    assert set(tasks) == {f"{array}_1", f"{array}_2"}
    wait_until(lambda: all(web.daemon.job(j)["state"] == "RUNNING" for j in tasks.values()),
               timeout=10, message="both tasks share the GPU")  # fmt: skip
    web.daemon.fake.update(0, util=80)

    def both() -> list[Any] | None:
        s = metrics(web)
        util = [v for n, _, v in s if n == "berth_gpu_holder_utilization"]
        return s if len(util) == 2 and sum(util) == 80 else None

    s = wait_until(both, timeout=10, message="both tasks' utilisation")
    per_job = {lab["hpc_job"]: v for n, lab, v in s if n == "berth_gpu_holder_utilization"}
    assert per_job == {f"{array}_1": 40, f"{array}_2": 40}
    dcgm = {lab["hpc_job"]: v for n, lab, v in s if n == "DCGM_FI_DEV_GPU_UTIL"}
    assert dcgm == {f"{array}_1": 80, f"{array}_2": 80}  # (the DCGM series: the whole GPU's)
    assert {lab["hpc_job"] for n, lab, _ in s if n == "berth_gpu_holder"} == set(tasks)
    assert not [lab for _, lab, _ in s if lab.get("hpc_job") in {str(i) for i in tasks.values()}]
    # The dashboard's per-user panel, evaluated over this scrape as Prometheus would.
    panel = _panel("GPU utilisation per user")
    assert panel == 'sum by (hpc_user) (berth_gpu_holder_utilization{instance=~"$instance"})'
    by_user: dict[str, float] = {}
    for n, lab, v in s:
        if n == "berth_gpu_holder_utilization":
            by_user[lab["hpc_user"]] = by_user.get(lab["hpc_user"], 0) + v
    assert by_user == {"root": 80}  # (was 160)
    open(gate, "w").close()
    web.daemon.wait_done(list(tasks.values()))


def _panel(title: str) -> str:
    """The query of the berth Grafana dashboard's panel whose title starts with ``title``."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "contrib", "grafana",
                        "berth-dashboard.json")  # fmt: skip
    with open(path) as f:
        board = json.load(f)
    (panel,) = [p for p in board["panels"] if p.get("title", "").startswith(title)]
    (target,) = panel["targets"]
    return str(target["expr"])
