"""Job arrays on the local daemon (`berth submit --array 0-9%2`, the flag and parser the Slurm
backend takes): one job per task, all durable at once, each with BERTH_ARRAY_TASK_ID; the %K
throttle enforced by the scheduling core; `queue` folds them, `cancel`/`wait`/`show` and
dependencies take the array's id or a task's (issue 12.5)."""

from __future__ import annotations

import json

from helpers import wait_until

ECHO = 'echo "$BERTH_ARRAY_TASK_ID $BERTH_ARRAY_JOB_ID $BERTH_JOB_ID $SLURM_ARRAY_TASK_COUNT"'


def _submit(daemon, *args: str) -> dict:
    r = daemon.berth("submit", "--json", *args)
    assert r.returncode == 0, r.stderr
    reply: dict = json.loads(r.stdout)
    return reply


def _max_running(daemon, ids: list[int]) -> int:
    """The most tasks that ever ran at once, from their attempts' times."""
    spans = [(a["start"], a["end"]) for i in ids for a in daemon.job(i)["attempts"]]
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_an_array_runs_each_task_with_its_index_and_its_own_log(daemon):
    daemon.start(gpus=4)
    reply = _submit(daemon, "--array", "0-2,5", "--", "sh", "-c", ECHO)
    base = reply["job_id"]
    assert reply["tasks"] == [f"{base}_{i}" for i in (0, 1, 2, 5)]
    assert reply["stdout"].endswith(f"/{base}_%a.out")
    ids = list(range(base, base + 4))
    rows = daemon.wait_done(ids)
    assert all(r["state"] == "COMPLETED" for r in rows.values())
    for task in (0, 1, 2, 5):
        with open(reply["stdout"].replace("%a", str(task))) as f:
            assert f.read() == f"{task} {base} {base}_{task} 4\n"
    shown = daemon.berth("show", f"{base}_5").stdout
    assert f"Job {base + 3} " in shown and f"task 5 of array {base}" in shown


def test_the_throttle_holds_at_most_k_tasks_running(daemon):
    daemon.start(gpus=4)
    gate = daemon.fake.root / "gate"
    wait_for_gate = f"while [ ! -e {gate} ]; do sleep 0.02; done"
    reply = _submit(daemon, "--array", "0-5%2", "--", "sh", "-c", wait_for_gate)
    base = reply["job_id"]
    ids = list(range(base, base + 6))

    def running() -> list[int]:
        rows = daemon.call("queue")["jobs"]
        return [r["id"] for r in rows if r["state"] == "RUNNING"]

    wait_until(lambda: len(running()) == 2, timeout=20, message="two tasks run")
    q = daemon.berth("queue").stdout
    assert f"{base}_[2-5%2]" in q and "(JobArrayTaskLimit)" in q  # 4 GPUs, 2 idle: held back
    assert f"{base}_0 " in q and f"{base}_1 " in q
    expanded = daemon.berth("queue", "-r").stdout
    assert all(f"{base}_{i} " in expanded for i in range(6))
    gate.touch()
    daemon.wait_done(ids)
    assert _max_running(daemon, ids) == 2


def test_cancel_wait_and_dependencies_take_the_array_or_a_task(daemon):
    daemon.start(gpus=2)
    base = _submit(daemon, "--array", "0-3", "--hold", "--", "true")["job_id"]
    r = daemon.berth("cancel", f"{base}_2")
    assert r.returncode == 0 and r.stdout == f"job {base}_2: cancelled\n"
    after = _submit(daemon, "--dependency", f"afterok:{base}", "--", "true")["job_id"]
    assert len(daemon.job(after)["dependencies"]) == 4  # every task of the array
    r = daemon.berth("cancel", str(base))  # the whole array, as scancel
    assert sorted(r.stdout.splitlines()) == [f"job {base}_{i}: cancelled" for i in (0, 1, 3)]
    r = daemon.berth("wait", str(base))
    assert r.returncode == 1 and f"job {base}: CANCELLED" in r.stdout
    assert daemon.wait_done([after])[after]["state"] == "CANCELLED"  # never satisfied
    ok = _submit(daemon, "--array", "0-2", "--", "true")["job_id"]
    assert daemon.berth("wait", str(ok)).returncode == 0
    failing = _submit(daemon, "--array", "0-2", "--", "sh", "-c",
                      'exit "$BERTH_ARRAY_TASK_ID"')["job_id"]  # fmt: skip
    r = daemon.berth("wait", str(failing), f"{failing}_0")
    assert r.returncode == 1 and f"job {failing}: FAILED (exit code 1)" in r.stdout


def test_an_array_is_all_or_nothing(daemon):
    daemon.start(gpus=2)
    r = daemon.berth("submit", "--array", "0-3", "--gpu-ids", "5", "--", "true")
    assert r.returncode == 2 and "no GPU 5 here" in r.stderr
    r = daemon.berth("submit", "--array", "0-20000", "--", "true")
    assert r.returncode == 2 and "at most 10000" in r.stderr
    r = daemon.berth("submit", "--array", "3-1", "--", "true")
    assert r.returncode == 2 and "'3-1' ends before it starts" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
    base = _submit(daemon, "--array", "0-99", "--hold", "--", "true")["job_id"]
    daemon.kill9()  # every task was durable before the answer
    daemon.start(gpus=None)
    rows = daemon.call("queue", all=True)["jobs"]
    assert sorted(r["array_task"] for r in rows if r["array_job"] == base) == list(range(100))


def test_percent_a_outside_an_array_is_empty(daemon):
    """`%a` of a job that is not an array became 4294967294 (Slurm's NO_VAL, issue 20.16): it
    is nothing, and `%A` the job's id (docs/daemon.md)."""
    daemon.start()
    job_id = daemon.submit("true", hold=True, stdout="run_%A_%a.out")
    assert daemon.job(job_id)["stdout"].endswith(f"/run_{job_id}_.out")


def test_pending_reasons_name_array_tasks_as_the_cli_does(daemon):
    """Issue 23.2: a reason the scheduler wrote named a task by its internal id ("held by job
    2"); queue, show and the page name it as the CLI does ("2_0")."""
    import json as _json

    daemon.start(gpus=1)
    out = daemon.berth("submit", "--parsable", "--array", "0-1", "--",
                       *daemon.workload("--seconds", "60"))  # fmt: skip
    array = int(out.stdout.split(";")[0].split("_")[0])
    waiting = daemon.submit("true")
    from helpers import wait_until

    def reason() -> str:
        row = next(r for r in daemon.call("queue")["jobs"] if r["id"] == waiting)
        return str(row.get("reason_detail") or "")

    wait_until(lambda: f"job {array}_0" in reason(), timeout=15, message="the task's CLI id")
    shown = _json.loads(daemon.berth("show", "--json", str(waiting)).stdout)
    assert f"job {array}_0" in (shown.get("reason") or "")
    daemon.call("cancel", job_ids=[array])
