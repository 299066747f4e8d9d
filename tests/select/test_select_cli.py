"""`berth select` against fake GPUs, as a user runs it (the issue's acceptance cases)."""

from __future__ import annotations

import pytest

from berth.errors import EXIT_NO_DRIVER, EXIT_UNSATISFIED, EXIT_USAGE


@pytest.fixture
def busy13(fake_gpus):
    """4 fake GPUs, workloads on GPUs 1 and 3."""
    fake_gpus.setup(n=4)
    fake_gpus.spawn_workload(visible="1", mem="10G", util=50)
    fake_gpus.spawn_workload(visible="3", mem="20G", util=80)
    return fake_gpus


def test_select_two_idle_gpus(busy13):
    r = busy13.berth("select", "-n", "2")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.strip().split(",")) == ["0", "2"]


def test_select_three_explains_the_shortfall(busy13):
    r = busy13.berth("select", "-n", "3")
    assert r.returncode == EXIT_UNSATISFIED
    assert r.stdout == ""
    assert "only 2 of 3 GPUs qualify" in r.stderr
    assert "GPU 1: utilisation 50% > 0%, 1 process > 0" in r.stderr
    assert "GPU 3: utilisation 80% > 0%, 1 process > 0" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_silent_prints_nothing(busy13):
    r = busy13.berth("select", "-n", "3", "--silent")
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_UNSATISFIED, "", "")
    r = busy13.berth("select", "--silent")
    assert r.returncode == 0 and r.stdout == ""


def test_packed_with_one_process_allowed_picks_busy_gpus(busy13):
    r = busy13.berth("select", "-n", "2", "--max-procs", "1", "--order", "packed")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3,1"  # GPU 3 uses more memory: the busiest first


