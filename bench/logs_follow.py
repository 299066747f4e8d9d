"""`berth logs -f`: how long after a job writes a line does the follower print it (issues
40.2, 35)?

Usage (from the repository root):

    .venv/bin/python bench/logs_follow.py [--lines 200] [--every 0.05] [--tree DIR]
                                          [--case plain|new-dir|truncate|rotate ...]

One daemon (this checkout's, one declared GPU) runs, for each case, a job that writes
``--lines`` lines, one every ``--every`` seconds, each carrying the time it was written
(``time.time()``, flushed at once); ``berth logs -f JOB`` (the command users run, from
``--tree DIR``'s checkout if given, e.g. an older commit's ``git worktree``: a before/after
comparison) prints them to a pipe read here, and each line's latency is the time it was read
less the time it was written. The cases (default: all):

- plain: the job's log in its user's log directory;
- new-dir: ``-o DIR/runs/N/out.log``, a directory the job makes when it starts: the follower
  starts first, while the job waits behind another for the GPU;
- truncate: half-way the job empties its log (``: > out.log``, logrotate's copytruncate);
- rotate: half-way the job renames its log away and writes on in a new file of that name.

Prints p50, p90 and the worst of each, and the load average before and after.
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
    "import os, sys, time\n"
    "case, path, out = sys.argv[1], sys.argv[2], sys.stdout\n"
    "for k in range({n}):\n"
    "    time.sleep({every})\n"
    "    if k == {n} // 2 and case == 'truncate':\n"
    "        os.ftruncate(1, 0)\n"
    "    elif k == {n} // 2 and case == 'rotate':\n"
    "        os.rename(path, path + '.1'); out = open(path, 'a')\n"
    "    out.write(f'{{time.time():.6f}}\\n'); out.flush()\n"
)
CASES = ("plain", "new-dir", "truncate", "rotate")


def follow(d: Daemon, args: argparse.Namespace, case: str) -> list[float]:
    """Each line's latency (seconds) in one case."""
    log = os.path.join(d.dir, case, "runs", "1", "out.log")
    if case == "plain":
        log = None  # (the default: its user's log directory)
    blocker = None
    if case == "new-dir":  # the job waits for the GPU, the follower for its log's directory
        blocker = d.call("submit", job=d.job(["sleep", "600"]))["job_id"]
    script = WRITER.format(n=args.lines, every=args.every)
    extra = {"stdout": log} if log else {}
    job = d.call("submit", job=d.job([sys.executable, "-c", script, case, log or ""], **extra))
    env = {**d.env, "PYTHONPATH": os.path.abspath(args.tree)}
    follower = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "logs", "-f",
                                 str(job["job_id"])], env=env, stdout=subprocess.PIPE,
                                cwd=os.path.abspath(args.tree))  # fmt: skip
    assert follower.stdout is not None
    if blocker is not None:
        time.sleep(1.0)  # (the follower started and waits)
        d.call("cancel", job_ids=[blocker])
    late: list[float] = []
    for line in follower.stdout:
        late.append(time.time() - float(line))
    assert follower.wait() == 0 and len(late) == args.lines, (case, follower.returncode, len(late))
    return late


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=int, default=200)
    p.add_argument("--every", type=float, default=0.05)
    p.add_argument("--tree", default=ROOT, help="the checkout whose `berth logs -f` runs")
    p.add_argument("--case", action="append", choices=CASES, help="(default: all)")
    args = p.parse_args()
    with open("/proc/loadavg") as f:
        print("load before:", f.read().strip())
    d = Daemon(gpus=1)
    results = {}
    try:
        for case in args.case or CASES:
            results[case] = follow(d, args, case)
    finally:
        d.stop()
    print(
        f"`berth logs -f` from {args.tree}: {args.lines} lines a case, one every {args.every:g} s"
    )
    for case, late in results.items():
        ms = sorted(x * 1000 for x in late)
        p90 = ms[int(0.9 * (len(ms) - 1))]
        print(f"{case:<9} latency p50 {statistics.median(ms):6.1f} ms, p90 {p90:6.1f} ms, "
              f"max {ms[-1]:6.1f} ms")  # fmt: skip
    with open("/proc/loadavg") as f:
        print("load after:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
