"""`berth submit --hold -- true` as a whole process, against `python -c pass` (issue 21).

Usage (from the repository root):

    .venv/bin/python bench/submit_startup.py [--rounds 30] [VENV ...]

Each VENV is a virtual environment with berth installed in it *not* editable (an editable
install's import hook costs every Python start of that environment ~10-40 ms, the baseline
included, which hides what berth costs): ``python3 -m venv V && V/bin/pip install
--no-build-isolation --no-deps .`` (plus nvidia-ml-py, psutil). Default: this interpreter's
environment. One daemon (this checkout's, declared GPUs, a config file as on a real host) takes
every submit; for each VENV, interleaved round by round: ``V/bin/python -c pass`` and
``V/bin/berth submit --hold -- true``. Prints medians of wall and CPU time (user +
system: less moved by the load than wall time), the ratio to ``python -c pass`` (the
target: <= 2.0x, stretch 1.5x) and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import Daemon


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms: user + system) of one run of ``argv``."""
    t = time.perf_counter()
    pid = os.posix_spawn(
        argv[0],
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ],
    )
    _, status, ru = os.wait4(pid, 0)
    wall = (time.perf_counter() - t) * 1000
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return wall, (ru.ru_utime + ru.ru_stime) * 1000


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("venvs", nargs="*", default=[os.path.dirname(os.path.dirname(sys.executable))])
    args = p.parse_args()
    with open("/proc/loadavg") as f:
        print("load before:", f.read().strip())
    d = Daemon(gpus=1)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for _ in range(args.rounds):
            for v in args.venvs:
                py, berth = os.path.join(v, "bin", "python"), os.path.join(v, "bin", "berth")
                for what, argv in (
                    ("pass", [py, "-c", "pass"]),
                    ("submit", [berth, "submit", "--hold", "--", "true"]),
                ):
                    times.setdefault((v, what), []).append(_run(argv, d.env))
    finally:
        d.stop()
    for v in args.venvs:
        wall = [statistics.median(t[0] for t in times[(v, w)]) for w in ("pass", "submit")]
        cpu = [statistics.median(t[1] for t in times[(v, w)]) for w in ("pass", "submit")]
        print(
            f"{v}: wall: python -c pass {wall[0]:.1f} ms, submit {wall[1]:.1f} ms: "
            f"{wall[1] / wall[0]:.2f}x; CPU: {cpu[0]:.1f} ms, {cpu[1]:.1f} ms: {cpu[1] / cpu[0]:.2f}x"
        )
    with open("/proc/loadavg") as f:
        print("load after:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
