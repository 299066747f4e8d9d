from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from berth.core import GIB, Job, Request, State, transition
from berth.errors import UsageError
from berth.sim import traces, workload

DATA = Path(__file__).parent / "data"


def test_itp_reader() -> None:
    jobs = traces.read(str(DATA / "itp_cluster10.csv"))
    assert len(jobs) == 260
    assert jobs[0].submit == 0.0 and all(a.submit <= b.submit for a, b in itertools.pairwise(jobs))
    assert {j.tenant for j in jobs} == {"itp_cluster10"}
    assert max(j.gpus for j in jobs) == 16


def test_philly_reader_sorts_by_time() -> None:
    jobs = traces.read(str(DATA / "philly_head300.csv"))
    assert len(jobs) == 300
    assert all(a.submit <= b.submit for a, b in itertools.pairwise(jobs))
    assert jobs[0].submit == 0.0
    assert "11cb48" in {j.tenant for j in jobs}


def test_openb_reader(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "p0,12000,16384,1,1000,,LS,Running,0,100,0\n"
        "p1,6000,12288,1,460,,BE,Running,10,70,10\n"
        "p2,8000,1024,4,1000,,LS,Running,20,50,20\n"
        "p3,1000,1024,0,0,,BE,Running,30,40,30\n"
        "p4,1000,1024,1,500,,BE,Pending,30,,\n"
    )
    notes: list[str] = []
    jobs = traces.read(str(path), need_times=True, notes=notes)  # a replay
    assert [(j.gpus, j.duration, j.tenant) for j in jobs] == [
        (1.0, 100.0, "LS"), (0.46, 60.0, "BE"), (4.0, 30.0, "LS"), (0.0, 10.0, "BE"),
    ]  # fmt: skip
    assert jobs[1].cpu == 6000 and jobs[1].ram == 12288 * 1024**2
    assert notes == ["left out 1 pods without a deletion_time (lifetime unknown)"]
    shapes = traces.read(str(path))  # the fill experiment: every pod is a shape
    assert [(j.gpus, j.duration) for j in shapes][-1] == (0.5, 0.0)


def test_berth_records_replay(tmp_path: Path) -> None:
    a = Job(id=7, submit_time=1000.0, request=Request(gpus=0.5, mem=10 * GIB), user="al",
            time_limit=600.0, priority=3)  # fmt: skip
    transition(a, State.RUNNING, now=1010.0, gpus=(0,), share=0.5, mem=10 * GIB)
    transition(a, State.COMPLETED, now=1070.0, exit_code=0)
    never = Job(id=8, submit_time=1001.0)
    transition(never, State.CANCELLED, now=1002.0)
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(j.to_dict()) for j in (a, never)) + "\n")
    jobs = traces.read(str(path))
    assert len(jobs) == 1
    j = jobs[0]
    assert (j.gpus, j.duration, j.tenant, j.priority, j.time_limit, j.mem) == (
        0.5, 60.0, "al", 3, 600.0, 10 * GIB,
    )  # fmt: skip


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(UsageError, match="cannot tell the format"):
        traces.read(str(bad))
    with pytest.raises(UsageError, match="cannot read trace"):
        traces.read(str(tmp_path / "nope.csv"))
    with pytest.raises(UsageError, match="unknown trace format 'xls'"):
        traces.read(str(bad), "xls")


def test_inventory_specs(tmp_path: Path) -> None:
    gpus, nodes = workload.inventory("8")
    assert len(gpus) == 8 and {g.node for g in gpus} == {""} and gpus[0].memory_total == 80 * GIB
    gpus, nodes = workload.inventory("4x2:40G")
    assert len(gpus) == 8 and len(nodes) == 4 and gpus[0].memory_total == 40 * GIB
    csv = tmp_path / "nodes.csv"
    csv.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,1024,8,G2\n"
    )
    gpus, nodes = workload.inventory(str(csv))
    assert len(gpus) == 10 and nodes["n0"].cpu == 64000 and gpus[2].node == "n1"
    with pytest.raises(UsageError, match=r"use e\.g\. 8, 8:40G, 8x8"):
        workload.inventory("eight")


def test_load_scaling() -> None:
    jobs = traces.read(str(DATA / "itp_cluster10.csv"))
    jobs = [j for j in jobs if j.gpus <= 8]
    native = workload.offered_load(jobs, 8)
    stretched = workload.scale_to([*jobs], 8, native / 2, "stretch")
    assert workload.offered_load(stretched, 8) == pytest.approx(native / 2)
    thinned = workload.scale_to(traces.read(str(DATA / "itp_cluster10.csv")), 8, 0.3, "thin", 1)
    assert len(thinned) < 260
    with pytest.raises(UsageError, match="cannot thin to load 50"):
        workload.scale_to(jobs, 8, 50.0, "thin")


def test_time_limit_models() -> None:
    js = [traces.SimJob(1, 0.0, 700.0, 1.0), traces.SimJob(2, 0.0, 5000.0, 1.0)]
    assert [j.time_limit for j in workload.time_limits(js, "round")] == [1800.0, 7200.0]
    assert [j.time_limit for j in workload.time_limits(js, "factor:2")] == [1400.0, 10000.0]
    assert [j.time_limit for j in workload.time_limits(js, "none")] == [None, None]
    with pytest.raises(UsageError, match="unknown time-limit model"):
        workload.time_limits(js, "sometimes")


def test_berth_store_replay(tmp_path: Path) -> None:
    import sqlite3

    a = Job(id=3, submit_time=50.0, request=Request(gpus=2), user="bo")
    transition(a, State.RUNNING, now=60.0, gpus=(0, 1))
    transition(a, State.FAILED, now=160.0, exit_code=1)
    db = sqlite3.connect(tmp_path / "berth.db")
    db.execute("CREATE TABLE jobs(id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
    db.execute("INSERT INTO jobs VALUES (3, ?)", (json.dumps(a.to_dict()),))
    db.commit()
    db.close()
    jobs = traces.read(str(tmp_path / "berth.db"))
    assert [(j.gpus, j.duration, j.tenant) for j in jobs] == [(2.0, 100.0, "bo")]
    with pytest.raises(UsageError, match="cannot read berth's job store"):
        traces.read(str(tmp_path / "missing.db"))
