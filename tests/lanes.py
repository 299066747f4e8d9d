"""The whole suite in two lanes at once: ``python tests/lanes.py [PYTEST OPTIONS]``.

The Slurm tests (tests/slurm), the dashboard's (tests/web), a stuck daemon's and the chaos
test's mostly wait: for a real slurmctld's scheduling, its job steps and their ends, for a
browser's rendering, for a client's patience to run out, for killed daemons to come back. Run one after
the other with the rest they leave the 2 cores idle for minutes; beside the rest, in a second
``pytest`` of their own, they overlap with it (bench/RESULTS.md, "The suite's wall time a
third time": the whole suite 670 s in one lane, 434 s in two, on the same machine). Nothing is
skipped or changed: each lane is ``python -m pytest -q`` over its folders, with the options
given here; the exit status is the worse of the two, and the second lane's output is printed
after the first's. The lanes share nothing a test holds for itself: each session its own temp
directories, Slurm rig, browser and daemons; test users are made by whichever comes first
(tests/userkit.py); the fake NVML library is renamed into place whole (tests/fakenvml/build.py).

``python -m pytest -q`` (one lane, everything in turn) stays the plain way to run the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# What mostly waits on something other than the CPU: a Slurm rig, a browser, a daemon that
# never answers (the client's patience), jobs killed and restarted at random moments.
SECOND = ("slurm", "web", "daemon/test_stuck_daemon.py", "daemon/test_chaos.py")


def main(options: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", "-q", *options]
    second = [str(TESTS / name) for name in SECOND]
    first = [str(TESTS), *(f"--ignore={path}" for path in second)]
    with tempfile.TemporaryFile("w+") as out:
        lane = subprocess.Popen([*pytest, *second], stdout=out, stderr=subprocess.STDOUT)
        try:
            code = subprocess.call([*pytest, *first])
        finally:
            done = lane.wait()
        out.seek(0)
        print(f"\n===== {' '.join(SECOND)} (the second lane) =====", flush=True)
        sys.stdout.write(out.read())
    print(f"lanes: exit {code} (the rest), {done} ({', '.join(SECOND)})", flush=True)
    return max(code, done)


if __name__ == "__main__":
    os.chdir(TESTS.parent)
    sys.exit(main(sys.argv[1:]))
