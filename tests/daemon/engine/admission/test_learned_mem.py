"""Learned GPU memory (issue 33.3): a job submitted without -g and without --mem, whose same
job (same user, same name or command line) completed before, gets a share sized by the peak
GPU memory berth measured through NVML (15 % more, at least 1 GiB, whole GiB), said at submit
and in `berth show`; --mem, -g 1 and --no-learned-mem keep a whole GPU; another user's history
never sizes a job; the enforcer never kills a job for outgrowing a learned size."""

from __future__ import annotations

import itertools
import json
import os
import shlex
from typing import Any

from helpers import wait_until
from userkit import NOBODY, request_as

G = 1 << 30
_STOPS = itertools.count()


def _submit(daemon: Any, *args: str) -> tuple[int, str]:
    out = daemon.berth("submit", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[2]), out.stderr


def _ran(daemon: Any, job: int) -> dict[str, Any]:
    return daemon.wait_done([job])[job]


def _running(daemon: Any, mem: str, *args: str, code: int = 0) -> tuple[int, str, str]:
    """Job `train` using ``mem`` of its GPU until the file it names appears, then ending
    with exit code ``code``: (its id, what submit said, that file)."""
    stop = os.path.join(daemon.fake.root, f"stop-{next(_STOPS)}")
    work = shlex.join(daemon.workload("--mem", mem, "--seconds", "120"))
    wrap = (f"{work} & w=$!; while [ ! -e {stop} ]; do sleep 0.02; done; "
            f"kill $w; wait $w; exit {code}")  # fmt: skip
    job, said = _submit(daemon, "-J", "train", *args, "--wrap", wrap)
    return job, said, stop


def _measured(daemon: Any, mem: str, code: int = 0) -> tuple[int, str]:
    """A run of job `train` that ended with ``code`` once berth had measured its ``mem``."""
    job, said, stop = _running(daemon, mem, code=code)
    size = int(mem[:-1]) * G
    wait_until(lambda: daemon.job(job)["peak_mem"] == size, timeout=15,
               message=f"job {job}'s peak measured through NVML")  # fmt: skip
    open(stop, "w").close()
    state = _ran(daemon, job)["state"]
    assert state == ("COMPLETED" if code == 0 else "FAILED"), state
    assert daemon.job(job)["peak_mem"] == size
    return job, said


def _first_run(daemon: Any, mem: str = "10G") -> int:
    """One completed run of job `train` that used ``mem`` of its GPU."""
    job, said = _measured(daemon, mem)
    assert "sized from" not in said  # (no history yet: a whole GPU)
    return job


def test_a_job_that_ran_before_gets_a_share_sized_by_its_peak(daemon):
    daemon.fake.setup(n=1)  # (one 80G card: its learned shares run side by side on it)
    daemon.start("--poll-interval", "0.2", gpus=None)
    _first_run(daemon)
    job, said = _submit(daemon, "-J", "train", "--", *daemon.workload("--seconds", "30"))
    assert "sized from 1 earlier run of train: peak 10.0 GiB -> --mem 12G" in said
    shown = daemon.job(job)
    assert shown["request"]["mem"] == 12 * G
    assert abs(shown["request"]["gpus"] - 12 / 80) < 0.001  # a share of one 80G card
    assert shown["learned"]["runs"] == 1 and shown["learned"]["peak"] == 10 * G
    text = daemon.berth("show", str(job)).stdout
    assert "memory:     sized from 1 earlier run of train" in text
    dry = daemon.berth("submit", "--dry-run", "-J", "train", "--", "true")
    assert "sized from 1 earlier run of train: peak 10.0 GiB -> --mem 12G" in dry.stdout
    assert "0.15 of one, 12.0G of memory" in dry.stdout, dry.stdout
    # Two of them run side by side on the one card, as any two shares would.
    other, _ = _submit(daemon, "-J", "train", "--", *daemon.workload("--seconds", "30"))
    wait_until(lambda: all(daemon.job(i)["state"] == "RUNNING" for i in (job, other)),
               timeout=15, message="both learned shares run on GPU 0")  # fmt: skip
    daemon.call("cancel", job_ids=[job, other])


def test_mem_g1_and_no_learned_mem_keep_a_whole_gpu(daemon):
    daemon.start("--poll-interval", "0.2")
    _first_run(daemon)
    for args in (("-g", "1"), ("--mem", "20G", "-g", "1"), ("--no-learned-mem",)):
        job, said = _submit(daemon, "--hold", "-J", "train", *args, "--", "true")
        shown = daemon.job(job)
        assert "sized from" not in said and shown["learned"] is None, args
        assert shown["request"]["gpus"] == 1 and shown["request"].get("each", 1) == 1, args
    job, said = _submit(daemon, "--hold", "-J", "train", "--mem", "20G", "--", "true")
    assert "sized from" not in said and daemon.job(job)["request"]["mem"] == 20 * G  # (its own)


def test_a_peak_near_the_whole_card_keeps_a_whole_gpu(daemon):
    daemon.start("--poll-interval", "0.2")
    _first_run(daemon, "75G")  # (75 GiB + 15 %: more than the 80 GiB card)
    job, said = _submit(daemon, "--hold", "-J", "train", "--", "true")
    assert "peak 75.0 GiB -> a whole GPU" in said
    assert daemon.job(job)["request"]["gpus"] == 1 and daemon.job(job)["request"]["mem"] is None


def _open_to_all(daemon: Any) -> str:
    """The daemon's socket reachable by another user, and a directory for their logs."""
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    logs = os.path.join(daemon.sockdir, "theirs")
    os.mkdir(logs)
    os.chmod(logs, 0o777)
    return os.path.join(logs, "%j.out")


def test_another_users_history_never_sizes_a_job(daemon):
    daemon.start("--poll-interval", "0.2")
    first = _first_run(daemon)
    spec = {"argv": ["true"], "name": "train", "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "learn_mem": True, "hold": True, "stdout": _open_to_all(daemon)}  # fmt: skip
    reply = request_as(NOBODY, daemon.socket, "submit", job=spec)
    assert "ok" in reply, reply
    theirs = reply["ok"]
    assert "learned" not in theirs
    assert daemon.job(theirs["job_id"])["request"]["gpus"] == 1
    mine = daemon.call("submit", job={**spec, "env": daemon.env, "cwd": str(daemon.fake.root)})
    assert mine["learned"]["runs"] == 1  # (the same request of its owner is sized)
    assert first < mine["job_id"]


def test_the_peak_is_what_nvml_measured_not_what_the_job_wrote(daemon):
    """A job cannot plant its own history: the peak is the enforcer's NVML reading of its
    processes; a client's `extra`-like fields are refused as unknown."""
    daemon.start("--poll-interval", "0.2")
    spec = {"argv": ["true"], "env": {}, "cwd": "/", "peak_mem": 1, "stdout": _open_to_all(daemon)}
    reply = request_as(NOBODY, daemon.socket, "submit", job=spec)
    assert "unknown field 'peak_mem'" in reply["message"]
    job, _ = _submit(daemon, "-J", "quiet", "--", "true")  # (no GPU memory used)
    _ran(daemon, job)
    assert daemon.job(job)["peak_mem"] is None
    _, said = _submit(daemon, "--hold", "-J", "quiet", "--", "true")
    assert "sized from" not in said  # (nothing measured: nothing learned)


def test_a_learned_share_outgrown_is_told_never_killed(daemon):
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write('[enforce]\noverrun = "kill"\ngrace = 0\n')
    daemon.env["BERTH_CONFIG"] = path
    daemon.start("--poll-interval", "0.2", "--kill-after", "1")
    _first_run(daemon)
    job, said, stop = _running(daemon, "30G")  # (12G learned: 30G overruns it)
    assert "--mem 12G" in said

    def entries() -> list[dict[str, Any]]:
        log = daemon.berth("admin", "log", "--json")
        found: list[dict[str, Any]] = json.loads(log.stdout)["entries"]
        return found

    skipped = wait_until(
        lambda: [e for e in entries() if e.get("action") == "skip"
                 and e.get("holder") == f"job {job}"],
        timeout=15, message="the overrun seen, and let be",
    )  # fmt: skip
    assert skipped[0]["class"] == "overrun" and "never killed" in skipped[0]["reason"]
    wait_until(lambda: daemon.job(job)["peak_mem"] == 30 * G, message="polled again")
    assert daemon.job(job)["state"] == "RUNNING"  # (past grace 0 and a poll: not cancelled)
    open(stop, "w").close()
    assert _ran(daemon, job)["state"] == "COMPLETED"
    assert not [e for e in entries() if e.get("action") == "cancel"]
    assert len([e for e in entries() if e.get("action") == "skip"]) == 1  # (logged once)


def test_headroom_and_the_words_as_the_docs_give_them():
    from berth.daemon.engine.admission import learned

    assert learned.headroom(int(11.2 * G)) == 13 * G  # (15 %, up to a whole GiB)
    assert learned.headroom(10 * G) == 12 * G
    assert learned.headroom(G // 2) == 2 * G  # (at least 1 GiB more)
    info = {"runs": 3, "peak": int(11.2 * G), "mem": 13 * G, "of": "train.sh", "whole": False}
    assert learned.words(info) == "sized from 3 earlier runs of train.sh: peak 11.2 GiB -> --mem 13G"


def test_only_the_users_completed_runs_of_the_same_job_count(tmp_path):
    from berth.daemon.engine.admission import learned
    from berth.daemon.engine.admission.peaks import key
    from berth.daemon.store.store import open_store
    from berth.wire.jobspec import JobSpec

    def spec(**f: Any) -> JobSpec:
        return JobSpec.from_dict({"env": {}, "cwd": "/", **f})

    train = key(1000, spec(argv=["python", "train.py"]))
    assert train == key(1000, spec(argv=["python", "train.py"], gpus=2))
    assert train != key(1001, spec(argv=["python", "train.py"]))  # (another user)
    assert train != key(1000, spec(argv=["python", "eval.py"]))
    named = key(1000, spec(argv=["python", "a.py"], name="t"))
    assert named == key(1000, spec(argv=["python", "b.py"], name="t"))  # (-J: its name)
    assert learned.label(spec(argv=["python", "-u", "/w/train.py", "--lr", "1"])) == "train.py"
    store = open_store(str(tmp_path / "state"))
    rows = [  # id, uid, state, its kind, its peak
        (1, 1000, "COMPLETED", train, 8 * G), (2, 1000, "FAILED", train, 70 * G),
        (3, 1000, "CANCELLED", train, 60 * G), (4, 1001, "COMPLETED", train, 50 * G),
        (5, 1000, "COMPLETED", named, 3 * G), (6, 1000, "COMPLETED", train, None),
        (7, 1000, "COMPLETED", train, 9 * G), (8, 1000, "RUNNING", train, 40 * G),
    ]  # fmt: skip
    for i, uid, state, k, peak in rows:
        extra = {"learn": k, **({"peak_mem": peak} if peak else {})}
        store.db.execute(
            "INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec) VALUES "
            "(?, ?, 'u', ?, 0, ?, '{}')", (i, uid, state, json.dumps({"extra": extra})),
        )  # fmt: skip
    # (job 1's 8G is older than job 2's failure: not trusted; the newer completed job 7 is)
    assert learned._read(store, 1000) == {train: [9 * G], named: [3 * G]}
    # A run that failed after them: they are not trusted (a whole GPU, until one completes).
    store.db.execute("INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec) VALUES "
                     "(9, 1000, 'u', 'FAILED', 0, ?, '{}')",
                     (json.dumps({"extra": {"learn": train, "peak_mem": 9 * G}}),))  # fmt: skip
    assert learned._read(store, 1000) == {train: [], named: [3 * G]}
    memo = learned.Memo()
    assert memo.get(store, 1000, train) == []
    memo.add(1000, train, 20 * G)  # (a whole GPU's run completes: learned from it alone)
    assert memo.get(store, 1000, train) == [20 * G]
    memo.add(1000, train, None)
    assert memo.get(store, 1000, train) == []
    assert learned._read(store, 1001) == {train: [50 * G]}  # (keyed by uid 1000: never used)
    assert learned._read(store, 1002) == {}
    store.db.close()


def test_a_run_that_failed_on_a_learned_share_gets_the_next_a_whole_gpu(daemon):
    """The history may be wrong: after a run that failed (out of memory, or anything), the
    next gets a whole GPU, and what it uses is the history from then on."""
    daemon.start("--poll-interval", "0.2")
    _first_run(daemon)
    _, said = _measured(daemon, "10G", code=1)
    assert "--mem 12G" in said
    again, said = _submit(daemon, "--hold", "-J", "train", "--", "true")
    assert "sized from" not in said and daemon.job(again)["request"]["gpus"] == 1
