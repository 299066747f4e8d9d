"""One screen of `berth queue` over arrays (issue 35): the explaining pass for a screen stops
once every line it can show is explained (an array's line by its first task), and an
array's tasks after the first wait alike without being placed each (berth/core/alike.py);
the screen says what it said. Counted (jobs the pass walks, jobs it places), not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig
from helpers import count_calls

from berth.core import schedpass
from berth.daemon.engine import queue_view
from berth.daemon.engine.front import Front
from berth.daemon.requests import queueview

ARRAYS, TASKS, GPUS = 4, 500, 2


def _rig(tmp: Path) -> EngineRig:
    from berth.daemon.engine.admission import admit

    rig = EngineRig(tmp, gpus=GPUS, policy="balanced")  # (the arrays in submit order)
    for _ in range(GPUS):
        rig.submit("sleep", "60", gpus=1)
    rig.turn()
    for a in range(ARRAYS):  # (each array's request unlike the one before it)
        spec = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(tmp),
                "array": f"0-{TASKS - 1}", "gpus": 1 + a % 2}  # fmt: skip
        rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, spec))
    rig.turn()
    return rig


def _screen(rig: EngineRig, **req: Any) -> list[dict[str, Any]]:
    rows = queueview.queue(Front(rig.engine), rig.peer, {"fold": True, **req})
    assert isinstance(rows, dict)
    return [{k: r.get(k) for k in ("id", "state", "reason", "order", "array_tasks")}
            for r in rows["jobs"]]  # fmt: skip


def test_a_screen_of_folded_arrays_walks_to_its_last_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = _rig(tmp_path)
    try:
        placed = count_calls(monkeypatch, schedpass.Pass, "place")
        reserved = count_calls(monkeypatch, schedpass.Pass, "reserve")
        rig.engine.kick()  # (the reasons in hand forgotten: the screen explains afresh)
        screen = _screen(rig, limit=46)
        assert len(screen) == GPUS + ARRAYS  # every line fits
        walked = len(rig.engine.considered)
        assert walked == (ARRAYS - 1) * TASKS + 1  # up to the last array's first task
        assert placed.n == ARRAYS  # each array's first task (was every task walked)
        assert reserved.n == ARRAYS  # one reservation and detail a run (was one a task: 1,501)
        asked = count_calls(monkeypatch, queue_view.Head, "__call__")
        assert _screen(rig, limit=46) == screen
        assert placed.n == ARRAYS and asked.n == 0  # the next screen: no pass, no walk to see
        monkeypatch.undo()
        rig.engine.kick()
        whole = _screen(rig)  # (no limit: the whole queue explained, each task placed)
        assert len(rig.engine.considered) == ARRAYS * TASKS
        assert screen == whole  # the screen says what the whole queue's lines say
    finally:
        rig.close()


def test_the_same_screen_again_walks_none_of_the_jobs_ahead_of_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = _rig(tmp_path)
    try:
        screen = _screen(rig, limit=46)
        walked = len(rig.engine.considered)
        assert walked == (ARRAYS - 1) * TASKS + 1
        asked = count_calls(monkeypatch, queueview.Select, "wants")
        assert _screen(rig, limit=46) == screen
        jobs = GPUS + ARRAYS * TASKS
        # (each job once, as the answer counts them by state; the lines checked again: not
        # the 1,501 jobs the pass considered ahead of the last line, walked again each time)
        assert asked.n <= jobs + len(screen), asked.n
        rig.engine.jobs[screen[GPUS]["id"]].held = True  # (a change: the screen anew)
        rig.engine.kick()
        again = _screen(rig, limit=46)
        assert [r["id"] for r in again] == [r["id"] for r in screen]
        assert again[GPUS]["reason"].startswith("Held") and asked.n > jobs + len(screen)
    finally:
        rig.close()


def test_runs_of_alike_tasks_say_what_each_task_decided_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mixed queue (arrays with a held task, a dependent job, single jobs, one ahead by
    priority, a second request's array): every pending job's reason and place, the rows and
    their start estimates are the same when a run of alike tasks is one entry as when each
    task is gated, placed and reserved (the explaining pass before issue 35's runs)."""
    from berth.core import alike
    from berth.daemon.engine.admission import admit

    rig = _rig(tmp_path)
    try:
        eng = rig.engine
        first = min(j.id for j in eng.jobs.values() if j.extra.get("array"))
        eng.jobs[first + 7].held = True  # (a task held in the middle of a run)
        for gpus in (1, 2):
            rig.submit("true", gpus=gpus)
        rig.submit("true", gpus=1, priority=5)
        rig.submit("true", gpus=1, dependency=f"afterok:{first}")
        other = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(tmp_path),
                 "array": "0-99", "gpus": 1, "priority": 1}  # fmt: skip
        rig.loop.run_until_complete(admit.submit(eng, rig.peer, other))
        rig.turn()

        def said() -> Any:
            eng.kick()
            rows = queueview.queue(Front(eng), rig.peer, {"fold": True})
            assert isinstance(rows, dict)
            lines = [{k: v for k, v in r.items() if k != "time"} for r in rows["jobs"]]
            return dict(eng.reasons), dict(eng.considered), lines  # ("time": the clock's)

        reserved = count_calls(monkeypatch, schedpass.Pass, "reserve")
        runs = said()
        assert reserved.n < 20  # (a run: one; deciding each task: every one, 2,100 and more)
        monkeypatch.setattr(alike, "waits_alike", lambda job, before: False)
        each = said()
        assert reserved.n > ARRAYS * TASKS  # (each task reserved: the pass before runs)
        assert runs == each
        assert any(r.startswith("Held") for r in runs[0].values())
        assert any(r.get("start_estimate") for r in runs[2])  # (the estimates compared too)
    finally:
        rig.close()
