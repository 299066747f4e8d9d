"""A measurement, not a test of the suite (its name is not ``test_*``): another user's
requests to the dashboard while one user floods it with requests it refuses (the flood of
tests/web/test_web_refused_flood.py). Run it by name:
``.venv/bin/python -m pytest -q -s tests/web/measure_refused_flood.py``."""

from __future__ import annotations

import collections
import time
from typing import Any

from test_web_flood import _get
from test_web_refused_flood import FLOOD, RefusedFlood
from userkit import A, call_as, ensure_users

ASKS = 40


def test_measure(web: Any) -> None:
    ensure_users()
    web.start(gpus=1)
    bad = b"GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n"
    flood = RefusedFlood(web.host, web.port, FLOOD, bad)
    got: collections.Counter[int] = collections.Counter()
    took: list[float] = []
    try:
        while flood.opened < 3 * FLOOD:
            time.sleep(0.05)
        t0, o0 = time.monotonic(), flood.opened
        for _ in range(ASKS):
            status, t = call_as(A, _get(web.host, web.port), preload=("encodings.idna",))
            got[status] += 1
            took.append(t)
        rate = (flood.opened - o0) / (time.monotonic() - t0)
    finally:
        flood.close()
    took.sort()
    print(f"\nanother user's {ASKS} requests: {dict(got)}; median {took[ASKS // 2] * 1000:.1f} "
          f"ms, max {took[-1] * 1000:.1f} ms; flood {rate:.0f} refused connections/s")  # fmt: skip
