"""A one-minute tour of berth that works on any machine.

On a GPU server it first shows the real GPUs (read-only). The hands-on part (claims, `berth run`,
the queue daemon) always runs on a declared inventory of logical GPUs in a private temporary
ledger, so the tour never claims a GPU that somebody else might want. Without an NVIDIA driver
(a laptop, CI) it says so and runs the whole tour on the logical GPUs.

Each step prints the command as you would type it, then what it printed.

examples:
  berth demo                  the tour, on 4 logical GPUs
  berth demo --gpus 8         with 8 logical GPUs
  berth demo --skip-queue     without starting the queue daemon
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from berth.devices import read_gpus
from berth.errors import NvmlUnavailable, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


# The demo job: prints the GPU it was given and records when it ran.
_JOB = (
    "import os, sys, time\n"
    "t0 = time.time(); time.sleep(float(sys.argv[2]))\n"
    "with open(sys.argv[1], 'a') as f:\n"
    "    f.write(f\"{sys.argv[3]} {os.environ.get('BERTH_GPUS')} {t0} {time.time()}\\n\")\n"
    "print('job', sys.argv[3], 'ran on GPU', os.environ['CUDA_VISIBLE_DEVICES'])\n"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=int, default=4, metavar="N", help="logical GPUs (default 4)")
    p.add_argument("--skip-queue", action="store_true", help="leave out the queue daemon part")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")


class Tour:
    def __init__(self, root: str, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.berth = [sys.executable, "-m", "berth.cli.main"]

    def say(self, text: str = "") -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def show(
        self, args: Sequence[str], *, ok: Sequence[int] = (0,), shown: str | None = None
    ) -> str:
        self.say(f"\n$ berth {shown or shlex.join(args)}")
        done = subprocess.run(
            [*self.berth, *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        out = (done.stdout + done.stderr).rstrip()
        if out:
            self.say("  " + out.replace("\n", "\n  "))
        if done.returncode not in ok:
            raise RuntimeError(f"`berth {shlex.join(args)}` exited with {done.returncode}")
        return done.stdout

    def job(self, record: str, seconds: float, label: str) -> list[str]:
        return [sys.executable, "-c", _JOB, record, str(seconds), label]

    def runs(self, title: str, specs: Sequence[tuple[str, Sequence[str]]], seconds: float) -> None:
        """Start several `berth run` at once and show when each ran where."""
        record = os.path.join(self.root, f"timeline-{len(os.listdir(self.root))}.txt")
        self.say(f"\n{title}")
        procs = []
        for label, opts in specs:
            cmd = [*opts, "--", "python", "job.py", label]
            self.say(f"$ berth run {shlex.join(cmd)} &")
            procs.append(
                subprocess.Popen(
                    [*self.berth, "run", *opts, "--", *self.job(record, seconds, label)],
                    env=self.env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for p in procs:
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"berth run failed ({p.returncode}): {err.strip()}")
        rows: list[tuple[float, float, str, str]] = []
        with open(record) as f:
            for line in f:
                label, gpus, t_start, t_end = line.split()
                rows.append((float(t_start), float(t_end), label, gpus))
        t0 = min(r[0] for r in rows)
        self.say("  job  GPU  ran from -> to (s)")
        for start, end, label, gpus in sorted(rows):
            bar = " " * int((start - t0) * 10) + "#" * max(1, int((end - start) * 10))
            self.say(f"  {label:>3}  {gpus:<4} {start - t0:5.2f} -> {end - t0:5.2f}  {bar}")


def _has_driver() -> bool:
    try:
        read_gpus(process_details=False)
    except NvmlUnavailable:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.gpus <= 64:
        raise UsageError(f"--gpus {args.gpus}: the demo takes 1 to 64 logical GPUs")
    root = tempfile.mkdtemp(prefix="berth-demo-")
    config = os.path.join(root, "config.toml")
    with open(config, "w") as f:
        f.write(f'[inventory]\ngpus = {args.gpus}\nmemory = "80G"\nname = "logical GPU"\n')
    env = dict(os.environ)
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        env.pop(var, None)
    private = {
        "BERTH_CONFIG": config,
        "BERTH_CLAIMS_DIR": os.path.join(root, "claims"),
        "BERTH_STATE_DIR": os.path.join(root, "state"),
        "BERTH_SOCKET": os.path.join(root, "berth.sock"),
    }
    tour = Tour(root, {**env, **private})
    try:
        if _has_driver():
            tour.say("berth demo: this machine has an NVIDIA driver. Its GPUs, read through NVML:")
            Tour(root, env).show(["status"])
            tour.say(
                f"\nThe rest of the tour claims GPUs, so it runs on {args.gpus} logical GPUs in a"
                " private ledger and does not touch this server's GPUs."
            )
        else:
            tour.say(
                "berth demo: no NVIDIA driver here (libnvidia-ml.so.1 could not be loaded), so"
                f" this tour runs on a declared inventory of {args.gpus} logical GPUs of 80 GiB"
                " (no telemetry: they are chosen on claims alone). On a GPU server berth reads"
                " the real GPUs through NVML; see `berth help config` to declare an inventory."
            )
        _tour(tour, args)
    finally:
        if args.keep:
            tour.say(f"\n(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _tour(tour: Tour, args: argparse.Namespace) -> None:
    n = args.gpus
    tour.say("\n1. See the GPUs, and pick idle ones for a shell command.")
    tour.show(["status"])
    tour.show(["select", "-n", str(min(2, n))])

    jobs = 2 * n + 2
    tour.runs(
        f"\n2. {jobs} commands want one GPU each, all at once. berth run waits for a free GPU,"
        " claims it, runs the command and releases it the moment it ends: never two on one"
        " GPU, no idle gaps, no lock files to clean up.",
        [(str(i + 1), ["-g", "1"]) for i in range(jobs)],
        0.6,
    )
    tour.runs(
        "\n3. Shares: two jobs that each need half a GPU and 30 GiB fit together on one GPU.",
        [("a", ["-g", "0.5", "--mem", "30G"]), ("b", ["-g", "0.5", "--mem", "30G"])],
        0.6,
    )
    if not args.skip_queue:
        _queue(tour)
    tour.say(
        "\nThat was berth. Next: `berth help`, and `with berth.acquire(gpus=1) as lease:` in"
        " Python (README.md)."
    )


def _queue(tour: Tour) -> None:
    tour.say(
        "\n4. The queue: a daemon runs submitted jobs as GPUs free up, keeps them durable across"
        " crashes, and starts the next job within milliseconds of a GPU freeing."
    )
    me = str(os.getpid())  # the demo's daemon goes with the demo, come what may
    tour.show(["daemon", "--exit-with", me], shown=f"daemon --exit-with {me}   # this demo")
    try:
        record = os.path.join(tour.root, "queue.txt")
        for i in range(5):
            opts = ["-J", f"train-{i}", "-g", "2" if i == 0 else "1"]
            if i == 4:
                opts += ["-p", "10"]
            tour.say(f"$ berth submit {shlex.join(opts)} -- python job.py q{i}")
            subprocess.run(
                [*tour.berth, "submit", *opts, "--", *tour.job(record, 1.0, f"q{i}")],
                env=tour.env, capture_output=True, text=True, check=True, timeout=30,
            )  # fmt: skip
        tour.show(["queue"])
        tour.say("  (train-4 has priority 10: it runs before train-3, which was submitted earlier)")
        tour.show(
            ["submit", "--wait", "-J", "last", "--", sys.executable, "-c", "print('done')"],
            shown="submit --wait -J last -- python -c \"print('done')\"",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the queue is empty
            listed = subprocess.run(
                [*tour.berth, "queue", "--json"], env=tour.env, capture_output=True, text=True
            )
            if '"jobs":[]' in listed.stdout:
                break
            time.sleep(0.2)
        tour.show(["queue", "--all"])
    finally:
        subprocess.run(
            [*tour.berth, "daemon", "--stop"], env=tour.env, capture_output=True, timeout=60
        )
