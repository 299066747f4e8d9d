"""`berth submit --file` of 30,000 lines (three requests of 10,000) with the daemon killed (kill
-9) once the first request is answered: every job the CLI said was submitted is queued after
the restart, and a request is queued whole or not at all (each is one commit), whatever the
daemon does with a request's memory once it is handled (issue 35: its lines let go, its
jobs' identities forgotten together, a trim after its answer)."""

from __future__ import annotations

import subprocess
import sys

LINES = 30_000
REQUEST = 10_000  # jobs of one request (berth/cli/submit_bulk.py's MAX_JOBS)


def test_kill9_mid_file_loses_no_job_it_answered(daemon):  # type: ignore[no-untyped-def]
    (daemon.fake.root / "config.toml").write_text("[limits]\nmax_jobs = 100000\n")
    daemon.start(gpus=1)
    jobs = daemon.fake.root / "jobs.txt"
    jobs.write_text("".join(f"true {i}\n" for i in range(LINES)))
    cli = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "submit", "--hold", "--parsable", "--file",
         str(jobs)],
        env=daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert cli.stderr is not None
        first = cli.stderr.readline()  # (written once the first request is answered)
        assert first.startswith(f"berth: {REQUEST} of {LINES} jobs queued"), first
        daemon.kill9()
        out, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    said = [int(line) for line in out.split()]  # (the ids it was told, each line's)
    assert len(said) in (REQUEST, 2 * REQUEST) and said == list(range(said[0], said[0] + len(said)))
    if len(said) < LINES:
        assert cli.returncode != 0, err
    daemon.start(gpus=1)
    rows = {r["id"]: r for r in daemon.call("queue", all=True)["jobs"]}
    mine = sorted(i for i in rows if i >= said[0])
    assert set(said) <= set(mine)  # none it answered is lost
    assert len(mine) % REQUEST == 0 and mine == list(range(said[0], said[0] + len(mine)))
    assert {rows[i]["state"] for i in mine} == {"PENDING"}
