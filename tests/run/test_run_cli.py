"""`berth run`: environment, exit codes, output files, signals, kill -9, --only/--prefer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers import wait_until

from berth.api.lease import build_request, claim
from berth.claims.ledger import Ledger


def popen(fake_gpus: Any, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", *args],
        env=fake_gpus.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def events(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_environment_and_exit_code(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    script = (
        'echo "$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|$BERTH_GPUS|$BERTH_GPU_UUIDS|$GPU"; exit 7'
    )
    r = fake_gpus.berth("run", "-g", "2", "--only", "1,3", "--gpu-var", "--", "sh", "-c", script)
    assert r.returncode == 7, r.stderr
    cvd, order, ids, uuids, gpu = r.stdout.strip().split("|")
    assert sorted(cvd.split(",")) == ["1", "3"] and ids == cvd
    assert order == "PCI_BUS_ID" and gpu == "cuda:0"
    by_index = fake_gpus.uuids
    assert uuids.split(",") == [by_index[int(i)] for i in cvd.split(",")]
    assert Ledger().scan().claims == []  # released when the command ended


def test_output_files_and_verbose_summary(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=1)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    r = fake_gpus.berth(
        "run", "-v", "-o", str(out), "-e", str(err), "--", "sh", "-c", "echo hello; echo oops >&2"
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "hello\n" and err.read_text() == "oops\n"
    assert r.stdout == ""
    summary = r.stderr.strip().splitlines()[-1]
    assert summary.startswith("berth run: pid ") and "on GPU 0" in summary
    assert "started " in summary and "ran 0:0" in summary and summary.endswith("exit status 0")


def test_command_not_found_and_no_command(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    r = fake_gpus.berth("run", "--", "no-such-command-berth")
    assert r.returncode == 127 and "command not found" in r.stderr
    r = fake_gpus.berth("run")
    assert r.returncode == 2 and "no command" in r.stderr
    r = fake_gpus.berth("run", "-g", "1.5", "--", "true")
    assert r.returncode == 2 and "-g/--gpus = '1.5': must be a whole number of GPUs" in r.stderr
    assert Ledger().scan().claims == []


def test_ctrl_c_is_forwarded_to_the_command(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=1)
    record = tmp_path / "rec.jsonl"
    p = popen(fake_gpus, "--", *fake_gpus.workload_cmd("--record", str(record)))
    try:
        wait_until(lambda: events(record), timeout=15, message="the command to start")
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=10)
        assert p.returncode == 128 + signal.SIGINT, err
        assert events(record)[-1] == {**events(record)[-1], "event": "end", "signal": signal.SIGINT}
        assert Ledger().scan().claims == []
    finally:
        p.kill()


def test_sigterm_of_the_command_gives_128_plus_signal(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    r = fake_gpus.berth("run", "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + signal.SIGTERM


def test_kill_9_of_berth_run_keeps_the_claim_until_the_command_ends(
    fake_gpus: Any, tmp_path: Path
) -> None:
    fake_gpus.setup(n=1)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    holder = popen(
        fake_gpus, "--", *fake_gpus.workload_cmd("--record", str(first)), start_new_session=True
    )
    start = wait_until(lambda: events(first), timeout=15, message="the first command")[0]
    waiter = popen(
        fake_gpus,
        "--poll",
        "60",
        "--",
        *fake_gpus.workload_cmd("--seconds", "0", "--record", str(second)),
    )
    try:
        wait_until(lambda: Ledger().scan().waiters, timeout=15, message="the second to wait")
        os.kill(holder.pid, signal.SIGKILL)  # berth run dies; its command runs on
        holder.wait()
        (c,) = Ledger().scan().claims
        assert start["pid"] in c.pids
        assert waiter.poll() is None and not events(second)
        killed = time.time()
        os.kill(start["pid"], signal.SIGKILL)  # now the command: the GPU is free at once
        began = wait_until(lambda: events(second), timeout=5, message="the waiter to start")[0]
        assert began["time"] - killed < 1.0
        assert waiter.wait(timeout=10) == 0
    finally:
        for pid in [e["pid"] for e in events(first) + events(second)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in (holder, waiter):
            p.kill()
            p.communicate(timeout=10)


def test_only_waits_for_that_gpu_and_prefer_takes_it_if_free(fake_gpus: Any) -> None:
    fake_gpus.setup(n=3)
    lease, _ = claim(build_request(1, only="2"), timeout=0)
    p = popen(fake_gpus, "--only", "2", "--", "sh", "-c", "echo $BERTH_GPUS")
    wait_until(lambda: Ledger().scan().waiters, timeout=15, message="berth run --only 2 to wait")
    assert p.poll() is None
    lease.release()
    out, err = p.communicate(timeout=10)
    assert out == "2\n", err
    r = fake_gpus.berth("run", "--prefer", "1", "--", "sh", "-c", "echo $BERTH_GPUS")
    assert r.stdout == "1\n"
    held, _ = claim(build_request(1, only="1"), timeout=0)
    r = fake_gpus.berth("run", "--prefer", "1", "--", "sh", "-c", "echo $BERTH_GPUS")
    assert r.stdout in ("0\n", "2\n")  # 1 is taken: another GPU, no waiting
    held.release()


def test_timeout_exits_6_and_says_why(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    lease, _ = claim(build_request(1), timeout=0)
    r = fake_gpus.berth("run", "--timeout", "0.2", "--", "true")
    assert r.returncode == 6
    assert "waited 0.2 s for 1 GPU; best seen: no GPU qualifies" in r.stderr
    assert "GPU 0: held by berth claims" in r.stderr
    lease.release()


def test_a_script_under_berth_run_may_claim_its_own_gpus(fake_gpus: Any) -> None:
    """berth run -> a script that claims itself (acquire, GPU Scheduler's GPUScheduler): it works
    under berth run's lease instead of waiting for itself for ever."""
    fake_gpus.setup(n=2)
    script = (
        "import os, berth\n"
        "from berth.compat.gpu_scheduler import GPUScheduler\n"
        "with berth.acquire(timeout=5) as lease:\n"
        "    print(lease.ids, lease.devices)\n"
        "with GPUScheduler(max_wait_time=5, power_threshold_w=None) as ids:\n"
        "    print(ids, os.environ['CUDA_VISIBLE_DEVICES'])\n"
    )
    r = fake_gpus.berth("run", "--only", "1", "--", sys.executable, "-c", script)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[1] ['cuda:0']\n[0] 1\n"
    # A lease held by a process that is not an ancestor is not inherited, whatever the
    # environment says.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import berth,sys; l=berth.acquire(only='1'); print(l.lease_id, flush=True); sys.stdin.read()"],
        env=fake_gpus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        env = {"BERTH_LEASE": holder.stdout.readline().strip()}
        r = fake_gpus.berth("run", "--only", "1", "--timeout", "0.2", "--", "true", env=env)
        assert r.returncode == 6, r.stderr
    finally:
        holder.kill()
        holder.communicate()


def test_berth_release_ends_a_berth_run_and_its_command(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=2)
    record = tmp_path / "rec.jsonl"
    polite = popen(fake_gpus, "--only", "0", "--", *fake_gpus.workload_cmd("--record", str(record)))
    stubborn = popen(
        fake_gpus, "--only", "1", "--", *fake_gpus.workload_cmd("--ignore-term", "--record", str(record))
    )  # fmt: skip
    try:
        wait_until(lambda: len(events(record)) == 2, timeout=15, message="both commands")
        r = fake_gpus.berth("release", "0", "--yes")
        assert r.returncode == 0 and "ended 1 claim(s)\n" in r.stdout, r.stderr
        assert polite.wait(timeout=10) == 128 + signal.SIGTERM
        r = fake_gpus.berth("release", "1", "--yes", "--grace", "0.3")
        assert r.returncode == 0 and "needed SIGKILL" in r.stdout, r.stdout + r.stderr
        stubborn.wait(timeout=10)
        assert Ledger().scan().claims == []
        r = fake_gpus.berth("release", "1", "--yes")
        assert r.returncode == 0 and "no claims on 1" in r.stdout
    finally:
        for p in (polite, stubborn):
            p.kill()
            p.communicate(timeout=10)
        for e in events(record):
            try:
                os.kill(e["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
