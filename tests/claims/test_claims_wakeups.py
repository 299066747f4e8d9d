"""A claim that ends costs the waiters a look each only where it may change what they do.

Every claim's end and every waiter's departure wakes every waiter (inotify). Each used to
answer with a whole look (the GPUs read from NVML, every ledger file probed and read): with
W waiters, a release cost W looks, more with the departure of the waiter that took the GPU and
the next one's new reservation: 32 `berth run`s behind 4 GPUs made 480-700 looks (15-22 a
run) once the GPUs were let go. A waiter now applies the events to what it last saw
(berth/claims/since.py) and looks again only when it could claim or what it reserves would
change (74-200: the one that claims and the next in line, more where two GPUs free at once).

Looks are counted where they cannot be missed: each reads the GPUs through the fake NVML,
which writes every call to ``$FAKE_NVML_CALLS`` (a read asks a handle of each GPU).
``--poll 60``: no look comes from the poll, and a waiter left asleep beside a free GPU (a lost
wake-up) would leave that GPU idle for a minute, which the gaps below would show.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from helpers import wait_until

from berth.api.lease import build_request, claim
from berth.claims.ledger import Ledger

N = 32  # waiters behind 4 GPUs held by the test
LOOKS_PER_RUN = 10  # 2.3-6.3 measured (the one that claims, the next in line, races); 15-22 before


def _looks(calls: Path, pids: set[int]) -> Counter[int]:
    out: Counter[int] = Counter()
    for line in calls.read_text().splitlines():
        name, _, pid = line.partition(" ")
        if name == "nvmlDeviceGetHandleByIndex_v2" and int(pid) in pids:
            out[int(pid)] += 1
    return Counter({pid: n // 4 for pid, n in out.items()})  # (4 GPUs: a handle each)


def _intervals(record: Path) -> list[dict[str, Any]]:
    starts: dict[int, dict[str, Any]] = {}
    out = []
    for line in record.read_text().splitlines():
        ev = json.loads(line)
        if ev["event"] == "start":
            starts[ev["pid"]] = ev
        else:
            s = starts.pop(ev["pid"])
            out.append(
                {"job": s["job"], "gpu": s["gpus"][0], "start": s["time"], "end": ev["time"]}
            )
    assert not starts, f"workloads that never ended: {starts}"
    return out


def test_a_release_makes_a_look_for_the_waiter_it_serves_not_for_every_waiter(
    fake_gpus: Any, tmp_path: Path
) -> None:
    fake_gpus.setup(n=4)
    held = [claim(build_request(1, only=str(i)), timeout=0)[0] for i in range(4)]
    calls, record = tmp_path / "calls", tmp_path / "record.jsonl"
    calls.write_text("")
    procs = []
    for i in range(N):
        cmd = [sys.executable, "-m", "berth.cli.main", "run", "-g", "1", "--poll", "60", "--"]
        cmd += fake_gpus.workload_cmd("--seconds", "0.2", "--mem", "2G", "--record", str(record))
        env = {**fake_gpus.env, "BERTH_JOB_ID": f"j{i}", "FAKE_NVML_CALLS": str(calls)}
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))

    def registered() -> list[Any]:
        waiters = Ledger().scan().waiters
        return waiters if len(waiters) == N else []

    waiters = wait_until(registered, timeout=60, message=f"{N} waiters to register")
    pids = {p.pid for p in procs}
    assert {w.pid for w in waiters} == pids
    before = sum(_looks(calls, pids).values())
    for lease in held:
        lease.release()
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"berth run failed ({p.returncode}): {err}"

    looks = sum(_looks(calls, pids).values()) - before
    assert looks <= LOOKS_PER_RUN * N, f"{looks} looks for {N} runs (bound {LOOKS_PER_RUN * N})"

    runs = _intervals(record)
    assert len(runs) == N
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_gpu.setdefault(r["gpu"], []).append(r)
    assert len(by_gpu) == 4
    for gpu, rs in by_gpu.items():
        rs.sort(key=lambda r: r["start"])
        for a, b in itertools.pairwise(rs):
            assert a["end"] <= b["start"], f"two runs on {gpu} at once: {a} and {b}"
            # a waiter asleep beside this free GPU would have left it idle until its poll
            assert b["start"] - a["end"] < 20, f"{gpu} idle {b['start'] - a['end']:.1f} s"
    assert not [n for n in os.listdir(fake_gpus.claims_dir) if n.startswith("w.")]
