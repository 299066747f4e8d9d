"""One JobSpec from the CLI to the launcher (berth/wire/jobspec.py): the CLI refuses what the
daemon would refuse, with the daemon's own message, before sending anything; one message for
a bad GPU count from the CLI, the API and the daemon; and jobs stored by earlier daemons (the
spec's JSON as it was written before JobSpec) load and run as they were."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

import berth
from berth.client import DaemonError
from berth.daemon.engine.admission.unique import key
from berth.errors import UsageError
from berth.units import GPU_COUNT_RULE
from berth.wire.jobspec import JobSpec

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

# What the CLI is given -> the field the daemon would refuse, as the CLI sends it. (A -t past
# the spec's 366 days is refused naming the value typed, not the seconds the daemon would be
# sent: tests/daemon/test_bad_values.py.)
BAD_INPUT = [
    (["--retries", "1000"], "retries", 1000),
    (["-p", "3000000000"], "priority", 3000000000),
    (["-g", "1.5"], "gpus", 1.5),
    (["--notify", "b" * 70000], "notify", "b" * 70000),
]


def _cli(daemon: Any, socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "submit", *args, "--", "true"],
        env={**daemon.env, "BERTH_SOCKET": socket}, capture_output=True, text=True,
        timeout=30, check=False, cwd=str(daemon.fake.root),
    )  # fmt: skip


@pytest.mark.parametrize(("args", "field", "value"), BAD_INPUT)
def test_the_cli_refuses_with_the_daemons_message_and_sends_nothing(
    daemon: Any, args: list[str], field: str, value: Any
) -> None:
    daemon.start()
    raw = {"argv": ["true"], "env": ENV, "cwd": str(daemon.fake.root), field: value}
    with pytest.raises(DaemonError) as refused:
        daemon.call("submit", job=raw)
    said = refused.value.args[0]
    assert field in said and said.endswith("nothing was changed")
    out = _cli(daemon, daemon.socket, *args)
    assert (out.returncode, out.stderr) == (2, f"berth: {said}\n")
    # Refused before any connection: the same answer with no daemon to ask.
    alone = _cli(daemon, os.path.join(daemon.sockdir, "nobody.sock"), *args)
    assert (alone.returncode, alone.stderr) == (2, f"berth: {said}\n")
    assert daemon.call("queue", all=True)["jobs"] == []


def test_one_message_for_a_bad_gpu_count_from_the_cli_the_api_and_the_daemon(
    daemon: Any,
) -> None:
    daemon.start()
    cli = daemon.berth("submit", "-g", "1.5", "--", "true")
    assert cli.returncode == 2 and f"= 1.5: {GPU_COUNT_RULE}" in cli.stderr
    with pytest.raises(UsageError, match=f"^gpus = 1.5: {re.escape(GPU_COUNT_RULE)}$"):
        berth.acquire(gpus=1.5, timeout=0)
    with pytest.raises(DaemonError, match=f"= 1.5: {re.escape(GPU_COUNT_RULE)}"):
        daemon.call("submit", job={"argv": ["true"], "env": ENV, "cwd": "/", "gpus": 1.5})
    assert daemon.call("queue", all=True)["jobs"] == []


# A job's spec as the daemon stored it before JobSpec (a row written by `berth submit --unique`
# through that daemon, as root, copied from its database).
OLD_ROW = {
    "argv": ["python", "train.py", "--lr", "0.1"],
    "env": {"PATH": "/usr/bin:/bin", "HOME": "/home/al"},
    "cwd": "/tmp/pytest-of-root/pytest-340/test_capture0", "gpus": 2, "mem": 8589934592,
    "gpu_ids": [0, 1, 2], "prefer": [1], "name_filter": "A100", "time_limit": 90.5,
    "priority": 5, "name": "big", "stdout": "out-%j.log", "stderr": "err-%j.log",
    "env_setup": "source venv/bin/activate", "conda": "myenv", "retries": 2, "requeue": True,
    "hold": True, "pty": True, "umask": 18, "inject_arg": "--cuda", "notify": "echo done",
    "mail_user": "al@example.org", "request_source": "llm_config.json: --llm qwen",
    "unique": True, "unique_key": "72dcf04647fefb90ee60aabb643ebcb8",
    "pty_dir": "/tmp/pytest-of-root/pytest-340/test_capture0/state/logs/root",
    "stdout_path": "/tmp/pytest-of-root/pytest-340/test_capture0/out-1.log",
    "stderr_path": "/tmp/pytest-of-root/pytest-340/test_capture0/err-1.log",
}  # fmt: skip


def test_a_row_of_an_earlier_daemon_reads_back_whole_with_its_unique_identity() -> None:
    spec = JobSpec.from_dict(OLD_ROW, stored=True)
    assert spec.to_dict() == OLD_ROW
    assert (spec.gpu_ids, spec.stdout_path, spec.umask) == ((0, 1, 2), OLD_ROW["stdout_path"], 18)
    # The --unique identity it was stored with is the one computed today (uid 0: root's).
    assert key(0, spec) == OLD_ROW["unique_key"]


def test_rows_in_the_earlier_format_load_and_run(daemon: Any) -> None:
    daemon.start()
    root = str(daemon.fake.root)
    ids = [daemon.submit("true", hold=True) for _ in range(3)]
    daemon.stop()
    a, b, c = ids
    rows = {
        a: {"argv": ["sh", "-c", 'echo "$FOO $BERTH_JOB_ID $BERTH_ATTEMPT"; echo err >&2'],
            "env": {**ENV, "FOO": "bar"}, "cwd": root, "gpus": 1, "gpu_ids": [0, 1],
            "prefer": [1], "time_limit": 60, "priority": 5, "name": "old", "stdout": "o-%j.log",
            "stderr": "e-%j.log", "env_setup": "export FOO=baz", "retries": 1, "requeue": True,
            "hold": True, "umask": 18, "request_source": "llm_config.json: --llm x",
            "unique": True, "unique_key": "72dcf04647fefb90ee60aabb643ebcb8",
            "stdout_path": f"{root}/o-{a}.log", "stderr_path": f"{root}/e-{a}.log"},
        b: {"argv": ["sh", "-c", "echo task $BERTH_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID, "
                     "$BERTH_ARRAY_TASK_COUNT, id $BERTH_JOB_ID"],
            "env": ENV, "cwd": root, "gpus": 1, "hold": True, "umask": 18,
            "stdout_path": f"{root}/b.out", "stderr_path": f"{root}/b.out",
            "array_task": [b, 3, 5, 1, 9]},
        c: {"wrap": "echo wrapped on $CUDA_VISIBLE_DEVICES", "env": ENV, "cwd": root,
            "gpus": 0.5, "hold": True, "once": "line-7", "after_ok": [], "umask": 18,
            "unique_key": "c9af6fc4ee3d810f3597a6a4d5dd81a9", "stdout_path": f"{root}/c.out",
            "stderr_path": f"{root}/c.out"},
    }  # fmt: skip
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"))
    for job_id, spec in rows.items():
        db.execute("UPDATE jobs SET spec = ? WHERE id = ?", (json.dumps(spec), job_id))
    db.commit()
    db.close()

    daemon.start()
    shown = daemon.job(a)
    assert shown["command"] == rows[a]["argv"] and shown["cwd"] == root
    assert (shown["stdout"], shown["stderr"]) == (f"{root}/o-{a}.log", f"{root}/e-{a}.log")
    assert (shown["env_setup"], shown["request_source"]) == (
        "export FOO=baz",
        "llm_config.json: --llm x",
    )
    assert (daemon.job(b)["array_job"], daemon.job(b)["array_task"]) == (b, 3)
    assert daemon.job(c)["command"] == rows[c]["wrap"]
    daemon.call("release_job", job_ids=ids)
    done = daemon.wait_done(ids)
    assert [done[i]["state"] for i in ids] == ["COMPLETED"] * 3
    with open(f"{root}/o-{a}.log") as f:
        assert f.read() == f"baz {a} 1\n"
    with open(f"{root}/e-{a}.log") as f:
        assert f.read() == "err\n"
    with open(f"{root}/b.out") as f:
        assert f.read() == f"task 3 of {b}, 5, id {b}_3\n"
    with open(f"{root}/c.out") as f:
        assert f.read().startswith("wrapped on ")


def test_a_stored_spec_that_no_longer_reads_fails_its_job_not_the_daemon(daemon: Any) -> None:
    # A row written by hand, by a damaged disk or by a daemon that checked less: the job that
    # owns it fails with the reason; the daemon and the other jobs go on.
    daemon.start()
    root = str(daemon.fake.root)
    bad_type, not_json, good = (daemon.submit("true", hold=True) for _ in range(3))
    daemon.stop()
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"))
    spec = {"argv": ["true"], "env": ENV, "cwd": root, "gpus": True, "umask": 18}
    db.execute("UPDATE jobs SET spec = ? WHERE id = ?", (json.dumps(spec), bad_type))
    db.execute("UPDATE jobs SET spec = ? WHERE id = ?", ('{"argv": ["tr', not_json))
    db.commit()
    db.close()

    daemon.start()
    daemon.call("release_job", job_ids=[bad_type, not_json, good])
    done = daemon.wait_done([bad_type, not_json, good])
    assert done[good]["state"] == "COMPLETED"
    for job_id in (bad_type, not_json):
        assert done[job_id]["state"] == "FAILED", done[job_id]
        shown = daemon.berth("show", str(job_id))
        assert shown.returncode != 0 and "Traceback" not in shown.stderr
        assert f"job {job_id}: its stored spec does not read as a job" in shown.stderr
        assert "it cannot run: submit it again" in shown.stderr
    assert daemon.call("queue")  # the daemon still answers
