"""`berth queue` on Slurm as squeue: its PARTITION and NODES columns, and -j, -p/--partition,
--me and -o as squeue takes them."""

from __future__ import annotations

from helpers import wait_until
from slurmkit import Cli


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:]}


def test_queue_has_squeues_columns_and_options(berth: Cli) -> None:
    done = berth.submit("-J", "quick", "--", "true")
    long = berth.submit("-J", "long", "--partition", "debug", "--", "sleep", "60")
    wait_until(lambda: berth.state(long) == "RUNNING", timeout=20, message="it runs")
    assert berth("wait", done).returncode == 0
    queue = berth("queue").stdout
    head = ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "GPUS",
            "NODELIST(REASON)"]  # fmt: skip
    assert queue.splitlines()[0].split() == head
    row = _rows(queue)[long]
    assert row[1:5] == ["debug", "long", "root", "R"] and row[6:] == ["1", "1", "localhost"]
    assert done not in _rows(queue)  # (ended: not without --all)

    one = _rows(berth("queue", "-j", done).stdout)  # any state, as squeue -j
    assert list(one) == [done] and one[done][4] == "CD"
    assert set(_rows(berth("queue", "-j", f"{done},{long}").stdout)) == {done, long}
    assert set(_rows(berth("queue", "-p", "debug").stdout)) == {long}
    assert _rows(berth("queue", "--partition", "nosuch").stdout) == {}
    assert set(_rows(berth("queue", "--me").stdout)) == {long}
    both = berth("queue", "--me", "-u", "nobody")
    assert both.returncode == 2 and "--me and -u nobody: name one user" in both.stderr
    bad = berth("queue", "-j", "x1")
    assert bad.returncode == 2 and "invalid job id 'x1'" in bad.stderr

    out = berth("queue", "-j", long, "-o", "%.8i|%P|%10j|%t|%D|%R").stdout
    assert (
        out == f"   JOBID|PARTITION|NAME      |ST|NODES|NODELIST(REASON)\n"
        f"{long:>8}|debug|long      |R|1|localhost\n"
    )
    wrong = berth("queue", "-o", "%i %Z")
    assert wrong.returncode == 2 and "berth has no field %Z" in wrong.stderr


def test_the_local_queue_refuses_partitions(berth: Cli) -> None:
    out = berth("queue", "--backend", "local", "-p", "gpu")
    assert out.returncode == 2 and "the local queue has no partitions" in out.stderr
