"""Where the daemon's event loop spends its CPU a job, by phase (issue 35.3, w8-thru): 2,000
trivial 1-GPU jobs on 8 GPUs (``daemon_bench.py throughput``), the daemon run under this
script, which wraps its loop's callbacks in thread-CPU counters: the scheduling passes (their
claims, write-ahead and hand-overs), the supervisors' ``done`` messages (the ends), the
commits' follow-ups, the admission of each submit, the ledger's inotify callbacks, and the
loop's whole turns (``rest``: what none of them is: reading and answering requests, the
loop's own work). Counted on the thread's CPU clock, no profiler: the figures add up to what
``throughput_ab.py`` calls ``daemon_loop``. Run from the repository root (``--tree DIR``:
another checkout's daemon):

    .venv/bin/python bench/loop_phases.py [--jobs 2000] [--tree DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from typing import Any

PHASES = [  # (module, class or "", function, phase)
    ("berth.daemon.engine.engine", "Engine", "schedule_pass", "pass"),
    ("berth.daemon.procs.pool", "Pool", "_on_readable", "done"),
    ("berth.daemon.store.journal", "Journal", "_committed", "committed"),
    ("berth.daemon.engine.front", "Front", "admit", "submit"),
    ("berth.daemon.main", "", "_on_claims", "on_claims"),
    ("berth.daemon.main", "", "_on_listing", "on_listing"),
    ("asyncio.base_events", "BaseEventLoop", "_run_once", "turns"),
]


def _wrapped() -> None:  # pragma: no cover - runs as the daemon
    """(As the daemon: ``loop_phases.py -m berth.cli.main daemon ...``, in the tree's dir.)"""
    import atexit
    import importlib
    import runpy

    sys.path.insert(0, os.getcwd())  # (the tree's berth, as `python -m` would have it)
    spent: collections.defaultdict[str, float] = collections.defaultdict(float)

    def wrap(owner: Any, name: str, phase: str) -> None:
        f = getattr(owner, name)

        def counted(*a: Any, **k: Any) -> Any:
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                spent[phase] += time.thread_time() - t

        setattr(owner, name, counted)

    for module, cls, name, phase in PHASES:
        mod = importlib.import_module(module)
        wrap(getattr(mod, cls) if cls else mod, name, phase)

    def dump() -> None:
        with open(os.environ["LOOP_PHASES_OUT"], "w") as f:
            json.dump(spent, f)

    atexit.register(dump)
    sys.argv = ["berth", *sys.argv[3:]]
    runpy.run_module("berth.cli.main", run_name="__main__", alter_sys=False)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--tree", help="the checkout to measure (default: this one)")
    a = p.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import daemon_bench

    if a.tree:
        daemon_bench.ROOT = os.path.abspath(a.tree)
    fd, out = tempfile.mkstemp(prefix="loop-phases-")
    os.close(fd)
    os.environ.update(BENCH_WRAP=os.path.abspath(__file__), LOOP_PHASES_OUT=out)
    try:
        r = daemon_bench.bench_throughput(a.jobs)
        with open(out) as f:
            spent: dict[str, float] = json.load(f)
    finally:
        os.unlink(out)
    # (the turns hold every other phase; the bench's closing `queue` call is in `rest`)
    rest = spent.get("turns", 0.0) - sum(v for k, v in spent.items() if k != "turns")
    per = {k: round(v / a.jobs * 1000, 3) for k, v in sorted(spent.items()) if k != "turns"}
    print(json.dumps({
        "tree": daemon_bench.ROOT, "jobs": a.jobs, "jobs_per_second": r["jobs_per_second"],
        "loop_ms_per_job": round(spent.get("turns", 0.0) / a.jobs * 1000, 3),
        "phases_ms_per_job": {**per, "rest": round(rest / a.jobs * 1000, 3)},
        "loadavg": os.getloadavg()[0],
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    if sys.argv[1:3] == ["-m", "berth.cli.main"]:
        _wrapped()
    else:
        raise SystemExit(main())
