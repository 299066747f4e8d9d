"""Issue 41.2: files planted by one user in the claim ledger must not slow anybody else.

    .venv/bin/python bench/planted_claims.py [--planted 100000] [--rounds 5]

A real daemon (bench/daemon_bench.py's: a declared GPU, the ledger on a tmpfs) runs as root.
Another user (``nobody``) plants N dead files under claim names of that very GPU (the worst
case: every check of the GPU's claims would look at them), topped up before each round, as a
hostile user would keep doing. Then, with 0 and with N planted files, in the same run:

1. a daemonless holder (``berth.acquire(1)``) holds the GPU while a job waits for it in the
   queue; the holder is killed (SIGKILL); the latency is the time from the kill to the job's
   first instruction (stamped by the job itself: bash's $EPOCHREALTIME).
   Target: within 100 ms with N planted files.
2. ``berth status`` (a separate process: imports, NVML, a ledger scan, the daemon's queue),
   best and median of ``--rounds`` runs. Target: within 2x its time without planted files.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from daemon_bench import Daemon  # noqa: E402

NOBODY = 65534
HOLDER = """
import sys, berth
lease = berth.acquire(gpus=1, timeout=30)
print("held", flush=True)
sys.stdin.read()
"""


def plant(claims: str, n: int) -> None:
    """N dead claim files of GPU LOGICAL-0, owned by nobody (the missing ones made)."""
    have = set(os.listdir(claims))
    for i in range(n):
        name = f"c.LOGICAL-0.p{i:07d}.1000.0"
        if name in have:
            continue
        path = os.path.join(claims, name)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        os.chown(path, NOBODY, NOBODY)


def handoff(d: Daemon, stamp: str) -> float:
    """Seconds from the holder's SIGKILL to the waiting job's first instruction."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], env=d.env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        if os.path.exists(stamp):
            os.unlink(stamp)
        [job] = d.submit_many([d.job(["bash", "-c", f"echo $EPOCHREALTIME > {stamp}"])])
        deadline = time.monotonic() + 30
        while d.call("show", job_id=job)["job"]["state"] != "PENDING":
            if time.monotonic() > deadline:
                raise SystemExit("the job never waited")
            time.sleep(0.01)
        time.sleep(0.3)  # (the daemon settles: its passes over the planted files are done)
        killed = time.time()
        holder.send_signal(signal.SIGKILL)
        d.wait_all([job], timeout=60)
        with open(stamp) as f:
            return float(f.read()) - killed
    finally:
        holder.kill()
        holder.wait()


def status_time(d: Daemon) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "status"], env=d.env, cwd=ROOT,
        stdout=subprocess.DEVNULL, check=True,
    )  # fmt: skip
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--planted", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    d = Daemon(gpus=1)
    try:
        os.chmod(d.claims, 0o1777)
        stamp = os.path.join(d.dir, "stamp")
        print(f"{'planted':>8} {'start after GPU frees (ms)':>34} {'berth status (ms)':>26}")
        print(f"{'':>8} {'p50':>10} {'max':>10} {'each':>12} {'best':>12} {'median':>12}")
        for n in (0, args.planted):
            lat, st = [], []
            for _ in range(args.rounds):
                plant(d.claims, n)
                lat.append(handoff(d, stamp) * 1000)
                plant(d.claims, n)
                st.append(status_time(d) * 1000)
            each = ",".join(f"{x:.0f}" for x in lat)
            print(
                f"{n:>8} {statistics.median(lat):>10.1f} {max(lat):>10.1f} {each:>12} "
                f"{min(st):>12.1f} {statistics.median(st):>12.1f}",
                flush=True,
            )
    finally:
        d.stop()


if __name__ == "__main__":
    main()
