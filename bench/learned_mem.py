"""What learned memory (issue 33.3) costs a submit: the first submit of a (user, job) reads
the user's peaks from the store (``learned._read``: the user's newest ``SCAN`` jobs, JSON
fields read by SQLite, one query per user); every later one, of any job, hits the memo. Measured on a state
database with one user's N finished jobs of K kinds and 100,000 pending ones of another user.

    .venv/bin/python bench/learned_mem.py [--jobs 20000] [--kinds 200]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from berth.daemon.engine.admission import learned
from berth.daemon.engine.admission.peaks import key
from berth.daemon.store.store import open_store
from berth.wire.jobspec import JobSpec


def _fill(store: object, jobs: int, kinds: int, pending: int) -> None:
    db = store.db  # type: ignore[attr-defined]
    rows = []
    spec = json.dumps({"argv": ["python", "x.py"], "env": {}, "cwd": "/"})
    for i in range(1, jobs + 1):
        k = key(1000, JobSpec.from_dict({"argv": ["t"], "env": {}, "cwd": "/",
                                                 "name": f"kind{i % kinds}"}))  # fmt: skip
        data = {"id": i, "extra": {"learn": k, "peak_mem": (i % 70 + 1) << 30}}
        rows.append((i, 1000, "alice", "COMPLETED", float(i), float(i + 1), json.dumps(data), spec))
    for i in range(jobs + 1, jobs + pending + 1):
        rows.append((i, 1001, "bob", "PENDING", float(i), None, json.dumps({"id": i}), spec))
    db.execute("BEGIN")
    db.executemany("INSERT INTO jobs(id, uid, user, state, submitted_at, ended_at, data, spec) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)  # fmt: skip
    db.execute("COMMIT")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--kinds", type=int, default=200)
    ap.add_argument("--pending", type=int, default=100_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        store = open_store(os.path.join(d, "state"))
        _fill(store, a.jobs, a.kinds, a.pending)
        specs = [JobSpec.from_dict({"argv": ["t"], "env": {}, "cwd": "/", "name": f"kind{k}"})
                 for k in range(a.kinds)]  # fmt: skip
        keys = [key(1000, s) for s in specs]
        times = []
        for _ in range(5):  # (the first: the database's pages not yet in SQLite's cache)
            t = time.perf_counter()
            peaks = learned._read(store, 1000)
            times.append(time.perf_counter() - t)
        cold, again = times[0], sorted(times[1:])[1]
        found = [peaks.get(k) for k in keys]
        memo = learned.Memo()
        for k in keys:
            memo.get(store, 1000, k)
        t = time.perf_counter()
        for _ in range(10):
            for k in keys:
                memo.get(store, 1000, k)
        warm = (time.perf_counter() - t) / (10 * len(keys))
        t = time.perf_counter()
        none = learned._read(store, 1001)
        other = time.perf_counter() - t
        print(f"{a.jobs} completed jobs of {a.kinds} kinds (user 1000), {a.pending} pending "
              f"(user 1001)")  # fmt: skip
        print(f"store read, a user's first submit: {cold * 1e3:.3f} ms, cache warm "
              f"{again * 1e3:.3f} ms "
              f"({sum(map(bool, found))}/{len(found)} kinds found, {learned.RUNS} peaks each)")
        print(f"memo hit, every later submit:     {warm * 1e6:.2f} us")
        print(f"store read, a user with {a.pending} pending and no history: "
              f"{other * 1e3:.3f} ms (found {len(none)})")
        store.db.close()


if __name__ == "__main__":
    main()
