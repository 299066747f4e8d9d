"""`berth sweep 'python train.py --lr {1e-3,1e-4} --seed {0..4}'`: the grid printed with
--dry-run, queued as one array whose task i runs command i (issue 12.5)."""

from __future__ import annotations

import json
import sys

PRINT = "import sys, os; print(os.environ['BERTH_ARRAY_TASK_ID'], *sys.argv[1:])"


def test_dry_run_prints_the_grid_and_queues_nothing(daemon):
    daemon.start(gpus=2)
    r = daemon.berth("sweep", "--dry-run", "python train.py --lr {1e-3,1e-4} --seed {0..4}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "10 commands: 2 ({1e-3,1e-4}) x 5 ({0..4})"
    assert lines[1] == "   0  python train.py --lr 1e-3 --seed 0"
    assert lines[10] == "   9  python train.py --lr 1e-4 --seed 4"
    assert lines[11] == "would queue an array of 10 tasks (1_0..1_9): task i runs command i"
    assert daemon.call("queue", all=True)["jobs"] == []
    # the daemon checks it as it checks the real sweep (issue 40.1): 3 GPUs of 2 is refused
    dry = daemon.berth("sweep", "--dry-run", "-g", "3", "python t.py {1,2}")
    real = daemon.berth("sweep", "-g", "3", "python t.py {1,2}")
    assert real.returncode == 2 and "this machine has 2 GPU(s)" in real.stderr, real
    assert (dry.returncode, dry.stderr, dry.stdout) == (real.returncode, real.stderr, "")
    assert daemon.call("queue", all=True)["jobs"] == []
    r = daemon.berth("sweep", "python train.py")
    assert r.returncode == 2 and "has no brace group" in r.stderr


def test_a_sweep_is_one_array_each_task_its_command(daemon):
    daemon.start(gpus=4)
    template = f'{sys.executable} -c "{PRINT}" --lr {{1e-3,1e-4}} --seed {{0..2}}'
    r = daemon.berth("sweep", "--json", "--throttle", "2", "-g", "0.5", template)
    assert r.returncode == 0, r.stderr
    reply = json.loads(r.stdout)
    base = reply["job_id"]
    assert len(reply["tasks"]) == 6 and reply["array"] == "0-5%2"
    ids = list(range(base, base + 6))
    assert all(r["state"] == "COMPLETED" for r in daemon.wait_done(ids).values())
    grid = [(lr, s) for lr in ("1e-3", "1e-4") for s in range(3)]
    for i, (lr, seed) in enumerate(grid):
        with open(reply["stdout"].replace("%a", str(i))) as f:
            assert f.read() == f"{i} --lr {lr} --seed {seed}\n"
        assert daemon.job(base + i)["request"]["gpus"] == 0.5
    assert daemon.berth("wait", str(base)).returncode == 0
