"""`berth submit` as mgpu_srun is used (issue 10): `--gpu-ids 0,1` asks for both
GPUs, GPU ranges, the earlier tools' option names as aliases, and a command given as one quoted
string refused with how to run it."""

from __future__ import annotations

import json

import records


def _request(daemon, *args: str) -> dict:  # type: ignore[no-untyped-def]
    out = daemon.berth("submit", "--parsable", "--hold", *args)
    assert out.returncode == 0, out.stderr
    job = daemon.job(int(out.stdout))
    request: dict = job["request"]
    return request


def test_gpu_ids_without_g_asks_for_exactly_those_gpus(daemon):
    daemon.start()
    # mgpu_srun: mgpu_srun --gpu-ids 0,1 --mem 8000 --time-limit 600 -- torchrun --nproc_per_node=2
    out = daemon.berth("submit", "--parsable", "--gpu-ids", "0,1", "--mem", "8000",
                       "--time-limit", "600", "--", *daemon.workload("--seconds", "0", "--record", daemon.record))  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout)
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    start = next(e for e in records.read(daemon.record) if e["event"] == "start")
    assert sorted(start["cvd"].split(",")) == ["0", "1"]  # both GPUs, as torchrun expects
    job = daemon.job(job_id)
    assert job["request"]["gpus"] == 2 and job["request"]["gpu_ids"] == [0, 1]
    assert job["time_limit"] == 600 and job["request"]["mem"] == 8000 * 1024**2


def test_g_with_gpu_ids_is_n_gpus_out_of_them(daemon):
    daemon.start()
    req = _request(daemon, "-g", "1", "--gpu-ids", "0,1", "--", "true")
    assert req["gpus"] == 1 and req["gpu_ids"] == [0, 1]
    req = _request(daemon, "-g", "0.5", "--gpu-ids", "2", "--", "true")
    assert req["gpus"] == 0.5 and req["gpu_ids"] == [2]


def test_gpu_lists_take_ranges(daemon):
    daemon.start()
    req = _request(daemon, "--gpu-ids", "0-2", "--", "true")
    assert req["gpus"] == 3 and req["gpu_ids"] == [0, 1, 2]
    req = _request(daemon, "-g", "1", "--gpu-ids", "0-1,3", "--prefer", "3", "--", "true")
    assert req["gpu_ids"] == [0, 1, 3] and req["prefer"] == [3]


def test_bad_gpu_lists_are_refused_and_change_nothing(daemon):
    daemon.start()
    for args, needle in (
        (["--gpu-ids", "3-1"], "--gpu-ids '3-1': range '3-1' goes down"),
        (["--gpu-ids", "a-b"], "--gpu-ids 'a-b': 'a-b' is not a range"),
        (["--gpu-ids", "0,x"], "--gpu-ids '0,x': 'x' is not a GPU index"),
        (["--prefer", "2-0"], "--prefer '2-0'"),
        (["-g", "3", "--gpu-ids", "0,1"], "more GPUs than --gpu-ids names (2)"),
    ):
        out = daemon.berth("submit", *args, "--", "true")
        assert out.returncode == 2, (args, out.stderr)
        assert needle in out.stderr, out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_seed_option_names_are_aliases(daemon):
    daemon.start()
    out = daemon.berth("submit", "--parsable", "--hold", "--count", "2", "--time-limit", "1:00",
                       "--env-setup-cmd", "export X=1", "--", "true")  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = json.loads(daemon.berth("show", "--json", out.stdout.strip()).stdout)
    assert job["request"]["gpus"] == 2 and job["time_limit"] == 60
    assert job["env_setup"] == "export X=1"
    helped = daemon.berth("help", "submit").stdout
    for alias in ("--time-limit", "--env-setup-cmd", "--interactive", "--count"):
        assert alias in helped, alias


def test_one_quoted_string_is_refused_with_how_to_run_it(daemon):
    daemon.start()
    out = daemon.berth("submit", "--", "python job.py --x 5")
    assert out.returncode == 2
    assert "one quoted string" in out.stderr and "--wrap 'python job.py --x 5'" in out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
