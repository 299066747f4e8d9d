"""`berth submit --hold --file F` with 1,000 and 100,000 lines (issue 21): wall and CPU time, and
the client's peak RSS (its memory must not grow with the file). Run from the repository root:

    .venv/bin/python bench/submit_file.py [LINES]

One daemon (8 declared GPUs; an admin's [limits] max_jobs would have to allow them); the lines are trivial
held jobs (``true N``). Prints per file: seconds, jobs/s, the client's CPU seconds and peak RSS,
and the load average.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import Daemon


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one run of ``argv`` (stdout discarded)."""
    t = time.perf_counter()
    out = (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[out])
    _, status, ru = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main() -> int:
    big = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    d = Daemon(gpus=8)  # (no [limits] max_jobs: none by default here)
    berth = os.path.join(os.path.dirname(sys.executable), "berth")
    try:
        for n in (1_000, big):
            path = os.path.join(d.dir, f"jobs{n}.txt")
            with open(path, "w") as f:
                f.writelines(f"true {i}\n" for i in range(n))
            with open("/proc/loadavg") as f:
                load = f.read().split()[:3]
            wall, cpu, rss = _run([berth, "submit", "--hold", "--parsable", "--file", path], d.env)
            print(
                f"{n} lines: {wall:.1f} s ({n / wall:.0f} jobs/s), client CPU {cpu:.1f} s, "
                f"client peak RSS {rss / 1024:.0f} MB, load {' '.join(load)}"
            )
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
