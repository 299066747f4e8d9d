"""The simulator on published data (issue 10, point 6): openb's pod lists without time columns
(``multigpu*``) load as pod shapes and run in the fill experiment; every malformed trace is a
clear error naming the file, the line and the field, never a traceback or a silent drop."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.core import Job, Request, State, transition
from berth.errors import UsageError
from berth.sim import traces, workload
from berth.sim.fill import fill
from berth.sim.run import prepare

DATA = Path(__file__).parent / "data"
MULTIGPU = str(DATA / "openb_multigpu50_excerpt.csv")  # real rows: see data/SOURCE.md
NODES = str(DATA / "openb_nodes_excerpt.csv")

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
ITP = "job_id,submission_time,duration,num_gpu\nj1,10,100,1\n"
OPENB = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\np0,12000,16384,1,1000,,LS,Running,0,100,0\n"
)


def test_multigpu_pod_list_loads_as_shapes() -> None:
    pods = traces.read(MULTIGPU)
    assert len(pods) == 14
    assert [p.gpus for p in pods[:6]] == [1.0, 0.46, 1.0, 0.46, 1.0, 0.0]
    assert sorted(p.gpus for p in pods if p.gpus >= 2) == [2, 2, 4, 4, 8, 8]
    assert pods[8].name == "openb-pod-0017" and pods[8].cpu == 88000
    assert pods[8].ram == 327680 * 1024**2
    assert all(p.submit == 0.0 and p.duration == 0.0 for p in pods)


def test_multigpu_pod_list_runs_in_the_fill_experiment() -> None:
    pods = traces.read(MULTIGPU)
    inv = workload.inventory(NODES)
    for how in ("first-fit", "best-fit", "packer"):
        r = fill(pods, inv, how, 42)
        assert set(r.marks) == {90, 100, 110, 120, 130}
        assert 0 < r.marks[100] <= 100 and r.placed > 0


def test_fill_command_on_a_multigpu_list(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", MULTIGPU, "--fill", "--inventory", NODES, "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(0 < r["alloc_pct"]["100"] <= 100 for r in rows)


def test_a_replay_refuses_a_pod_list_without_times(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(
        UsageError, match=r"openb_multigpu50_excerpt\.csv.*no creation_time.*--fill"
    ):
        prepare(MULTIGPU, inventory="8")
    assert main(["simulate", MULTIGPU, "--inventory", "8"]) == 2
    err = capsys.readouterr().err
    assert "--fill" in err and "Traceback" not in err


def test_fill_without_pods_or_gpu_pods_is_an_error() -> None:
    inv = workload.inventory(NODES)
    with pytest.raises(UsageError, match="no pods"):
        fill([], inv, "packer", 42)
    cpu_only = [p for p in traces.read(MULTIGPU) if p.gpus == 0]
    with pytest.raises(UsageError, match="no pod asks for a GPU"):
        fill(cpu_only, inv, "packer", 42)


BAD = [
    # (file name, text, what the error must say)
    ("philly.csv", PHILLY + "2017-10-09 07:02:00,30\n",
     ["line 3", "'num_gpus' is missing", "truncated"]),
    ("philly.csv", PHILLY + "2017-13-09 07:02:00,30,1,30,x\n",
     ["line 3", "field 'timestamp'", "'2017-13-09 07:02:00'"]),
    ("philly.csv", PHILLY + "2017-10-09 07:02:00,,1,30,x\n", ["line 3", "field 'duration'", "empty"]),
    ("philly.csv", PHILLY + "2017-10-09 07:02:00,30,1,30,x,extra\n", ["line 3", "6 fields"]),
    ("itp.csv", ITP + "j2,20,-5,1\n", ["line 3", "field 'duration'", "'-5' is negative"]),
    ("itp.csv", ITP + "j2,20,nan,1\n", ["line 3", "field 'duration'", "not a finite number"]),
    ("itp.csv", ITP + "j2,20,inf,1\n", ["line 3", "field 'duration'", "not a finite number"]),
    ("itp.csv", ITP + "j2,-20,5,1\n", ["line 3", "field 'submission_time'", "negative"]),
    ("itp.csv", ITP + "j2,20,5,one\n", ["line 3", "field 'num_gpu'", "'one' is not a number"]),
    ("itp.csv", ITP + "j2,20,5,1.5\n", ["line 3", "field 'num_gpu'", "not a whole number"]),
    ("itp.csv", "job_id,submission_time,num_gpu\nj1,10,1\n", ["no column 'duration'"]),
    ("pods.csv", OPENB + "p1,6000,12288,1,460,,BE,Running,50,40,50\n",
     ["line 3", "field 'deletion_time'", "before creation_time 50"]),
    ("pods.csv", OPENB + "p1,6000,12288,1,0,,BE,Running,50,60,50\n",
     ["line 3", "field 'gpu_milli'", "not a share of one GPU"]),
    ("pods.csv", OPENB + "p1,6000,12288,1,460,,BE,Running,-5,60,50\n",
     ["line 3", "field 'creation_time'", "negative"]),
    ("pods.csv", OPENB + "p1,6000,NaN,1,460,,BE,Running,5,60,50\n",
     ["line 3", "field 'memory_mib'", "not a finite number"]),
    ("pods.csv", OPENB + "p1,6000,12288,1,460,,BE\n", ["line 3", "'pod_phase' is missing"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "says"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)]
)
def test_malformed_trace_names_file_line_and_field(
    tmp_path: Path, name: str, text: str, says: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        traces.read(str(path))
    msg = str(e.value)
    assert str(path) in msg
    for s in says:
        assert s in msg, msg


def test_malformed_trace_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "philly.csv"
    path.write_text(PHILLY + "2017-10-09 07:02:00,30\n")
    assert main(["simulate", str(path), "--inventory", "8"]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "num_gpus" in err and "Traceback" not in err


def _record(**change: object) -> str:
    job = Job(id=3, submit_time=100.0, request=Request(gpus=1))
    transition(job, State.RUNNING, now=110.0, gpus=(0,))
    transition(job, State.COMPLETED, now=170.0, exit_code=0)
    d = job.to_dict()
    for k, v in change.items():
        if v is None:
            del d[k]
        else:
            d[k] = v
    return json.dumps(d)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (_record(id=None), ["line 2", "field 'id' is missing"]),
        (_record(submit_time=-1.0), ["line 2", "field 'submit_time'", "-1.0"]),
        (_record(submit_time=math.nan), ["line 2", "field 'submit_time'", "nan"]),
        ("{not json", ["line 2", "not a JSON job record"]),
        (_record(attempts=[{"number": 1, "start": 200.0, "end": 150.0}]),
         ["line 2", "field 'attempts'", "attempt 1 runs from 200.0 to 150.0"]),
    ],
)  # fmt: skip
def test_malformed_job_records_name_the_line(tmp_path: Path, line: str, says: list[str]) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(_record() + "\n" + line + "\n")
    with pytest.raises(UsageError) as e:
        traces.read(str(path))
    for s in says:
        assert s in str(e.value), str(e.value)


def test_malformed_node_list_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,1024,-8,G2\n"
    )
    with pytest.raises(UsageError, match=r"line 3, field 'gpu': '-8' is negative"):
        workload.inventory(str(path))


def test_empty_trace_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "itp.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\n")
    with pytest.raises(UsageError, match="has no job"):
        traces.read(str(path))
