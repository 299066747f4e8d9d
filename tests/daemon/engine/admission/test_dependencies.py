"""Dependencies as people write them (issue 24.4), through the real CLI and daemon: each form
of `--dependency` (afterok over several ids, afterany, afternotok, after, '?' any of,
singleton), `@` for the caller's last job, a dependency that can never be met cancelled with
its reason, `#SBATCH --dependency` in a script, `berth queue --tree`, and stored specs of
earlier berths (`after_ok`) read as afterok."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from pathlib import Path

from berth.daemon.store.schema import MIGRATIONS
from berth.daemon.store.store import Store


def _submit(daemon, *args: str) -> int:  # type: ignore[no-untyped-def]
    r = daemon.berth("submit", "--parsable", *args)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


def _detail(daemon, job_id: int) -> str:  # type: ignore[no-untyped-def]
    """Why the job ended (its last event's detail)."""
    return str(daemon.job(job_id)["history"][-1]["detail"])


def test_each_form_and_at_and_never_met_cancelled_with_its_reason(daemon):
    daemon.start(gpus=2)
    ok = _submit(daemon, "--hold", "--", "true")
    at = _submit(daemon, "-d", "afterok:@", "--", "true")  # @: `ok`, the last one submitted
    assert daemon.job(at)["dependency"] == f"afterok:{ok}"
    bad = _submit(daemon, "--hold", "--", "sh", "-c", "exit 3")
    jobs = {
        "all_ok": f"afterok:{ok}:{at}",
        "notok": f"afternotok:{bad}",
        "any": f"afterok:{bad}?afterany:{ok}",
        "after": f"after:{ok}",
        "mixed": f"afterany:{bad},afterok:{ok}",
        "never": f"afterok:{ok}:{bad}",
        "never_any": f"afterok:{bad}?afternotok:{ok}",
    }
    ids = {k: _submit(daemon, "--dependency", v, "--", "true") for k, v in jobs.items()}
    queue = {r["id"]: r for r in json.loads(daemon.berth("queue", "--json").stdout)["jobs"]}
    assert queue[ids["any"]]["dependency"] == jobs["any"]
    assert queue[ids["all_ok"]]["depends_on"] == [ok, at]
    assert queue[ids["all_ok"]]["reason"] == "Dependency"
    assert daemon.berth("release-job", str(ok), str(bad)).returncode == 0
    rows = daemon.wait_done([ok, bad, at, *ids.values()])
    states = {k: rows[i]["state"] for k, i in ids.items()}
    assert states == {
        "all_ok": "COMPLETED", "notok": "COMPLETED", "any": "COMPLETED", "after": "COMPLETED",
        "mixed": "COMPLETED", "never": "CANCELLED", "never_any": "CANCELLED",
    }  # fmt: skip
    assert daemon.job(ids["never"])["attempts"] == []
    assert _detail(daemon, ids["never"]) == (
        f"dependency never satisfied: afterok:{bad}: job {bad} ended FAILED"
    )
    assert "none of them can be met" in _detail(daemon, ids["never_any"])
    shown = daemon.berth("show", str(ids["never"])).stdout
    assert f"depends on: {jobs['never']}" in shown


def test_singleton_jobs_of_one_name_run_one_after_the_other_in_order(daemon):
    daemon.start(gpus=4)
    gate = daemon.fake.root / "gate"
    wait = f"while [ ! -e {gate} ]; do sleep 0.02; done"
    ids = [_submit(daemon, "-J", "sweep", "-d", "singleton", "--", "sh", "-c", wait)]
    ids += [_submit(daemon, "-J", "sweep", "-d", "singleton", "--", "true") for _ in range(2)]
    other = _submit(daemon, "-J", "other", "-d", "singleton", "--", "true")
    daemon.wait_done([other])  # another name: not held back by them
    assert [daemon.job(i)["state"] for i in ids] == ["RUNNING", "PENDING", "PENDING"]
    assert f"job {ids[0]} of that name is RUNNING" in daemon.job(ids[1])["reason"]
    assert f"job {ids[1]} of that name is PENDING" in daemon.job(ids[2])["reason"]
    gate.touch()
    daemon.wait_done(ids)
    spans = [daemon.job(i)["attempts"][0] for i in ids]
    for first, then in itertools.pairwise(spans):
        assert then["start"] >= first["end"]  # one at a time, in submission order


def test_at_without_a_job_and_a_bad_expression_queue_nothing(daemon):
    daemon.start()
    r = daemon.berth("submit", "-d", "afterok:@", "--", "true")
    assert r.returncode != 0 and "@ is your last submitted job" in r.stderr
    r = daemon.berth("submit", "-d", "afterok:1,afterany:2?after:3", "--", "true")
    assert r.returncode == 2 and "cannot be mixed" in r.stderr
    r = daemon.berth("submit", "-d", "afterok:77", "--", "true")
    assert r.returncode != 0 and "no job 77" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_sbatch_dependency_in_a_script(daemon, tmp_path):
    daemon.start()
    first = _submit(daemon, "--hold", "--", "true")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --dependency=afterany:@\n#SBATCH -J step\ntrue\n")
    os.chmod(script, 0o755)
    job = _submit(daemon, str(script))
    assert daemon.job(job)["dependency"] == f"afterany:{first}"
    assert daemon.job(job)["reason"].startswith("Dependency")


def test_queue_tree_draws_jobs_under_what_they_wait_for(daemon):
    daemon.start(gpus=2)
    done = _submit(daemon, "-J", "done", "--", "true")
    daemon.wait_done([done])
    prep = _submit(daemon, "--hold", "-J", "prep", "--", "true")
    train = _submit(daemon, "-J", "train", "-d", f"afterok:{prep}", "--", "true")
    evals = _submit(daemon, "-J", "eval", "-d", f"afterok:{train},afterany:{done}", "--", "true")
    report = _submit(daemon, "-J", "report", "-d", f"afterany:{prep}", "--", "true")
    alone = _submit(daemon, "--hold", "-J", "alone", "--", "true")
    out = daemon.berth("queue", "--tree", "--noheader").stdout.splitlines()
    ids = [str(prep), f"├─{train}", f"│ └─{evals}", f"└─{report}", str(alone)]
    assert [line[: len(i) + 1] for line, i in zip(out, ids, strict=True)] == [i + " " for i in ids]
    assert out[0].split()[1:] == ["prep", "PD", "(Held)"]
    assert out[2].split()[2:] == ["eval", "PD", "(Dependency)", f"afterok:{train},afterany:{done}",
                                  f"[{done}", "COMPLETED]"]  # fmt: skip
    daemon.berth("cancel", str(prep))
    rows = daemon.wait_done([train, evals, report])
    assert [rows[i]["state"] for i in (train, evals, report)] == ["CANCELLED"] * 2 + ["COMPLETED"]


def test_an_earlier_berths_after_ok_row_reads_as_afterok(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    db = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:6]:
        for statement in step if isinstance(step, tuple) else step.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version=6")
    spec = {"argv": ["true"], "env": {}, "cwd": "/", "after_ok": [3, 4]}
    for job_id, spec_ in ((5, spec), (6, {**spec, "after_ok": []})):
        db.execute(
            "INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec) "
            "VALUES (?, 0, 'ann', 'PENDING', 0, '{}', ?)", (job_id, json.dumps(spec_)),
        )  # fmt: skip
    db.close()
    store = Store.open(path)
    assert store.spec(5).dependency == "afterok:3:4" and store.spec(6).dependency is None
    assert "after_ok" not in store.db.execute("SELECT spec FROM jobs WHERE id = 5").fetchone()[0]
    assert store.last_job(0) == 6 and store.last_job(1) is None
