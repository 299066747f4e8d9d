"""berth inside a Slurm allocation: `berth daemon --inside-slurm` in a batch job of the test
Slurm packs small jobs onto the allocation's GPUs, and only those; `berth` commands run in the
allocation (here through `srun --jobid --overlap`) find that daemon by themselves."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until

from berth.backends.slurm import Slurm
from berth.client import Client
from berth.wire.jobspec import JobSpec

RECORD = 'echo "$CUDA_VISIBLE_DEVICES $(date +%s.%N)"; sleep 0.3; date +%s.%N'


class Allocation:
    """A batch job running `berth daemon --inside-slurm --foreground` on ``gpus`` GPUs."""

    def __init__(self, slurm: Any, fake_gpus: Any) -> None:
        self.slurm = slurm
        self.root = str(fake_gpus.root)
        env = {**fake_gpus.env, **slurm.env}
        for name in ("BERTH_SOCKET", "BERTH_STATE_DIR"):
            env.pop(name, None)  # the allocation's own, found by every command inside it
        # The allocation's berth dir is $TMPDIR/berth-UID/slurm-JOB, and every test cluster
        # numbers its jobs from 1: a TMPDIR of this test's own (short: a socket path).
        self.tmp = tempfile.mkdtemp(prefix="bal-", dir="/tmp")
        env["TMPDIR"] = self.tmp
        # A user who sends jobs to Slurm by default: inside the allocation, berth commands
        # still go to the allocation's own daemon.
        env["BERTH_BACKEND"] = "slurm"
        self.env = env
        self.backend = Slurm(log_dir=os.path.join(self.root, "slurm-logs"))
        self.job = ""
        self.dir = ""

    def start(self, gpus: int, background: bool = False) -> None:
        """``background``: as a user's script does, `berth daemon --inside-slurm --exit-with
        $$` (it forks away from the batch job's process tree), then the script's own work."""
        argv = [sys.executable, "-m", "berth.cli.main", "daemon", "--inside-slurm"]
        if background:
            argv = ["bash", "-c", shlex.join(argv) + " --exit-with $$ && exec sleep 300"]
        spec = {"argv": argv if background else [*argv, "--foreground"],
                "env": self.env, "cwd": self.root, "gpus": gpus, "name": "alloc"}  # fmt: skip
        self.job = self.backend.submit(JobSpec.from_dict(spec)).id
        self.dir = os.path.join(self.tmp, f"berth-{os.getuid()}", f"slurm-{self.job}")
        sock = os.path.join(self.dir, "daemon.sock")
        log = self.backend.logs(self.job)[0]

        def answers() -> bool:
            info = self.backend.status([self.job]).get(self.job)
            if info is not None and info.finished:
                raise AssertionError(f"the allocation ended: {open(log).read()}")
            try:
                with Client(sock, timeout=2) as c:
                    c.call("ping")
                return True
            except Exception:
                return False

        wait_until(answers, timeout=30, interval=0.05, message="the allocation's berth daemon")

    def berth(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`berth ARGS` inside the allocation: a step of its job, as a user's shell would be."""
        return subprocess.run(
            ["srun", f"--jobid={self.job}", "--overlap", "-n1", "--gres=none",
             sys.executable, "-m", "berth.cli.main", *args],
            env=self.env, cwd=self.root, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip

    def client(self) -> Client:
        return Client(os.path.join(self.dir, "daemon.sock"))

    def cleanup(self) -> None:
        """After a failure: the daemon's supervisors and jobs may have outlived the job."""
        run_dir = os.path.join(self.dir, "state", "run")
        if os.path.isdir(run_dir):
            from berth.daemon.supervisor.runfile import read_run_file

            for name in os.listdir(run_dir):
                if name.replace(".", "").isdigit():
                    info = read_run_file(os.path.join(run_dir, name))
                    for key, kill in (("job", os.killpg), ("sup", os.kill)):
                        if info.get(key):
                            try:
                                kill(info[key], signal.SIGKILL)
                            except (ProcessLookupError, PermissionError):
                                pass
        from berth.daemon.procs.cgroup import remove_all

        remove_all(os.path.join(self.dir, "state"))  # (its supervisors' cgroups, as root)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture
def allocation(slurm: Any, fake_gpus: Any) -> Iterator[Allocation]:
    fake_gpus.setup(n=4)
    alloc = Allocation(slurm, fake_gpus)
    try:
        yield alloc
    finally:
        slurm.clear()
        alloc.cleanup()


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def _runs(paths: list[str]) -> list[tuple[str, float, float]]:
    out = []
    for p in paths:
        with open(p) as f:
            first, end = f.read().split("\n")[:2]
        gpu, start = first.split(" ")
        out.append((gpu, float(start), float(end)))
    return out


def _peak(runs: list[tuple[str, float, float]]) -> int:
    events = sorted([(s, 1) for _, s, _ in runs] + [(e, -1) for _, _, e in runs])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def test_40_half_gpu_jobs_run_8_at_a_time_in_one_allocation_of_4(
    allocation: Allocation,
) -> None:
    allocation.start(gpus=4)
    jobs = os.path.join(allocation.root, "jobs.txt")
    with open(jobs, "w") as f:
        f.write("".join(f"sh -c '{RECORD}'\n" for _ in range(40)))
    out = os.path.join(allocation.root, "out-%j.txt")
    sub = allocation.berth("submit", "--parsable", "-g", "0.5", "-o", out, "--file", jobs)
    assert sub.returncode == 0, sub.stderr
    ids = [int(i) for i in sub.stdout.split()]
    assert len(ids) == 40
    with allocation.client() as c:
        for i in ids:
            wait_until(lambda i=i: c.call("wait", job_id=i, timeout=5.0)["finished"],
                       timeout=60, message=f"job {i}")  # fmt: skip
        rows = {r["id"]: r for r in c.call("queue", all=True)["jobs"]}
    assert [rows[i]["state"] for i in ids] == ["COMPLETED"] * 40
    runs = _runs([out.replace("%j", str(i)) for i in ids])
    assert _peak(runs) == 8
    for gpu in "0123":
        assert _peak([r for r in runs if r[0] == gpu]) == 2
    assert {r[0] for r in runs} == {"0", "1", "2", "3"}


def test_the_daemon_uses_only_the_allocations_gpus(allocation: Allocation) -> None:
    blocker = allocation.backend.submit(JobSpec.from_dict(
        {"argv": ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 60"], "env": allocation.env,
         "cwd": allocation.root, "gpus": 1}
    ))  # fmt: skip
    taken = wait_until(
        lambda: _text(allocation.backend.logs(blocker.id)[0]),
        timeout=20, message="another job holds a GPU",
    )  # fmt: skip
    allocation.start(gpus=2)  # Slurm gives it 2 of the 3 GPUs left
    out = os.path.join(allocation.root, "o-%j.txt")
    ids = [
        int(allocation.berth("submit", "--parsable", "-o", out, "--", "sh", "-c", RECORD).stdout)
        for _ in range(6)
    ]
    with allocation.client() as c:
        for i in ids:
            wait_until(lambda i=i: c.call("wait", job_id=i, timeout=5.0)["finished"],
                       timeout=60, message=f"job {i}")  # fmt: skip
    runs = _runs([out.replace("%j", str(i)) for i in ids])
    used = {r[0] for r in runs}
    assert len(used) == 2 and taken not in used and used <= {"0", "1", "2", "3"}
    assert _peak(runs) == 2  # one whole-GPU job per GPU of the allocation at a time


def test_outside_an_allocation_it_refuses(fake_gpus: Any) -> None:
    env = {k: v for k, v in fake_gpus.env.items() if not k.startswith("SLURM_")}
    fake_gpus.setup(n=4)
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--inside-slurm", "--foreground"],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "not inside a Slurm allocation (no SLURM_JOB_ID)" in out.stderr
    no_gpus = {**env, "SLURM_JOB_ID": "7"}
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--inside-slurm", "--foreground"],
        env=no_gpus, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and "Slurm job 7 has no GPUs" in out.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # (gone between the open and the read)
        return False


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
def test_the_allocations_end_ends_its_jobs_whatever_the_proctrack(
    allocation: Allocation, background: bool
) -> None:
    """Slurm ends the allocation with SIGTERM (SIGKILL after KillWait): the daemon ends its
    jobs then, even on proctrack/linuxproc (the rig's), which does not follow a process that
    left the batch job's tree; and says so in its log without a traceback."""
    allocation.start(gpus=1, background=background)
    pid_file = os.path.join(allocation.root, "job.pid")
    sub = allocation.berth("submit", "--parsable", "--", "sh", "-c",
                           f"echo $$ > {pid_file}; exec sleep 300")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    pid = int(wait_until(lambda: _text(pid_file), timeout=30, message="the job runs"))
    log = allocation.backend.logs(allocation.job)[0]
    waiter = subprocess.Popen(  # a client waiting on the daemon when it stops
        ["srun", f"--jobid={allocation.job}", "--overlap", "-n1", "--gres=none",
         sys.executable, "-m", "berth.cli.main", "wait", sub.stdout.strip()],
        env=allocation.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def steps() -> str:
        return subprocess.run(["squeue", "-h", "-s", "-j", allocation.job, "-o", "%i"],
                              env=allocation.env, capture_output=True, text=True).stdout  # fmt: skip

    wait_until(lambda: f"{allocation.job}." in steps(), timeout=20, message="the waiter runs")
    subprocess.run(["scancel", allocation.job], env=allocation.env, check=True)
    wait_until(lambda: not _alive(pid), timeout=30, message="the job ended with the allocation")
    wait_until(lambda: allocation.backend.status([allocation.job])[allocation.job].finished,
               timeout=30, message="the allocation ended")  # fmt: skip
    waiter.wait(timeout=30)
    daemon_log = os.path.join(allocation.dir, "state", "daemon.log")  # (in the background)
    said = open(log).read() + (_text(daemon_log) if background else "")
    assert "the allocation ends: ending " in said, said  # (Slurm may have been first)
    assert "Traceback" not in said and "CancelledError" not in said, said


def test_the_allocations_end_with_jobs_queued_and_clients_attached_says_no_traceback(
    allocation: Allocation,
) -> None:
    """Issue 22.2 again, harder: scancel of an allocation whose daemon (in the background,
    its own log) runs 4 jobs and has 4 more waiting, a `wait` and a `logs -f` attached: its
    jobs end, and its log says so without a traceback (nor an unhandled CancelledError)."""
    allocation.start(gpus=1, background=True)
    ids = []
    for _ in range(8):  # a quarter of the GPU each: 4 run, 4 wait
        sub = allocation.berth("submit", "--parsable", "-g", "0.25", "--",
                               "sh", "-c", "echo ready; exec sleep 300")  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        ids.append(sub.stdout.strip())

    def running() -> int:
        with allocation.client() as c:
            return sum(j["state"] == "RUNNING" for j in c.call("queue", all=True)["jobs"])

    wait_until(lambda: running() == 4, timeout=30, message="4 jobs run")
    followed = os.path.join(allocation.root, "followed.txt")
    with open(followed, "w") as out:
        step = ["srun", f"--jobid={allocation.job}", "--overlap", "-n1", "--gres=none",
                sys.executable, "-m", "berth.cli.main"]  # fmt: skip
        attached = [
            subprocess.Popen([*step, *args], env=allocation.env, stdout=out, stderr=out)
            for args in (["wait", ids[0]], ["logs", "-f", ids[1]])
        ]
    wait_until(lambda: "ready" in _text(followed), timeout=30, message="logs -f follows")
    allocation.slurm.run("scancel", allocation.job)
    wait_until(lambda: allocation.backend.status([allocation.job])[allocation.job].finished,
               timeout=30, message="the allocation ended")  # fmt: skip
    for p in attached:
        p.wait(timeout=30)
    said = _text(os.path.join(allocation.dir, "state", "daemon.log"))
    assert "the allocation ends: ending 8 job(s)" in said, said
    assert "Traceback" not in said and "CancelledError" not in said, said


def test_inside_the_allocation_its_daemon_wins_over_an_exported_berth_socket(
    allocation: Allocation,
) -> None:
    outside = os.path.join(allocation.tmp, "outside.sock")  # a daemon outside the allocation
    allocation.env["BERTH_SOCKET"] = outside
    allocation.start(gpus=1)
    assert os.path.exists(os.path.join(allocation.dir, "daemon.sock")) and not os.path.exists(
        outside
    )
    sub = allocation.berth("submit", "--parsable", "--", "true")
    assert sub.returncode == 0, sub.stderr
    with allocation.client() as c:
        assert int(sub.stdout) in {r["id"] for r in c.call("queue", all=True)["jobs"]}


def test_the_salloc_recipe_runs_on_the_allocations_gpus(allocation: Allocation) -> None:
    """`salloc --gres=gpu:2 bash -c 'berth daemon --inside-slurm --exit-with $$ && ...'`: the
    shell salloc runs is in no step (no CUDA_VISIBLE_DEVICES, no SLURM_JOB_GPUS): the daemon
    reads the allocation's GPUs from the controller."""
    berth = shlex.join([sys.executable, "-m", "berth.cli.main"])
    out = os.path.join(allocation.root, "salloc-%j.txt")
    script = (f"{berth} daemon --inside-slurm --exit-with $$ && "
              f"{berth} submit --wait -g 2 -o {out} -- sh -c 'echo $CUDA_VISIBLE_DEVICES'")  # fmt: skip
    done = subprocess.run(["salloc", "--gres=gpu:2", "bash", "-c", script], env=allocation.env,
                          cwd=allocation.root, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    gpus = _text(out.replace("%j", "1")).split(",")
    assert len(gpus) == 2 and set(gpus) <= {"0", "1", "2", "3"}


def test_an_ended_allocations_directory_goes_when_the_next_daemon_starts(
    allocation: Allocation,
) -> None:
    base = os.path.join(allocation.tmp, f"berth-{os.getuid()}")
    left = os.path.join(base, "slurm-9999", "state")  # an allocation Slurm no longer runs
    os.makedirs(left, mode=0o700)
    os.chmod(base, 0o700)
    allocation.start(gpus=1)
    assert not os.path.exists(os.path.dirname(left))
    assert os.path.exists(os.path.join(allocation.dir, "daemon.sock"))
