"""Enforcement (issue 25) with the fake NVML: the daemon classes every GPU process at each
poll, shows what it found (`status`), and applies the config's [enforce] policy: notify,
kill after a grace (only the process classed, SIGTERM then SIGKILL), cancel the job that
overran (never its neighbour), release idle holders; every action in the audit log that
`berth admin log` reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from helpers import wait_until

G = 1 << 30


def _configure(daemon: Any, text: str) -> None:
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write(text)
    daemon.env["BERTH_CONFIG"] = path


def _view(daemon: Any) -> dict[str, Any]:
    view: dict[str, Any] = daemon.call("status")["enforce"]
    return view


def _finding(daemon: Any, pid: int) -> dict[str, Any] | None:
    return next((f for f in _view(daemon)["findings"] if f["pid"] == pid), None)


def _log(daemon: Any) -> list[dict[str, Any]]:
    out = daemon.berth("admin", "log", "--json")
    assert out.returncode == 0, out.stderr
    entries: list[dict[str, Any]] = json.loads(out.stdout)["entries"]
    return entries


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _running(daemon: Any, job: int) -> None:
    wait_until(lambda: daemon.job(job)["state"] == "RUNNING", message=f"job {job} runs")


def test_by_default_every_class_is_shown_and_nothing_is_done(daemon):
    daemon.fake.setup(n=2)
    daemon.start("--poll-interval", "0.2", gpus=None)
    job = daemon.submit(*daemon.workload("--mem", "1G"), gpu_ids=[0])
    _running(daemon, job)
    intruder = daemon.fake.spawn_workload(visible="0", mem="2G")
    outsider = daemon.fake.spawn_workload(visible="1", mem="3G")
    seen = wait_until(lambda: _finding(daemon, intruder.pid), timeout=5, message="noticed")
    assert seen["class"] == "intrusion" and seen["victim"] == f"job {job}"
    assert (seen["gpu"], seen["user"], seen["memory"]) == (0, "root", 2 * G)
    other = wait_until(lambda: _finding(daemon, outsider.pid), timeout=5, message="noticed")
    assert (other["class"], other["gpu"], other["memory"]) == ("outside", 1, 3 * G)
    first = seen["since"]
    wait_until(  # a later poll keeps since when it was first seen
        lambda: _view(daemon)["actions"] == {} and _finding(daemon, outsider.pid),
        timeout=5,
    )
    assert _finding(daemon, intruder.pid)["since"] == first
    # No finding of the job's own process; nothing done to anyone.
    assert {f["pid"] for f in _view(daemon)["findings"]} == {intruder.pid, outsider.pid}
    assert _log(daemon) == []
    assert intruder.poll() is None and outsider.poll() is None
    text = daemon.berth("status").stdout
    assert f"INTRUDES on job {job}: pid {intruder.pid} of root" in text
    assert f"outside berth: pid {outsider.pid} of root" in text
    shown = json.loads(daemon.berth("status", "--json").stdout)["queue"]["enforce"]
    assert {(f["class"], f["pid"]) for f in shown["findings"]} == {
        ("intrusion", intruder.pid),
        ("outside", outsider.pid),
    }


def test_an_intruder_is_notified_then_killed_after_grace_and_only_it(daemon):
    _configure(daemon, '[enforce]\nintrusion = "kill"\ngrace = 1\n')
    daemon.fake.setup(n=2)
    daemon.start("--poll-interval", "0.2", "--kill-after", "1", gpus=None)
    told = os.path.join(daemon.fake.root, "told.txt")
    hook = f'[ -n "$BERTH_ENFORCE" ] && echo "$BERTH_ENFORCE" >> {told}; true'
    terminal = os.path.join(daemon.fake.vars["BERTH_PTS_DIR"], "7")  # (root's "terminal")
    os.makedirs(os.path.dirname(terminal), exist_ok=True)
    open(terminal, "w").close()
    job = daemon.submit(*daemon.workload("--mem", "1G"), gpu_ids=[0], notify=hook)
    _running(daemon, job)
    bystander = daemon.fake.spawn_workload(visible="1", mem="1G")  # outside: observed
    intruder = daemon.fake.spawn_workload(visible="0", mem="2G", args=["--ignore-term"])
    wait_until(lambda: _finding(daemon, intruder.pid), timeout=5, message="noticed")
    intruder.wait(timeout=20)
    assert intruder.returncode == -signal.SIGKILL  # it ignored SIGTERM
    assert bystander.poll() is None
    assert daemon.job(job)["state"] == "RUNNING"
    log = _log(daemon)
    assert {e["pid"] for e in log} == {intruder.pid}
    steps = [(e["action"], e.get("signal")) for e in log]
    assert steps == [("notify", None), ("signal", "SIGTERM"), ("signal", "SIGKILL")]
    notify, term, kill = (e["time"] for e in log)
    assert term - notify >= 1.0 and kill - term >= 1.0  # the grace, then --kill-after
    assert log[0]["victim"] == f"job {job}" and log[0]["class"] == "intrusion"
    text = daemon.berth("admin", "log").stdout
    assert "signal intrusion SIGKILL  GPU 0  pid" in text
    # The holder was told through its job's --notify.
    said = wait_until(lambda: _text(told), message="told")
    assert f"process {intruder.pid} of root uses GPU 0" in said
    # ... and the intruder's owner on their terminals, as `write` does (here: the fake ones)
    assert f"process {intruder.pid}" in _text(terminal)


def test_an_overrun_cancels_the_job_that_overran_not_its_neighbour(daemon):
    _configure(daemon, '[enforce]\noverrun = "kill"\ngrace = 0\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    greedy = daemon.submit(*daemon.workload("--mem", "30G"), gpus=0.5, mem=10 * G)
    modest = daemon.submit(*daemon.workload("--mem", "9G"), gpus=0.5, mem=10 * G)
    rows = daemon.wait_done([greedy], timeout=20)
    assert rows[greedy]["state"] == "CANCELLED"
    assert daemon.job(modest)["state"] == "RUNNING"
    log = _log(daemon)
    assert [(e["action"], e["class"], e.get("job")) for e in log] == [
        ("notify", "overrun", None),
        ("cancel", "overrun", greedy),
    ]
    assert log[0]["declared"] == 10 * G and log[0]["victim"] == f"job {modest}"


def test_an_idle_job_is_flagged_notified_then_released_with_the_reason(daemon):
    _configure(daemon, '[enforce]\nidle = "release"\nidle_after = 1\nidle_grace = 1\n')
    daemon.fake.setup(n=2)
    daemon.start("--poll-interval", "0.2", gpus=None)
    told = os.path.join(daemon.fake.root, "told.txt")
    hook = f'[ -n "$BERTH_ENFORCE" ] && echo "$BERTH_ENFORCE" >> {told}; true'
    sleeper = daemon.submit(
        *daemon.workload("--mem", "1G", "--util", "0"), gpu_ids=[0], notify=hook
    )
    worker = daemon.submit(*daemon.workload("--mem", "1G", "--util", "60"), gpu_ids=[1])
    flagged = wait_until(
        lambda: next((i for i in _view(daemon)["idle"] if i["holder"] == f"job {sleeper}"), None),
        timeout=10,
        message="the idle job is flagged",
    )
    assert flagged["gpus"] == [0] and flagged["idle_seconds"] >= 1.0
    rows = daemon.wait_done([sleeper], timeout=20)
    assert rows[sleeper]["state"] == "CANCELLED"
    assert daemon.job(worker)["state"] == "RUNNING"
    log = _log(daemon)
    assert [(e["action"], e["holder"]) for e in log] == [
        ("notify", f"job {sleeper}"),
        ("cancel", f"job {sleeper}"),
    ]
    assert log[1]["reason"].startswith("idle for")
    assert log[1]["time"] - log[0]["time"] >= 1.0
    said = wait_until(lambda: _text(told), message="told")
    assert f"your job {sleeper} has held GPU(s) 0 idle" in said


def test_exempt_users_are_shown_never_acted_on(daemon):
    _configure(daemon, '[enforce]\nintrusion = "kill"\ngrace = 0\nexempt_users = ["root"]\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    job = daemon.submit(*daemon.workload("--mem", "1G"), gpu_ids=[0])
    _running(daemon, job)
    intruder = daemon.fake.spawn_workload(visible="0", mem="2G")
    seen = wait_until(lambda: _finding(daemon, intruder.pid), timeout=5, message="noticed")
    # Polls go on past the grace (0) and the kill-after: still nothing done.
    wait_until(lambda: time.time() - seen["since"] > 1.5, timeout=10)
    wait_until(lambda: _finding(daemon, intruder.pid), timeout=5)
    assert intruder.poll() is None
    assert _log(daemon) == []


def test_an_idle_berth_run_holder_gets_sigterm_and_its_claim_is_released(daemon):
    _configure(daemon, '[enforce]\nidle = "release"\nidle_after = 1\nidle_grace = 0.5\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    holder = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "-g", "1", "--",
         *daemon.workload("--mem", "1G", "--util", "0")],
        env=daemon.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        flagged = wait_until(
            lambda: next((i for i in _view(daemon)["idle"] if i["holder"].startswith("claim ")), None),
            timeout=15,
            message="the idle claim is flagged",
        )
        assert flagged["gpus"] == [0] and flagged["user"] == "root"
        holder.wait(timeout=20)
        assert holder.returncode != 0
        log = _log(daemon)
        assert [e["action"] for e in log][:2] == ["notify", "release"]
        assert log[1]["signal"] == "SIGTERM" and log[1]["holder"] == flagged["holder"]
        assert all(e["action"] != "skip" or e["pid"] != holder.pid for e in log)
        # The GPU is free: a job starts on it.
        job = daemon.submit(*daemon.workload("--seconds", "0.1"), gpu_ids=[0])
        assert daemon.wait_done([job])[job]["state"] == "COMPLETED"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_message_goes_to_the_users_own_terminals_only(tmp_path):
    from berth.daemon.engine.enforce_io import write_ttys

    mine, theirs = tmp_path / "3", tmp_path / "4"
    mine.write_text("")
    theirs.write_text("")
    os.chown(theirs, 4242, -1)
    (tmp_path / "ptmx").write_text("")  # not a terminal of anyone's
    assert write_ttys(os.getuid(), "berth: hello\nagain", pts_dir=str(tmp_path)) == 1
    assert mine.read_bytes() == b"\r\n\aberth: hello\r\nagain\r\n"
    assert theirs.read_text() == ""
    assert write_ttys(os.getuid(), "x", pts_dir=str(tmp_path / "none")) == 0


def test_a_job_may_keep_its_idle_gpus_only_where_the_admin_allows(daemon):
    _configure(
        daemon,
        '[enforce]\nidle = "release"\nidle_after = 1\nidle_grace = 0\nidle_opt_out = true\n',
    )
    daemon.fake.setup(n=2)
    daemon.start("--poll-interval", "0.2", gpus=None)
    idle_work = daemon.workload("--mem", "1G", "--util", "0")
    kept = daemon.submit(*idle_work, gpu_ids=[0], keep_idle=True)
    plain = daemon.submit(*idle_work, gpu_ids=[1])
    assert daemon.wait_done([plain], timeout=20)[plain]["state"] == "CANCELLED"
    wait_until(lambda: any(e["action"] == "skip" for e in _log(daemon)), message="kept")
    assert daemon.job(kept)["state"] == "RUNNING"
    skip = next(e for e in _log(daemon) if e["action"] == "skip")
    assert skip["holder"] == f"job {kept}" and "--keep-idle" in skip["reason"]
    assert any(i["holder"] == f"job {kept}" for i in _view(daemon)["idle"])  # still flagged


def test_a_process_is_signalled_only_if_proc_still_says_it_is_the_one_classed(tmp_path):
    """A pid is never an identity: the uid and start time read right before the signal must
    be those the process was classed with."""
    from types import SimpleNamespace

    from berth.config import Config
    from berth.core.enforce import INTRUSION, Finding
    from berth.daemon.engine.enforce_io import identity
    from berth.daemon.engine.enforcer import Enforcer

    engine = SimpleNamespace(res=SimpleNamespace(cfg=Config()), clock=SimpleNamespace(time=time.time))
    audit = str(tmp_path / "enforce.log")
    enforcer = Enforcer(engine, audit)  # type: ignore[arg-type]
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ident = identity(proc.pid)
        assert ident is not None
        uid, start = ident
        other = Finding(INTRUSION, 0, proc.pid, start + 1, uid, "root", G, None)
        assert not enforcer._signal(proc.pid, uid, start + 1, signal.SIGTERM, other)
        assert not enforcer._signal(proc.pid, uid + 1, start, signal.SIGTERM, other)
        assert proc.poll() is None  # another process than the one classed: untouched
        same = Finding(INTRUSION, 0, proc.pid, start, uid, "root", G, None)
        assert enforcer._signal(proc.pid, uid, start, signal.SIGTERM, same)
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(audit) as f:
        actions = [json.loads(line)["action"] for line in f]
    assert actions == ["skip", "skip", "signal"]


def test_a_claim_over_its_memory_loses_its_own_process_and_the_job_beside_it_runs_on(daemon):
    _configure(daemon, '[enforce]\noverrun = "kill"\ngrace = 0\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    neighbour = daemon.submit(*daemon.workload("--mem", "9G"), gpus=0.5, mem=10 * G)
    _running(daemon, neighbour)
    greedy = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "-g", "0.5", "--mem", "10G", "--",
         *daemon.workload("--mem", "30G")],
        env=daemon.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        greedy.wait(timeout=30)  # its command got SIGTERM; `berth run` ends with it
        assert greedy.returncode != 0
        log = _log(daemon)
        assert [(e["action"], e["class"], e.get("signal")) for e in log] == [
            ("notify", "overrun", None),
            ("signal", "overrun", "SIGTERM"),
        ]
        assert log[1]["holder"].startswith("claim ") and log[1]["victim"] == f"job {neighbour}"
        assert daemon.job(neighbour)["state"] == "RUNNING"
    finally:
        if greedy.poll() is None:
            greedy.kill()
            greedy.wait()
