"""The daemon's submit handler alone, with the job the CLI sends (issue 35.3): CPU a submit
of ``admit.submit`` in process (no socket, no frames), on an engine of the tests' kit
(tests/daemon/enginekit.py: the real admission, journal and store; nothing forked). Run from
the repository root (or a tree to compare: ``cd /tmp/old-mem && PYTHONPATH=$PWD python
/path/to/bench/submit_handler.py``):

    .venv/bin/python bench/submit_handler.py [N]
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [
    os.path.join(os.getcwd(), "tests"),
    os.path.join(os.getcwd(), "tests", "daemon"),
    HERE,
]


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sh-"))
    (tmp / "config.toml").write_text("")
    os.environ["BERTH_CONFIG"] = str(tmp / "config.toml")
    from enginekit import EngineRig
    from shapes import cli_spec

    from berth.daemon.engine.admission import admit
    from berth.wire import cjson

    rig = EngineRig(tmp, gpus=8)
    rig.engine.accounts.config["max_jobs"] = None
    raw = json.dumps({"type": "submit", "job": cli_spec(["-g", "1", "--", "true"])})

    async def submits() -> None:
        futures = []
        for _ in range(n):  # (each its own decoded request, as the socket gives them)
            futures.append(admit.submit(rig.engine, rig.peer, cjson.loads(raw)["job"]))
            if len(futures) >= 256:
                await asyncio.gather(*futures)
                futures = []
        await asyncio.gather(*futures)

    t = time.process_time()
    rig.loop.run_until_complete(submits())
    cpu = time.process_time() - t
    rig.close()
    print(json.dumps({"submits": n, "cpu_ms_per_submit": round(cpu / n * 1000, 4),
                      "loadavg_1min": os.getloadavg()[0]}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
