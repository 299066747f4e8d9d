"""What `berth report` costs on a busy store: N finished jobs over the last 25 days (one
attempt each, a job's record as the daemon writes it), a 30-day report by user.

Usage (from the repository root):

    .venv/bin/python bench/report_tally.py [--jobs 100000]

Prints the time to read the records (the report thread's own connection), their sampled
usage, and to tally them. The daemon does this off its loop (berth.daemon.requests.report),
one report at a time; the figure says how long an answer takes, not how long scheduling
waits.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from berth.daemon.report import tally
from berth.daemon.store import summaries
from berth.daemon.store.store import Store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    n = ap.parse_args().jobs
    store = Store.open(os.path.join(tempfile.mkdtemp(prefix="berth-bench-"), "berth.db"))
    now = time.time()
    rows = []
    for i in range(1, n + 1):
        t = now - 25 * 86400 * i / n
        job = {"id": i, "user": f"u{i % 20}", "uid": 1000 + i % 20, "project": f"p{i % 5}",
               "state": "COMPLETED", "submit_time": t - 60,
               "attempts": [{"number": 1, "start": t, "end": t + 600, "gpus": [i % 8],
                             "share": 1.0, "outcome": "COMPLETED", "exit_code": 0}],
               "history": [{"at": t, "prev": None, "state": "PENDING", "detail": ""}] * 4}  # fmt: skip
        rows.append(
            (i, job["uid"], job["user"], "COMPLETED", t - 60, t + 600, json.dumps(job), "{}")
        )
    with store.tx() as db:
        db.executemany(
            "INSERT INTO jobs(id, uid, user, state, submitted_at, ended_at, data, spec) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    since = now - 30 * 86400
    t0 = time.perf_counter()
    jobs = summaries.finished(store, since, now)
    t1 = time.perf_counter()
    used = summaries.usage(store, [int(j["id"]) for j in jobs])
    t2 = time.perf_counter()
    models = dict.fromkeys(range(8), "H100")
    pieces = []
    for j in jobs:
        pieces += tally.job_pieces(j, since, now, now, models, used.get(int(j["id"])))
    out = tally.group(pieces, ["user"])
    t3 = time.perf_counter()
    print(f"{len(jobs)} jobs, {len(out)} users: read {t1 - t0:.2f} s, usage {t2 - t1:.2f} s, "
          f"tally {t3 - t2:.2f} s, in all {t3 - t0:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