def test_explain_and_uuid(busy13):
    r = busy13.berth("select", "--explain", "--uuid", "--order", "free", "--only", "0,1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == busy13.uuids[0]
    assert "GPU 0: chosen" in r.stderr
    assert "GPU 1: utilisation 50% > 0%; 1 process > 0" in r.stderr
    assert "GPU 2: not in --only" in r.stderr


def test_min_free_name_exclude_and_prefer(fake_gpus):
    fake_gpus.setup(n=4)
    fake_gpus.update(0, memory_used="70G")
    fake_gpus.update(3, name="Tesla T4")
    r = fake_gpus.berth("select", "-n", "2", "--min-free", "20GiB", "--order", "index")
    assert r.stdout.strip() == "1,2"
    r = fake_gpus.berth("select", "--name", "t4")
    assert r.stdout.strip() == "3"
    r = fake_gpus.berth("select", "-n", "2", "--exclude", "1", "--prefer", "3", "--order", "index")
    assert r.stdout.strip() == "3,0"


def test_power_not_supported_is_selectable_unless_filtered(fake_gpus):
    fake_gpus.setup(n=2)
    fake_gpus.update(1, power_mw=None)
    r = fake_gpus.berth("select", "--only", "1")
    assert (r.returncode, r.stdout.strip()) == (0, "1")
    r = fake_gpus.berth("select", "--only", "1", "--max-power", "300")
    assert r.returncode == EXIT_UNSATISFIED
    assert "power n/a: --max-power needs a reading" in r.stderr
    r = fake_gpus.berth("select", "-n", "2", "--max-power", "100", "--explain")
    assert r.returncode == EXIT_UNSATISFIED and "GPU 0: chosen" in r.stderr


def test_lost_gpu_is_never_selected(fake_gpus):
    fake_gpus.setup(n=2)
    fake_gpus.inject(0, "*", "GPU_IS_LOST")
    for _ in range(5):
        r = fake_gpus.berth("select")
        assert r.stdout.strip() == "1"
    r = fake_gpus.berth("select", "-n", "2")
    assert r.returncode == EXIT_UNSATISFIED
    assert "GPU 0: unhealthy" in r.stderr


def test_cuda_visible_devices_limits_the_choice(fake_gpus):
    fake_gpus.setup(n=4)
    r = fake_gpus.berth("select", "-n", "2", env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert sorted(r.stdout.strip().split(",")) == ["2", "3"]
    r = fake_gpus.berth("select", "-n", "3", env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert r.returncode == EXIT_UNSATISFIED
    # a shortfall says which GPUs the variable hid, as berth.select() does (docs/select.md)
    assert "CUDA_VISIBLE_DEVICES=2,3 shows 2 of the 4 GPUs here (GPUs shown, by NVML index: " \
        "2, 3); --all considers every GPU" in r.stderr  # fmt: skip
    r = fake_gpus.berth("select", env={"CUDA_VISIBLE_DEVICES": ""})  # set, empty: none
    assert r.returncode == EXIT_UNSATISFIED and r.stdout == ""
    assert "CUDA_VISIBLE_DEVICES= shows 0 of the 4 GPUs here" in r.stderr
    r = fake_gpus.berth("select", "-n", "3", "--all", env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert r.returncode == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--min-free", "lots"], "'lots'"),
        (["-n", "0"], "-n/--count '0'"),
        (["-n", "two"], "-n/--count 'two'"),
        (["--only", "99"], "--only 99"),
        (["--exclude", "GPU-nope"], "--exclude GPU-nope"),
        (["--order", "fastest"], "--order 'fastest'"),
        (["--max-util", "150"], "--max-util '150'"),
        (["--max-procs", "-1"], "--max-procs '-1'"),
        (["--max-power", "lots"], "--max-power 'lots'"),
    ],
)
def test_bad_input_is_one_line_naming_the_value(fake_gpus, args, needle):
    fake_gpus.setup(n=4)
    r = fake_gpus.berth("select", *args)
    assert r.returncode == EXIT_USAGE, r.stderr
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""


def test_malformed_config_is_a_usage_error(fake_gpus, tmp_path):
    fake_gpus.setup(n=2)
    bad = tmp_path / "bad.toml"
    bad.write_text("[inventory\ngpus = 2\n")
    r = fake_gpus.berth("select", env={"BERTH_CONFIG": str(bad)})
    assert r.returncode == EXIT_USAGE
    assert str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_config_bans_are_reasons(fake_gpus, tmp_path):
    fake_gpus.setup(n=3)
    cfg = tmp_path / "berth.toml"
    cfg.write_text(f'[inventory]\nban = [0, "{fake_gpus.uuids[1]}"]\n')
    r = fake_gpus.berth("select", "-n", "2", env={"BERTH_CONFIG": str(cfg)})
    assert r.returncode == EXIT_UNSATISFIED
    assert "GPU 0: banned in config" in r.stderr and "GPU 1: banned in config" in r.stderr
    r = fake_gpus.berth("select", env={"BERTH_CONFIG": str(cfg)})
    assert r.stdout.strip() == "2"


def test_no_driver_is_exit_3_with_one_message(fake_gpus):
    fake_gpus.setup(n=2)
    fake_gpus.remove_state()
    r = fake_gpus.berth("select")
    assert r.returncode == EXIT_NO_DRIVER
    assert "NVIDIA driver" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_declared_inventory_works_without_a_driver(fake_gpus, tmp_path):
    fake_gpus.setup(n=2)
    fake_gpus.remove_state()
    cfg = tmp_path / "berth.toml"
    cfg.write_text("[inventory]\ngpus = 5\nunavailable = [3, 4]\n")
    env = {"BERTH_CONFIG": str(cfg)}
    r = fake_gpus.berth("select", "-n", "3", "--order", "index", env=env)
    assert (r.returncode, r.stdout.strip()) == (0, "0,1,2"), r.stderr
    r = fake_gpus.berth("select", "-n", "4", env=env)
    assert r.returncode == EXIT_UNSATISFIED
    assert "GPU 3: declared unavailable" in r.stderr


def test_help_shows_examples(fake_gpus):
    r = fake_gpus.berth("help", "select")
    assert r.returncode == 0
    assert "berth select -n 2 --min-free 20G" in r.stdout


def test_gpus_held_by_berth_claims_are_not_selected(fake_gpus):
    import berth

    fake_gpus.setup(n=3)
    with berth.acquire(1, only="0", timeout=10):
        r = fake_gpus.berth("select", "-n", "3")
        assert r.returncode == EXIT_UNSATISFIED
        assert "GPU 0: held by berth claims: 1.0 of 1.0" in r.stderr
        r = fake_gpus.berth("select", "-n", "2")
        assert sorted(r.stdout.strip().split(",")) == ["1", "2"]
    r = fake_gpus.berth("select", "-n", "3")
    assert r.returncode == 0, r.stderr
