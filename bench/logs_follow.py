"""`berth logs -f`: how long after a job writes a line does the follower print it (issue 40.2)?

Usage (from the repository root):

    .venv/bin/python bench/logs_follow.py [--lines 200] [--every 0.05] [--tree DIR]

One daemon (this checkout's, one declared GPU) runs a job that writes ``--lines`` lines, one
every ``--every`` seconds, each carrying the time it was written (``time.time()``, flushed at
once); ``berth logs -f`` of that job (from ``--tree DIR``'s checkout if given, e.g. an older
commit's ``git worktree``: a before/after comparison) prints them to a pipe read here, and
each line's latency is the time it was read less the time it was written. Prints p50, p90 and
the worst, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import ROOT, Daemon

WRITER = (
    "import sys, time\n"
    "for _ in range({n}):\n"
    "    time.sleep({every})\n"
    "    sys.stdout.write(f'{{time.time():.6f}}\\n'); sys.stdout.flush()\n"
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--every", type=float, default=0.05)
    p.add_argument("--tree", default=ROOT, help="the checkout whose `berth logs -f` runs")
    args = p.parse_args()
    with open("/proc/loadavg") as f:
        print("load before:", f.read().strip())
    d = Daemon(gpus=1)
    try:
        script = WRITER.format(n=args.lines, every=args.every)
        job = d.call("submit", job=d.job([sys.executable, "-c", script]))["job_id"]
        env = {**d.env, "PYTHONPATH": os.path.abspath(args.tree)}
        follower = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "logs", "-f",
                                     str(job)], env=env, stdout=subprocess.PIPE,
                                    cwd=os.path.abspath(args.tree))  # fmt: skip
        assert follower.stdout is not None
        late: list[float] = []
        for line in follower.stdout:
            late.append(time.time() - float(line))
        assert follower.wait() == 0 and len(late) == args.lines, (follower.returncode, len(late))
    finally:
        d.stop()
    ms = sorted(x * 1000 for x in late)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    print(f"`berth logs -f` from {args.tree}: {len(ms)} lines, one every {args.every:g} s")
    print(f"latency p50 {statistics.median(ms):.1f} ms, p90 {p90:.1f} ms, max {ms[-1]:.1f} ms")
    with open("/proc/loadavg") as f:
        print("load after:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
