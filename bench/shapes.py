"""The daemon's memory and submit cost in the shapes people submit (issue 35.2-3). Run from
the repository root:

    .venv/bin/python bench/shapes.py [SHAPE ...] [--jobs N] [--tree DIR]

``--tree DIR``: measure another checkout's berth (``git worktree add /tmp/old-mem REV``): the
daemon and the CLI run there (``python -m berth.cli.main`` in DIR); the bench is this one.

Shapes (each in a fresh daemon, 8 declared GPUs held by 8 running jobs, so everything else
waits):

The daemon's RSS is read as the submits end and again after :data:`SETTLE` seconds idle.

- ``cli``: N single submits of the job the CLI sends (``berth submit -g 1 -- true``'s
  JobSpec, made by ``cli/submit.job_spec`` from this process's real environment,
  ``--export ALL``), pipelined on one connection: submits/s, the daemon's CPU a submit, its
  RSS queued;
- ``arrays``: N / 10,000 x ``berth submit --array 0-9999 -g 1 -- true`` (the CLI): the
  daemon's RSS, one screen of ``berth queue`` (``-n 46``, as on a 50-line terminal: three
  runs), then ``berth cancel --all-mine`` (wall seconds);
- ``file``: ``berth submit --file F`` with N lines (``true I``): the daemon's RSS.

Each row is printed as JSON with its targets (issue 35) and the load average.
:func:`run_shape` is importable (bench/peers.py may put the rows beside its peers').
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import daemon_bench
from daemon_bench import Daemon, _time_one

TARGETS = {
    "daemon_rss_mb_queued": 120.0,  # <= (every shape, 100,000 queued)
    "daemon_rss_mb_settled": 120.0,
    "submits_per_second": 5000.0,  # >= (the CLI's spec, pipelined)
    "cancel_all_mine_seconds": 2.0,  # <= (100,000 jobs)
    "queue_screen_seconds": 0.5,  # <= (100,000 queued as arrays)
}
GPUS = 8
SETTLE = 5.0  # seconds the daemon is left idle before its RSS is read again


def cli_spec(argv: list[str]) -> dict[str, Any]:
    """The job ``berth submit ARGV`` sends (its ``to_dict()``), made as the CLI makes it."""
    from berth.cli import submit_options
    from berth.cli.submit import job_spec

    p = argparse.ArgumentParser()
    submit_options.add_arguments(p)
    return job_spec(p.parse_args(argv)).to_dict()


def _cli(*args: str) -> list[str]:
    """``berth ARGS`` of the tree measured (run in its directory: ``-m`` puts it first)."""
    return [sys.executable, "-m", "berth.cli.main", *args]


def _berth(d: Daemon, *args: str, timeout: float | None = None) -> float | None:
    """Wall seconds of one ``berth ARGS`` (its output dropped); None past ``timeout``."""
    t = time.perf_counter()
    try:
        subprocess.run(_cli(*args), env=d.env, check=True, stdout=subprocess.DEVNULL,
                       cwd=daemon_bench.ROOT, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - t


def _blockers(d: Daemon) -> None:
    d.submit_many([d.job(["sleep", "3600"], gpus=1) for _ in range(GPUS)])


def shape_cli(d: Daemon, n: int) -> dict[str, Any]:
    spec = cli_spec(["-g", "1", "--", "true"])
    cpu0 = d.own_cpu()
    t0 = time.perf_counter()
    d.submit_many([spec] * n)
    seconds = time.perf_counter() - t0
    cpu = d.own_cpu() - cpu0
    return {
        "env_bytes": sum(len(k) + len(v) + 2 for k, v in spec["env"].items()),
        "submits_per_second": round(n / seconds),
        "daemon_cpu_ms_per_submit": round(cpu / n * 1000, 3),
    }


def shape_arrays(d: Daemon, n: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    for _ in range(max(1, n // 10_000)):
        _berth(d, "submit", "--array", "0-9999", "-g", "1", "--", "true")
    return {"submit_seconds": round(time.perf_counter() - t0, 2)}


def _round(seconds: float | None) -> float | str:
    return "did not finish in 120 s" if seconds is None else round(seconds, 2)


def shape_file(d: Daemon, n: int) -> dict[str, Any]:
    path = os.path.join(d.dir, "jobs.txt")
    with open(path, "w") as f:
        f.writelines(f"true {i}\n" for i in range(n))
    return {"submit_seconds": _round(_berth(d, "submit", "--file", path))}


SHAPES = {"cli": shape_cli, "arrays": shape_arrays, "file": shape_file}


def run_shape(name: str, n: int = 100_000) -> dict[str, Any]:
    """One shape in a fresh daemon: its row."""
    d = Daemon(gpus=GPUS)
    try:
        _blockers(d)
        row: dict[str, Any] = {"shape": name, "jobs": n, "loadavg": os.getloadavg()[0]}
        row.update(SHAPES[name](d, n))
        row["daemon_rss_mb_queued"] = round(d.call("ping")["rss"] / 2**20, 1)
        time.sleep(SETTLE)  # (an idle daemon: what a burst left is given back, if it can be)
        row["daemon_rss_mb_settled"] = round(d.call("ping")["rss"] / 2**20, 1)
        if name == "arrays":
            env = {**d.env, "PYTHONPATH": daemon_bench.ROOT}
            screens = [_time_one(_cli("queue", "-n", "46"), env)[0] for _ in range(3)]
            row["queue_screen_seconds"] = [round(t, 3) for t in screens]
            row["daemon_rss_mb_after_screens"] = round(d.call("ping")["rss"] / 2**20, 1)
            time.sleep(SETTLE)  # (and once the trimmer has had its look)
            row["daemon_rss_mb_after_screens_settled"] = round(d.call("ping")["rss"] / 2**20, 1)
            cancel = _berth(d, "cancel", "--all-mine", timeout=120)
            row["cancel_all_mine_seconds"] = _round(cancel)
    finally:
        try:  # (the blockers' supervisors outlive the daemon: end them first)
            d.call("cancel", all_mine=True)
        finally:
            d.stop()
    row["targets"] = {k: v for k, v in TARGETS.items() if k in row}
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("shapes", nargs="*", help="of: " + ", ".join(SHAPES))
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--tree", help="the checkout to measure (default: this one)")
    a = p.parse_args()
    if a.tree:
        daemon_bench.ROOT = os.path.abspath(a.tree)
        sys.path.insert(0, daemon_bench.ROOT)  # (cli_spec: that tree's CLI makes the spec)
    for name in a.shapes or list(SHAPES):
        if name not in SHAPES:
            p.error(f"no shape {name!r}: one of {', '.join(SHAPES)}")
        print(json.dumps(run_shape(name, a.jobs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
