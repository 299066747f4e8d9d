"""`berth admin install` / `uninstall` (issue 39.1): the unit, the tmpfiles rule and the config
written under a --root from the package's own files; a changed file is not overwritten without
--force; uninstall removes only what install wrote. contrib/systemd is generated from them."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from berth.admin import install
from berth.cli import daemon as daemon_cli
from berth.cli.main import _parser

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib" / "systemd"
BERTH = str(Path(sys.executable).parent / "berth")  # the venv's script


def _berth(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BERTH, *args], capture_output=True, text=True, timeout=120,
                          env=env)  # fmt: skip


def _everything(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _unit(path: Path) -> configparser.SectionProxy:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(path)
    return unit["Service"]


def test_install_writes_the_unit_rule_and_config_under_root(tmp_path: Path, fake_gpus: Any) -> None:
    fake_gpus.setup(n=2)
    root = tmp_path / "root"
    out = _berth("admin", "install", "--root", str(root), env=fake_gpus.env)
    assert out.returncode == 0, out.stderr
    assert sorted(_everything(root)) == [
        "etc/berth/config.toml",
        "etc/systemd/system/berth.service",
        "etc/tmpfiles.d/berth.conf",
    ]  # (nothing outside --root: the test's tmp dir holds all it wrote)
    service = _unit(root / "etc/systemd/system/berth.service")
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == BERTH  # the berth that ran the install
    assert _parser("daemon", daemon_cli).parse_args(argv[2:]).system
    assert service["KillMode"] == "process" and service["Delegate"] == "yes"
    assert "KillMode=process: stopping" in out.stdout and "Delegate=yes" in out.stdout
    rule = (root / "etc/tmpfiles.d/berth.conf").read_text()
    assert "d /run/berth 1777 root root -" in rule
    config = (root / "etc/berth/config.toml").read_text()
    assert fake_gpus.uuids[0] in config and fake_gpus.uuids[1] in config  # the GPUs found
    assert 'admin_group = "berth-admin"' in config
    env = {**fake_gpus.env, "BERTH_CONFIG": str(root / "etc/berth/config.toml")}
    check = subprocess.run([BERTH, "help", "config"], env=env, capture_output=True, timeout=60)
    assert check.returncode == 0  # (it reads as berth's config)
    from berth import config as config_mod

    os.environ["BERTH_CONFIG"] = env["BERTH_CONFIG"]
    try:
        config_mod.reset()
        assert config_mod.get().admin_group == "berth-admin"
    finally:
        del os.environ["BERTH_CONFIG"]
        config_mod.reset()
    assert "systemctl enable --now berth" in out.stdout
    assert "systemd-tmpfiles --create /etc/tmpfiles.d/berth.conf" in out.stdout


def test_no_driver_declares_the_gpus_given(tmp_path: Path) -> None:
    root = tmp_path / "root"
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}  # (no libnvidia-ml here)
    out = _berth("admin", "install", "--root", str(root), "--gpus", "3", env=env)
    assert out.returncode == 0, out.stderr
    assert "[inventory]\ngpus = 3\n" in (root / "etc/berth/config.toml").read_text()


def test_dry_run_writes_nothing_and_a_changed_file_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "root"
    out = _berth("admin", "install", "--root", str(root), "--dry-run", "--gpus", "1")
    assert out.returncode == 0 and "would write" in out.stdout and not root.exists()
    assert _berth("admin", "install", "--root", str(root), "--gpus", "1").returncode == 0
    again = _berth("admin", "install", "--root", str(root), "--gpus", "1")
    assert again.returncode == 0 and again.stdout.count("unchanged ") == 3
    unit = root / "etc/systemd/system/berth.service"
    unit.write_text(unit.read_text().replace("RestartSec=2s", "RestartSec=9s"))  # an admin's edit
    before = _everything(root)
    refused = _berth("admin", "install", "--root", str(root), "--gpus", "2")
    assert refused.returncode == 2 and str(unit) in refused.stderr and "--force" in refused.stderr
    assert _everything(root) == before  # refused: nothing changed, the config neither
    forced = _berth("admin", "install", "--root", str(root), "--gpus", "2", "--force")
    assert forced.returncode == 0 and "RestartSec=2s" in unit.read_text()
    assert "RestartSec=9s" in Path(f"{unit}.before-berth").read_text()  # (the admin's, kept)
    assert "gpus = 2" in (root / "etc/berth/config.toml").read_text()  # berth's own: updated


def test_uninstall_removes_what_install_wrote_and_keeps_what_was_edited(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert _berth("admin", "install", "--root", str(root), "--gpus", "1").returncode == 0
    state = root / "var/lib/berth"
    state.mkdir(parents=True)
    (state / "berth.db").write_bytes(b"jobs")
    wants = root / install.WANTS.lstrip("/")
    wants.parent.mkdir(parents=True)
    wants.symlink_to(install.UNIT)
    config = root / "etc/berth/config.toml"
    config.write_text(config.read_text() + "# mine\n")
    out = _berth("admin", "uninstall", "--root", str(root))
    assert out.returncode == 0, out.stderr
    assert sorted(_everything(root)) == ["etc/berth/config.toml", "var/lib/berth/berth.db"]
    assert not os.path.lexists(wants) and f"kept {config}" in out.stdout
    assert _berth("admin", "uninstall", "--root", str(root), "--force").returncode == 0
    assert sorted(_everything(root)) == ["var/lib/berth/berth.db"]  # never the state


def test_root_with_enable_is_refused() -> None:
    out = _berth("admin", "install", "--root", "/tmp/x-never", "--enable")
    assert out.returncode == 2 and "--root" in out.stderr and not os.path.exists("/tmp/x-never")


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` on the installed unit, where the tool exists (docs/testing.md:
    without it the test checks the unit's syntax itself and says so on stderr)."""
    root = tmp_path / "root"
    assert _berth("admin", "install", "--root", str(root), "--gpus", "1").returncode == 0
    unit = root / "etc/systemd/system/berth.service"
    tool = shutil.which("systemd-analyze")
    if tool is None:
        sys.stderr.write("NOTE: systemd-analyze not installed: checked the unit's syntax only\n")
        service = _unit(unit)
        assert os.path.isabs(shlex.split(service["ExecStart"])[0]) and service["Type"] == "simple"
        return
    out = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=120)
    problems = [line for line in out.stderr.splitlines() if "berth.service" in line]
    assert out.returncode == 0 and problems == [], out.stderr


def test_contrib_copies_are_generated_from_the_package() -> None:
    want = install.contrib()
    for name, text in want.items():
        assert (CONTRIB / name).read_text() == text, (
            f"contrib/systemd/{name} is stale: regenerate it with `python -c 'from "
            'berth.admin.install import contrib; [open("contrib/systemd/" + n, "w")'
            ".write(t) for n, t in contrib().items()]'`"
        )
