"""What a pending job costs the daemon's memory (issue 35: <= 120 MB with 100,000 queued in
every shape the CLI submits). Counted, not timed: the bytes Python keeps for each more job
queued (tracemalloc, the growth from 1,000 more jobs to 2,000 more, so the bounded caches,
the journal's recent specs, cancel out), as single submits (each its own submit time) and as
one array's tasks. What stays a job: its ``Job``, its place in the job table and the
ranking; not its own empty attempts, its own ``submitted`` event and history (shared), its
own ``extra`` (shared with equal ones), a set of ids or a tuple an entry in the ranking, nor
its bytes kept twice (berth/core/job.py, berth/core/ranking.py, engine/jobtable.py)."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.core.job import Job
from berth.daemon.engine.admission import admit
from berth.daemon.engine.jobtable import JobTable

N = 1000
SINGLE_MOST = 760  # bytes a single submit's pending job (~660 now; ~1,110 at a071106)
TASK_MOST = 880  # bytes an array's pending task (~780 now: its own extra, {"bytes",
# "array": [A, index]}; ~1,180 at a071106; one record for an array's tasks: not done)


def _spec(tmp: Path, **more: Any) -> dict[str, Any]:
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    return {"argv": ["true"], "env": env, "cwd": str(tmp), "gpus": 1, **more}


def _traced(rig: EngineRig) -> int:
    rig.turn()  # (the commits done: nothing but the jobs is left of the burst)
    rig.loop.run_until_complete(rig.engine.drain())
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _singles(rig: EngineRig, n: int) -> None:
    async def submits() -> None:
        futures = []
        for _ in range(n):
            rig.clock.t += 0.001  # (each its own submit time, as the CLI's are)
            futures.append(admit.submit(rig.engine, rig.peer, _spec(rig.tmp)))
        await asyncio.gather(*futures)

    rig.loop.run_until_complete(submits())


def _array(rig: EngineRig, n: int) -> None:
    rig.clock.t += 1.0
    spec = _spec(rig.tmp, array=f"0-{n - 1}")
    rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, spec))


@pytest.mark.parametrize(("shape", "most"), [(_singles, SINGLE_MOST), (_array, TASK_MOST)])
def test_a_pending_job_keeps_few_bytes(tmp_path: Path, shape: Any, most: int) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    try:
        rig.engine.accounts.config["max_jobs"] = None
        rig.submit("sleep", "60")
        rig.turn()  # (the one GPU busy: everything after waits, pending)
        tracemalloc.start(1)  # (before the first burst: what it frees later is counted)
        try:
            shape(rig, N + 100)  # (the first burst: what is made once, the caches filled)
            before = _traced(rig)
            shape(rig, N)
            shape(rig, N)
            per_job = (_traced(rig) - before) / (2 * N)
        finally:
            tracemalloc.stop()
        assert len(rig.engine.jobs) == 3 * N + 101
        assert per_job <= most, f"{per_job:.0f} bytes a pending job"
    finally:
        rig.close()


def test_the_job_table_gives_equal_extras_one_and_a_note_its_own() -> None:
    table = JobTable()
    for i in (1, 2, 3):
        table[i] = Job(i, 100.0 + i, uid=7, extra={"bytes": 300})
    table[4] = Job(4, 104.0, uid=7, extra={"bytes": 300, "array": [4, 0]})  # (a list: its own)
    assert table[1].extra is table[2].extra is table[3].extra
    assert type(table[4].extra) is dict
    table[1].note("lease", "L1")
    assert table[1].extra == {"bytes": 300, "lease": "L1"} and table[2].extra == {"bytes": 300}
    assert table[1].unnote("lease") == "L1" and table[3].extra == {"bytes": 300}
    assert table.bytes_of(7) == 4 * 300  # (counted as they came)
    del table[1], table[3], table[4]
    assert table.bytes_of(7) == 300  # (read from each job as it left: not kept twice)
