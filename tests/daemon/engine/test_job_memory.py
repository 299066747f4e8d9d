"""What a pending job costs the daemon's memory (issue 35: <= 120 MB with 100,000 queued in
every shape the CLI submits). Counted, not timed: the bytes Python keeps for each more job
queued (tracemalloc, the growth from 1,000 more jobs to 2,000 more, so the bounded caches,
the journal's recent specs, cancel out), as single submits (each its own submit time), as
one array's tasks and as one request of a jobs file's lines (one submit time). What stays a job: its ``Job``, its place in the job table and the
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
TASK_MOST = 700  # bytes an array's pending task (~615 now: no dict of its own, a
# TaskExtra; ~780 at 9a92838, its own {"bytes", "array": [A, index]}; ~1,180 at a071106)
LINE_MOST = 600  # bytes a jobs file's line's pending job (~500 now: its request's submit time
# and `submitted` history shared; ~660 at 1244a35, each line its own time, event and list)


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


def _lines(rig: EngineRig, n: int) -> None:
    """One request of ``n`` lines of a jobs file, the clock moving as the daemon's does
    between any two looks (they are queued together: at one submit time)."""
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    raws = [{"argv": ["true", str(i)], "cwd": str(rig.tmp), "gpus": 1} for i in range(n)]
    clock = rig.clock

    def tick() -> float:
        clock.t += 0.001
        return clock.t

    setattr(clock, "time", tick)  # noqa: B010 (the fake clock's, while the request goes)
    try:
        rig.loop.run_until_complete(admit.submit_all(rig.engine, rig.peer, raws, env=env))
    finally:
        delattr(clock, "time")


def _array(rig: EngineRig, n: int) -> None:
    rig.clock.t += 1.0
    spec = _spec(rig.tmp, array=f"0-{n - 1}")
    rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, spec))


@pytest.mark.parametrize(
    ("shape", "most"), [(_singles, SINGLE_MOST), (_array, TASK_MOST), (_lines, LINE_MOST)]
)
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


REQUEST = 2000  # jobs of the request measured
ARRAY_PEAK = 2600  # bytes a task at most between its request and its commit (~2,220 now:
# its job, its row; ~3,070 at 9a92838: a spec, a future and a callback each too)
FILE_PEAK = 3200  # ... a jobs file's line (~3,050 now; ~3,380 at 1244a35: a closure and its
# cells a line forgetting its identity once durable; ~4,400 at 9a92838: a copy of each
# line's dict, its checked spec kept beside its stored one, a future and callbacks each)


def _request(rig: EngineRig, shape: str, n: int) -> Any:
    """One request of ``n`` jobs, as the `submit` or `submit_all` handler hands it over."""
    rig.clock.t += 1.0
    env = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    if shape == "array":
        spec = _spec(rig.tmp, array=f"0-{n - 1}")

        async def array() -> Any:  # (submit() queues as it is called: not before the base)
            return await admit.submit(rig.engine, rig.peer, spec)

        return array()
    raws = [{"argv": ["true", str(i)], "cwd": str(rig.tmp), "gpus": 1} for i in range(n)]
    return admit.submit_all(rig.engine, rig.peer, raws, env=env)


@pytest.mark.parametrize(("shape", "most"), [("array", ARRAY_PEAK), ("file", FILE_PEAK)])
def test_a_request_holds_few_bytes_a_job_until_its_commit(
    tmp_path: Path, shape: str, most: int
) -> None:
    """What a 2,000-job request (an array, a jobs file's) makes between its frame and its
    commit, at its peak (tracemalloc): its jobs and their rows, not a spec, a future and
    a callback for each job, nor each line copied (issue 35: the fragmentation a burst's
    transient memory leaves in the daemon's RSS)."""
    rig = EngineRig(tmp_path, gpus=1)
    try:
        rig.engine.accounts.config["max_jobs"] = None
        rig.submit("sleep", "60")
        rig.turn()
        tracemalloc.start(1)
        try:
            rig.loop.run_until_complete(_request(rig, shape, REQUEST))  # (caches filled)
            _traced(rig)
            request = _request(rig, shape, REQUEST)  # (its lines decoded: the frame's)
            gc.collect()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            rig.loop.run_until_complete(request)
            peak = (tracemalloc.get_traced_memory()[1] - base) / REQUEST
        finally:
            tracemalloc.stop()
        assert len(rig.engine.jobs) == 2 * REQUEST + 1
        assert peak <= most, f"{peak:.0f} bytes a job at the request's peak"
    finally:
        rig.close()
