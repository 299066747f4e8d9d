"""`berth.acquire` in a PyTorch program on a real GPU."""

from __future__ import annotations

from typing import Any

from gpukit import need_torch, real_gpu


def test_acquire_gives_torch_exactly_the_claimed_gpu(gpu: Any) -> None:
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=1, wait="stdin",
                           acquire={"gpus": 1, "label": "gpu-test", "timeout": 60})  # fmt: skip
        started.append(p)
        ready = p.next_event("ready", timeout=120)
        status = gpu.status_json()
        assert p.finish() == 0
    lease = ready["lease"]
    assert ready["env"] == {
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, lease["ids"])),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    assert ready["device_count"] == 1
    assert ready["device_uuid"] == lease["uuids"][0]
    mine = [c for c in status["claims"]["claims"] if ready["pid"] in c["pids"]]
    assert [c["label"] for c in mine] == ["gpu-test"]
    assert real_gpu.proc_entry(status, ready["pid"]) is not None
    assert gpu.status_json()["claims"]["claims"] == []  # released with the process


def test_acquire_after_torch_initialised_cuda(gpu: Any) -> None:
    need_torch(gpu)
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=0, wait="stdin", torch_first=True,
                           acquire={"gpus": 1, "timeout": 5})  # fmt: skip
        started.append(p)
        ready = p.next_event("ready", timeout=120)
        assert p.finish() == 0
        err = p.proc.stderr.read() if p.proc.stderr else ""
    assert ready["lease"]["devices"] == ["cuda:0"]
    assert ready["current_device"] == 0
    assert "warn" in err.lower(), err
