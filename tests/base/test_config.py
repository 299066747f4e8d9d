"""The config file and the BERTH_* environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from berth import config
from berth.errors import EXIT_USAGE, ConfigError
from berth.units import GIB


@pytest.fixture
def cfg_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("BERTH_CONFIG", str(path))
    for var in ("BERTH_CLAIMS_DIR", "BERTH_STATE_DIR", "BERTH_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    return path


def test_declared_inventory_like_seed_004_init(cfg_file: Path) -> None:
    cfg_file.write_text('[inventory]\ngpus = 5\nunavailable = [3, 4]\nmemory = "80G"\n')
    cfg = config.load()
    inv = cfg.inventory
    assert inv.declared == 5
    assert inv.memory == 80 * GIB
    assert inv.is_banned(3, "LOGICAL-3", "logical GPU")
    assert inv.is_banned(2, "LOGICAL-2", "logical GPU") is None


def test_manage_and_ban_like_seed_000(cfg_file: Path) -> None:
    cfg_file.write_text(
        '[inventory]\nmanage = [0, 1, "GPU-aaaa"]\nban = [1]\nban_names = ["K80"]\n'
    )
    inv = config.load().inventory
    assert inv.is_banned(0, "GPU-x", "NVIDIA A100") is None
    assert "ban" in (inv.is_banned(1, "GPU-y", "NVIDIA A100") or "")
    assert "manage" in (inv.is_banned(2, "GPU-z", "NVIDIA A100") or "")
    assert inv.is_banned(5, "GPU-aaaa", "Tesla K80") is not None  # by name
    assert inv.is_banned(5, "GPU-aaaa", "NVIDIA A100") is None  # by uuid


def test_environment_overrides_file(cfg_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg_file.write_text('[claims]\ndir = "/from/file"\n[daemon]\nsocket = "/s"\n')
    monkeypatch.setenv("BERTH_CLAIMS_DIR", "/from/env")
    cfg = config.load()
    assert cfg.claims_dir == "/from/env"
    assert cfg.socket == "/s"
    assert cfg.files == (str(cfg_file),)


def test_empty_berth_config_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTH_CONFIG", "")
    assert config.config_files() == []
    assert config.load().inventory.declared is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[inventory\ngpus = 4\n", "malformed"),
        ("[inventroy]\ngpus = 4\n", "unknown section [inventroy]"),
        ("[inventory]\ngpu = 4\n", "unknown key 'gpu'"),
        ('[inventory]\ngpus = "four"\n', "gpus = 'four' must be an integer"),
        ("[inventory]\ngpus = 0\n", "gpus = 0 must be 1 to 1024"),
        ('[inventory]\nmemory = "lots"\n', "'lots'"),
        ("[daemon]\npoll_interval = -1\n", "poll_interval = -1"),
        ('[inventory]\nban = [1.5]\n', "1.5"),
    ],
)
def test_bad_config_is_a_usage_error_naming_the_value(
    cfg_file: Path, text: str, needle: str
) -> None:
    cfg_file.write_text(text)
    with pytest.raises(ConfigError) as e:
        config.load()
    assert needle in str(e.value)
    assert str(cfg_file) in str(e.value)
    assert e.value.exit_code == EXIT_USAGE


def test_missing_explicit_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        config.load()


def test_user_file_overrides_system_file_per_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    system = tmp_path / "etc.toml"
    user_home = tmp_path / "xdg"
    (user_home / "berth").mkdir(parents=True)
    system.write_text('[claims]\ndir = "/sys"\nadmin_group = "gpuadmin"\n')
    (user_home / "berth" / "config.toml").write_text('[claims]\ndir = "/user"\n')
    monkeypatch.delenv("BERTH_CONFIG", raising=False)
    monkeypatch.delenv("BERTH_CLAIMS_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user_home))
    monkeypatch.setattr(config, "SYSTEM_CONFIG", str(system))
    cfg = config.load()
    assert cfg.claims_dir == "/user"
    assert cfg.admin_group == "gpuadmin"


def test_each_key_is_declared_once_with_its_help_in_the_example() -> None:
    # (berth help config prints the module's docstring; its example is made from the keys)
    doc = config.__doc__ or ""
    for key in config.KEYS:
        assert f"[{key.section}]" in doc and f"    {key.name} = {key.example}" in doc, key.name
        assert key.help, key.name
    cfg = config.Config()
    assert cfg.poll_interval == 5.0 and cfg.backend == "local" and cfg.http is None
    assert config.Inventory(declared=2).declared == 2
    with pytest.raises(TypeError, match="gpus"):
        config.Inventory(gpus=2)  # (the attribute's name, not the file's)


def test_the_notify_example_of_berth_help_config_loads(cfg_file: Path) -> None:
    from textwrap import dedent

    from berth.config import notify as config_notify

    cfg_file.write_text(dedent(config_notify.EXAMPLE))
    cfg = config.load()
    (hook,) = cfg.notify.webhooks
    assert hook.url.startswith("https://hooks.slack.com/") and hook.users == {"alice"}
    assert hook.events == {"job_fail", "job_timeout", "gpu_lost", "disk_full"}
    assert hook.headers == {"Authorization": "Bearer s3cret"} and hook.timeout == 10.0
    assert (hook.retries, hook.backoff) == (3, 2.0)  # (the defaults)
    mail = cfg.notify.mail
    assert mail is not None and mail.to == ("gpu-admins@lab.example",)
    assert mail.smtp == ("localhost", 25) and mail.mail_from == "berth"
    assert "[[notify.webhooks]]" in (config.__doc__ or "")  # (in `berth help config`)
    cfg_file.write_text('[notify]\nwebhooks = "http://x/"\n')
    with pytest.raises(ConfigError, match=re.escape("webhooks must be [[notify.webhooks]] tables")):
        config.load()


def test_projects_are_tables_of_their_own(cfg_file: Path) -> None:
    cfg_file.write_text(
        "[projects.vision]\nmax_gpus = 8\nmax_queued = 100\nshares = 2\n"
        'users = ["alice"]\ngroups = ["vision-lab"]\n'
        "[projects.nlp]\n"
        '[scheduling]\nrequire_project = true\ndefault_project = "nlp"\n'
    )
    cfg = config.load()
    vision, nlp = cfg.projects["vision"], cfg.projects["nlp"]
    assert (vision.max_gpus, vision.max_queued, vision.shares) == (8.0, 100, 2.0)
    assert vision.users == ("alice",) and vision.groups == ("vision-lab",)
    assert not vision.open and nlp.open and nlp.max_gpus is None and nlp.shares == 1.0
    assert cfg.require_project and cfg.default_project == "nlp"
    assert "[projects.vision]" in (config.__doc__ or "")  # (in `berth help config`)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[projects.vision]\nmax_gpus = 0\n", "[projects.vision] max_gpus = 0 must be"),
        ("[projects.vision]\nmax_queued = 1.5\n", "max_queued = 1.5 must be an integer"),
        ('[projects.vision]\nusers = "alice"\n', "users = 'alice' must be a list of names"),
        ("[projects.vision]\nmax_gpu = 2\n", "unknown key 'max_gpu'; known: max_gpus"),
        ('[projects."a b"]\n', "'a b' is not a project name"),
        ('[scheduling]\ndefault_project = "x"\n', "default_project = 'x' is not a configured"),
    ],
)
def test_a_bad_project_table_is_refused_naming_the_value(
    cfg_file: Path, text: str, says: str
) -> None:
    cfg_file.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(says)):
        config.load()


def test_a_users_gpus_below_the_admins_unavailable_names_both_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The admin's ``unavailable = [3]`` under a user's own ``gpus = 2``: the message says
    where each key was read, so the user knows which file to change."""
    system = tmp_path / "etc.toml"
    (tmp_path / "xdg" / "berth").mkdir(parents=True)
    system.write_text("[inventory]\ngpus = 4\nunavailable = [3]\n")
    user = tmp_path / "xdg" / "berth" / "config.toml"
    user.write_text("[inventory]\ngpus = 2\n")
    monkeypatch.delenv("BERTH_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(config, "SYSTEM_CONFIG", str(system))
    with pytest.raises(ConfigError) as e:
        config.load()
    assert str(e.value) == (
        f"config file {str(system)!r}: [inventory] unavailable names GPU 3, but gpus = 2 "
        f"(in {str(user)!r}) declares GPUs 0 to 1 (LOGICAL-0 to LOGICAL-1): name those, or "
        "raise gpus"
    )
