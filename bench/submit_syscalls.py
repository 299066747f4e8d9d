"""System calls the daemon makes a pipelined submit of the CLI's spec (issue 35.3): ``strace
-f -c`` attached to a fresh daemon (8 running jobs, everything else waits) over N submits of
what ``berth submit -g 1 -- true`` sends (bench/shapes.py's ``cli`` spec), on one connection.
Run from the repository root (``--tree DIR``: another checkout's daemon, as shapes.py):

    .venv/bin/python bench/submit_syscalls.py [N] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import daemon_bench
import shapes


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("n", nargs="?", type=int, default=10_000)
    p.add_argument("--tree", help="the checkout to measure (default: this one)")
    a = p.parse_args()
    if a.tree:
        daemon_bench.ROOT = os.path.abspath(a.tree)
        sys.path.insert(0, daemon_bench.ROOT)
    d = daemon_bench.Daemon(gpus=shapes.GPUS)
    out = tempfile.mktemp(prefix="strace-", suffix=".txt")
    try:
        shapes._blockers(d)
        spec = shapes.cli_spec(["-g", "1", "--", "true"])
        d.submit_many([spec] * 200)  # (the user's environment known, the loop warm)
        st = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(d.proc.pid)])
        time.sleep(1.0)  # (attached)
        d.submit_many([spec] * a.n)
        st.terminate()
        st.wait()
    finally:
        d.call("cancel", all_mine=True)
        d.stop()
    calls = {}
    with open(out) as f:
        for line in f:
            x = line.split()
            if len(x) >= 5 and x[0][0].isdigit() and x[-1] != "total":
                calls[x[-1]] = round(int(x[3]) / a.n, 3)
    os.unlink(out)
    print(json.dumps({"tree": a.tree or ".", "submits": a.n, "calls_per_submit": calls}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
