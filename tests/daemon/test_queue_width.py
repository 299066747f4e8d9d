"""`berth queue` on an 80-column terminal (issue 40.2): no line wider than the window, columns
narrowed by what matters least (a pending job's wait and share first), and names cut in the
middle, so that jobs named alike keep the ends that tell them apart."""

from __future__ import annotations

import sys

from helpers import wait_until
from termkit import on_terminal

NAMES = [f"train-resnet50-imagenet-lr0.1-seed-{k}" for k in range(1, 5)]


def _queue(daemon, columns: int) -> list[str]:  # type: ignore[no-untyped-def]
    code, out = on_terminal([sys.executable, "-m", "berth.cli.main", "queue"], daemon.env,
                            rows=40, columns=columns)  # fmt: skip
    assert code == 0, out
    return out.splitlines()


def test_queue_fits_80_columns_and_cuts_names_in_the_middle(daemon):
    daemon.start(gpus=1)
    blocker = daemon.submit("sleep", "60", name="blocker-" + "x" * 40 + "-end")
    wait_until(lambda: daemon.job(blocker)["state"] == "RUNNING", message="blocker runs")
    ids = [daemon.submit("true", name=name) for name in NAMES]
    lines = _queue(daemon, 80)
    rows = [ln for ln in lines if ln.split() and ln.split()[0].isdigit()]
    assert len(rows) == 5, lines
    assert all(len(ln) <= 80 for ln in lines), [len(ln) for ln in lines]
    names = [ln.split()[1] for ln in rows[1:]]
    assert len(set(names)) == 4, names  # the ends that differ are kept
    for k, name in enumerate(names, start=1):
        assert name.startswith("train-") and name.endswith(f"seed-{k}") and "~" in name, name
    assert all("(Resources) #" in ln for ln in rows[1:]), rows  # the reason and place stay
    assert rows[0].split()[1].startswith("blocker-") and rows[0].split()[1].endswith("-end")
    wide = _queue(daemon, 200)  # room for all: the place in line whole
    assert sum("waited " in ln and "share " in ln for ln in wide) == 4, wide
    narrow = _queue(daemon, 50)  # less than the columns need: still no line wider
    assert all(len(ln) <= 50 for ln in narrow), narrow
    piped = daemon.berth("queue")  # a pipe: whole lines (as squeue), names middle-cut to 20
    assert piped.returncode == 0, piped.stderr
    assert sum("waited " in ln for ln in piped.stdout.splitlines()) == 4
    piped_names = [ln.split()[1] for ln in piped.stdout.splitlines()[3:] if ln.split()]
    assert piped_names == [n[:10] + "~" + n[-9:] for n in NAMES], piped_names
    daemon.call("cancel", job_ids=[blocker, *ids])
