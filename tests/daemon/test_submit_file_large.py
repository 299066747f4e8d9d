"""`berth submit --file` with 100,000 lines (issue 21): every job queued once, in requests the
daemon takes (at most 10,000 jobs, under the frame limit: the environment sent once a request,
not per job), with a progress line, in bounded client memory."""

from __future__ import annotations

import subprocess
import sys

from helpers import wait_until

LINES = 100_000
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}

# The CLI in a process that says its peak RSS (KiB) on its last stderr line.
_MEASURED = (
    "import resource, sys\n"
    "from berth.cli.main import main\n"
    "rc = main(sys.argv[1:])\n"
    "sys.stderr.write(f'maxrss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n"
    "sys.exit(rc)\n"
)


def _submit(daemon, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:  # type: ignore[no-untyped-def]
    r = subprocess.run(
        [sys.executable, "-c", _MEASURED, "submit", *args],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r, int(r.stderr.rstrip().rsplit("maxrss=", 1)[1])


def test_a_file_of_100000_lines_is_queued_once_in_bounded_memory(daemon):
    config = daemon.fake.root / "config.toml"
    config.write_text("[limits]\nmax_jobs = 200000\n")  # the admin's bound, raised for this
    daemon.env["BERTH_CONFIG"] = str(config)
    daemon.start(gpus=2)
    small = daemon.fake.root / "small.txt"
    small.write_text("".join(f"-J small -- true {i}\n" for i in range(1_000)))
    big = daemon.fake.root / "big.txt"
    out = daemon.fake.root / "out"
    lines = [f"true {i}\n" for i in range(LINES - 1)]
    big.write_text("".join(lines) + f"sh -c 'echo \"$BERTH_SOCKET\" > {out}'\n")

    _, small_rss = _submit(daemon, "--hold", "--parsable", "--file", str(small))
    r, big_rss = _submit(daemon, "--hold", "-J", "big", "--parsable", "--file", str(big))

    ids = [int(x) for x in r.stdout.split()]
    assert len(ids) == LINES and len(set(ids)) == LINES  # each line's job, once
    progress = [line for line in r.stderr.splitlines() if line.startswith("berth: ")]
    assert progress[-1] == f"berth: {LINES} of {LINES} jobs queued" and len(progress) >= 10
    # Bounded: a hundred times the lines costs the client a request's jobs, not the file's.
    assert big_rss < small_rss + 64 * 1024, (small_rss, big_rss)
    queued = daemon.call("queue", all=True)["jobs"]
    assert len(queued) == LINES + 1_000
    held = {j["id"] for j in queued if j["state"] == "PENDING" and j["name"] == "big"}
    assert held == set(ids)
    assert daemon.job(ids[-2])["command"] == ["true", str(LINES - 2)]
    daemon.call("release_job", job_ids=[ids[-1]])  # it runs in the environment sent once
    # (awaited by `show`: each `queue --all` of wait_done lists all 101,000 jobs, seconds each)
    ended = wait_until(
        lambda: (job := daemon.job(ids[-1]))["state"] in ENDED and job,
        timeout=60, message="the released job ends",
    )  # fmt: skip
    assert ended["state"] == "COMPLETED"
    assert out.read_text().strip() == daemon.socket
