"""A process of berth's on a GPU berth did not give it is outside use there (docs/scheduling.md,
"What counts as used"; ../shared/DESIGN.md invariant 1: a GPU is never handed to two exclusive
holders). A job given GPU 0 that runs its work on GPU 1 anyway (it set
`CUDA_VISIBLE_DEVICES` itself; no `[daemon] isolate_devices`), or a `berth run` holder of GPU 0
whose command does: the daemon counted the process as its own on every GPU (it descends from
a job, or from a claim's holder), saw GPU 1 free, and gave it to another whole-GPU job beside
the stray one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from helpers import wait_until

from berth.claims.ledger import Ledger
from berth.devices import read_gpus

STRAY = "CUDA_VISIBLE_DEVICES=1 {py} {workload} --seconds 600 --mem 10G --util 50"


def _listed_on(index: int) -> list[int]:
    """The pids NVML lists on GPU ``index``."""
    return [p.pid for p in read_gpus(process_details=False)[index].processes or ()]


def _polled(daemon):  # type: ignore[no-untyped-def]
    """Wait for a poll of the daemon after now: an outside marker on GPU 0 (held by berth
    already) is seen. Every process listed before it is then in the daemon's view."""
    marker = daemon.fake.spawn_workload(visible="0", mem="1M")
    wait_until(lambda: (daemon.call("status")["gpus"]["0"].get("others") or {}).get("busy"),
               timeout=15, message="a poll lists the marker on GPU 0")  # fmt: skip
    return marker


def test_a_jobs_process_on_a_gpu_it_was_not_given_keeps_that_gpu_busy(daemon):
    daemon.start("--poll-interval", "0.2", gpus=2)
    workload = daemon.workload()[1]
    stray = daemon.submit(wrap=STRAY.format(py=sys.executable, workload=workload), gpu_ids=[0])
    wait_until(lambda: daemon.job(stray)["state"] == "RUNNING", timeout=15)
    wait_until(lambda: _listed_on(1), timeout=15, message="the stray process on GPU 1")
    _polled(daemon)
    other = daemon.submit("true", gpu_ids=[1])

    def reason() -> str:
        return str(daemon.job(other).get("reason") or "")

    wait_until(lambda: "outside berth" in reason(), timeout=15,
               message="GPU 1 busy with the stray process, not given to another job")  # fmt: skip
    assert daemon.job(other)["state"] == "PENDING"
    assert daemon.berth("cancel", str(stray)).returncode == 0
    assert daemon.wait_done([other], timeout=30)[other]["state"] == "COMPLETED"


HOLDER = """
import os, subprocess, sys
from berth.claims.ledger import Ledger
lease = Ledger().try_claim([sys.argv[1]], share=1.0, label="berth run")
assert lease is not None
work = subprocess.Popen([sys.executable, *sys.argv[2:]], env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"})
work.wait()
"""


def test_a_claim_holders_process_on_a_gpu_it_did_not_claim_keeps_that_gpu_busy(daemon):
    daemon.start("--poll-interval", "0.2", gpus=2)
    argv = [sys.executable, "-c", HOLDER, daemon.fake.uuids[0], *daemon.workload(
        "--seconds", "600", "--mem", "10G", "--util", "50")[1:]]  # fmt: skip
    holder = subprocess.Popen(argv, env=daemon.env, start_new_session=True)
    try:
        wait_until(lambda: _listed_on(1), timeout=15, message="the holder's child on GPU 1")
        wait_until(lambda: Ledger().scan().claims, timeout=15, message="GPU 0 claimed")
        _polled(daemon)
        other = daemon.submit("true", gpu_ids=[1])
        wait_until(lambda: "outside berth" in str(daemon.job(other).get("reason") or ""),
                   timeout=15, message="GPU 1 busy with the holder's stray process")  # fmt: skip
        assert daemon.job(other)["state"] == "PENDING"
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert daemon.wait_done([other], timeout=30)[other]["state"] == "COMPLETED"


def test_a_jobs_processes_are_its_own_on_its_gpus_only(fake_gpus):
    """The rule in the daemon's view of the GPUs (``Resources.others``): the job's leader and a
    child of it, each listed on the job's GPU 0 and on GPU 1: not outside use on GPU 0, outside
    use on GPU 1 (busy, its memory counted); a job without GPUs (`-g 0`): outside everywhere."""
    from berth import config
    from berth.daemon.engine.resources import Resources

    fake_gpus.setup(n=2)
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        child = wait_until(lambda: _children(leader.pid), timeout=5, message="the child")[0]
        listed = [{"pid": p, "used_memory": 2**30, "type": "compute"} for p in (leader.pid, child)]
        for k in (0, 1):
            fake_gpus.update(k, processes=listed)
        ledger = Ledger(fake_gpus.claims_dir)
        res = Resources(config.get(), ledger)
        res.poll()
        use = res.others(ledger.scan(), set(), lambda: {leader.pid: (0,)})
        assert 0 not in use  # the job's, on its GPU
        assert use[1].busy and use[1].mem == 2 * 2**30 and "2 process" in use[1].label
        cpu_only = res.others(ledger.scan(), set(), lambda: {leader.pid: ()})
        assert cpu_only[0].busy and cpu_only[1].busy
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []
