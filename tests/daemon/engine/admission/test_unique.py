"""`berth submit --unique` (the GPU Job Scheduler's job deduplication) and `berth submit --file`."""

from __future__ import annotations

import sqlite3

from berth.daemon.store import store as store_mod


def _ids(out: str) -> list[int]:
    return [int(x) for x in out.split()]


def test_unique_queues_a_job_once_unless_its_twin_failed(daemon):
    daemon.start(gpus=2)
    gate = daemon.fake.root / "gate"
    cmd = ["sh", "-c", f'while [ ! -e {gate} ]; do sleep 0.05; done; exit "$(cat {gate})"']
    first = _ids(daemon.berth("submit", "--parsable", "--unique", "--", *cmd).stdout)
    again = daemon.berth("submit", "--parsable", "--unique", "-p", "5", "--", *cmd)
    assert _ids(again.stdout) == first and "not submitted again" in again.stderr
    other = daemon.berth("submit", "--parsable", "--unique", "-g", "2", "--", *cmd)
    assert _ids(other.stdout) != first  # another GPU request: another job
    plain = daemon.berth("submit", "--parsable", "--", *cmd)  # without --unique: queued
    assert _ids(plain.stdout) != first
    gate.write_text("0")
    daemon.wait_done(first + _ids(other.stdout) + _ids(plain.stdout))
    done = daemon.berth("submit", "--parsable", "--unique", "--", *cmd)
    # the newest twin answers, submitted with --unique or not (issue 27.4): `plain`
    assert _ids(done.stdout) == _ids(plain.stdout) and "COMPLETED" in done.stderr
    # A twin that failed does not count: the job is queued again.
    gate.write_text("3")
    failing = ["sh", "-c", f'exit "$(cat {gate})"']
    a = _ids(daemon.berth("submit", "--parsable", "--unique", "--", *failing).stdout)
    assert daemon.wait_done(a)[a[0]]["state"] == "FAILED"
    b = _ids(daemon.berth("submit", "--parsable", "--unique", "--", *failing).stdout)
    assert b != a


def test_file_submits_a_job_per_line_and_unique_only_the_new_ones(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    out = daemon.fake.root / "out"
    jobs.write_text(
        "# experiments\n"
        f"-J one -- sh -c 'echo one >> {out}'\n"
        f"sh -c 'echo two >> {out}'   # the whole line is the command\n"
        "\n"
        f"-p 7 -g 0.5 -- sh -c 'echo three >> {out}'\n"
    )
    r = daemon.berth("submit", "--unique", "-p", "3", "--parsable", "--file", str(jobs))
    assert r.returncode == 0, r.stderr
    ids = _ids(r.stdout)
    assert len(ids) == 3
    rows = daemon.wait_done(ids)
    assert {rows[i]["state"] for i in ids} == {"COMPLETED"}
    assert sorted(out.read_text().split()) == ["one", "three", "two"]
    assert [daemon.job(i)["priority"] for i in ids] == [3, 3, 7]  # the line's own wins
    assert daemon.job(ids[0])["name"] == "one" and daemon.job(ids[2])["request"]["gpus"] == 0.5
    # Appended a line: submitting the file again queues only that one.
    with open(jobs, "a") as f:
        f.write(f"sh -c 'echo four >> {out}'\n")
    r = daemon.berth("submit", "--unique", "-p", "3", "--file", str(jobs))
    assert r.returncode == 0 and "1 of 4 submitted" in r.stdout
    assert r.stdout.count("already there (COMPLETED)") == 3


def test_a_bad_line_or_a_refused_one_submits_nothing_and_is_named(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    jobs.write_text("-- echo fine\n-g lots -- echo bad\n")
    r = daemon.berth("submit", "--file", str(jobs))
    assert r.returncode == 2 and f"{jobs}:2:4: job field 'gpus' = 'lots'" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []  # nothing submitted
    jobs.write_text("-- echo fine\n--gpu-ids 7 -- echo nowhere\n")
    r = daemon.berth("submit", "--file", str(jobs))  # refused by the daemon: all or none
    assert r.returncode == 2 and f"{jobs}:2: no GPU 7 here" in r.stderr
    assert "nothing was queued" in r.stderr and "Submitted job" not in r.stdout
    assert daemon.call("queue", all=True)["jobs"] == []
    bad = daemon.berth("submit", "--file", str(jobs), "--", "echo", "x")
    assert bad.returncode == 2 and "--file takes the commands from the file" in bad.stderr


def test_a_version_1_database_is_migrated_in_place(tmp_path):
    path = str(tmp_path / "berth.db")
    db = sqlite3.connect(path, isolation_level=None)
    for statement in store_mod.MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("PRAGMA user_version=1")
    db.execute(
        "INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec) "
        "VALUES (7, 0, 'root', 'COMPLETED', 1.0, '{}', '{}')"
    )
    db.close()
    st = store_mod.Store.open(path)
    try:
        assert st.db.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
        assert st.next_id() == 8 and st.twin("anything") is None
    finally:
        st.close()


def test_identities_are_kept_in_memory_only_until_their_jobs_are_durable(tmp_path):
    """Every job's identity stayed in the engine's memory for the daemon's life (~130 bytes a
    job, never freed: 13 MB for a jobs file of 100,000 lines); once a job is durable the
    store's index finds it, so memory keeps none. Twins are found as before."""
    import asyncio

    from enginekit import EngineRig

    from berth.daemon.engine.admission import admit

    rig = EngineRig(tmp_path, gpus=1)
    try:
        ids = [rig.submit("true", str(i), hold=True) for i in range(300)]
        rig.turn()
        assert rig.engine.unique == {}
        spec = {"argv": ["true", "7"], "env": {"PATH": "/bin"}, "cwd": str(tmp_path),
                "hold": True, "unique": True}  # fmt: skip
        reply = rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, dict(spec)))
        assert reply["duplicate"] and reply["job_id"] == ids[7]
        # Two twins in one turn, the first not durable yet: the second is the first's.
        other = {**spec, "argv": ["true", "new"]}

        async def both() -> list[dict[str, object]]:
            return list(await asyncio.gather(admit.submit(rig.engine, rig.peer, dict(other)),
                                             admit.submit(rig.engine, rig.peer, dict(other))))  # fmt: skip

        first, second = rig.loop.run_until_complete(both())
        assert not first.get("duplicate") and second["job_id"] == first["job_id"]
        assert second["duplicate"]
        rig.turn()
        assert rig.engine.unique == {}
    finally:
        rig.close()
