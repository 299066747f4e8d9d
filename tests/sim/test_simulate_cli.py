from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.cli.main import main

DATA = Path(__file__).parent / "data"


def test_compare_policies_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(DATA / "itp_cluster10.csv"), "--inventory", "8",
                 "--load", "0.9,1.2", "--policy", "fifo,sjf,balanced"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert "JCT mean h" in lines[0] and "xfifo" in lines[0]
    assert sum(1 for line in lines if " sjf " in line) == 2
    assert "dropped 2 jobs" in out  # the two 16-GPU jobs


def test_json_and_plot_without_matplotlib(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["simulate", str(DATA / "philly_head300.csv"), "--inventory", "2x4",
                 "--policy", "all", "--json", "--plot", str(tmp_path / "plots")])  # fmt: skip
    cap = capsys.readouterr()
    assert code == 0
    runs = json.loads(cap.out)["runs"]
    assert [r["policy"] for r in runs] == [
        "fifo", "fifo-backfill", "priority", "sjf", "fairshare", "balanced", "guarded",
    ]  # fmt: skip
    assert all(0 < r["utilisation"] <= 1 for r in runs)
    assert all("jain" in r for r in runs)  # several VCs: per-tenant fairness
    try:
        import matplotlib  # noqa: F401

        assert (tmp_path / "plots" / "jct_cdf.png").exists()
    except ImportError:
        assert "--plot needs matplotlib" in cap.err


def test_bad_input_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["simulate", str(DATA / "itp_cluster10.csv"), "--policy", "lifo"]) == 2
    assert "unknown name 'lifo'" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "none.csv")]) == 2
    assert main(["simulate"]) == 2
    assert "name a trace file" in capsys.readouterr().err


def test_fill_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        + "".join(f"p{i},4000,4096,1,{m},,LS,Running,{i},{i + 9},{i}\n"
                  for i, m in enumerate([1000, 470, 810, 320, 650, 230]))
    )  # fmt: skip
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                     + "".join(f"n{i},64000,262144,8,G2\n" for i in range(4)))  # fmt: skip
    code = main(
        ["simulate", str(pods), "--fill", "--inventory", str(nodes), "--seeds", "1-2", "--json"]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["placement"] for r in rows] == ["first-fit", "best-fit", "packer"]
    assert all(r["alloc_pct"]["100"] <= 100 for r in rows)
