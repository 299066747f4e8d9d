"""The longest a real daemon is silent before it answers, under a queue of N jobs (w9-hang):
what the client's patience (berth/client_wait.py, BERTH_ANSWER_TIMEOUT, default 60 s) must
stay far above. Run from the repository root:

    .venv/bin/python bench/answer_silence.py [--jobs 100000]

A fresh daemon, 8 declared GPUs held by 8 running jobs, N pending ones behind them. Each
request below is sent three times on a connection of its own and every frame of its answer
timed from the request (or the previous frame) to its arrival: the longest such wait is the
longest silence the client saw. Then the CLI's wall seconds for the commands that ask them.
Printed as JSON with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import Daemon, _time_one

from berth.client import Client

GPUS = 8


def silences(d: Daemon, kind: str, **fields: Any) -> list[float]:
    """Per run: the longest wait for a frame of the answer (seconds)."""
    out = []
    for _ in range(3):
        with Client(d.socket, timeout=600) as c:
            c.call("ping")  # (the handshake, outside the measure)
            t = time.perf_counter()
            c.send(kind, **fields)
            longest = 0.0
            while True:
                raw = c.receive_raw()
                now = time.perf_counter()
                longest, t = max(longest, now - t), now
                if not fields.get("stream") or raw.startswith(b'{"ok":true,"end":true'):
                    break
            out.append(round(longest, 3))
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=100_000)
    n = p.parse_args().jobs
    d = Daemon(gpus=GPUS)
    try:
        d.submit_many([d.job(["sleep", "600"], gpus=1) for _ in range(GPUS)])
        ids = d.submit_many([d.job(["true"], gpus=1) for _ in range(n)])
        row: dict[str, Any] = {"jobs": n, "loadavg_before": os.getloadavg()[0]}
        for name, kind, fields in (
            ("queue_all_unstreamed", "queue", {"all": True}),  # (cancel, show by id: _rows)
            ("queue_streamed", "queue", {"all": False, "stream": True}),
            ("status", "status", {}),
            ("show", "show", {"job_id": ids[-1]}),
            ("submit", "submit", {"job": d.job(["true"], gpus=1)}),
        ):
            row[f"{name}_longest_silence_s"] = silences(d, kind, **fields)
        berth = os.path.join(os.path.dirname(sys.executable), "berth")
        for name, args in (("queue", ["queue"]), ("queue_json", ["queue", "--json"]),
                           ("show", ["show", str(ids[-1])]), ("status", ["status"]),
                           ("cancel_one", ["cancel", str(ids[-1])])):  # fmt: skip
            row[f"cli_{name}_s"] = round(_time_one([berth, *args], d.env)[0], 3)
        row["loadavg_after"] = os.getloadavg()[0]
    finally:
        try:
            d.call("cancel", all_mine=True)
        finally:
            d.stop()
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
