"""A config's ``[inventory]`` naming a GPU that is not there, as an admin or a user types it,
through the CLI (docs/admin.md "Inventory"; each case was taken silently before).

Two kinds, told apart as a demanding admin would expect:

- the file contradicts itself (``gpus = 4`` with ``unavailable = [9]``, a GPU named twice, an
  id that is no index nor UUID, an empty ``ban_names`` entry, ``memory`` without ``gpus``):
  refused like every other bad value, naming the file, key and value: `berth status` and
  `select` exit 2, `berth admin doctor` fails its config check, and `berth daemon` does not
  start;
- the file names a GPU this host lacks (an index past NVML's last, a UUID no GPU has, a UUID's
  prefix, a ``manage`` that leaves none): the hardware may change under a fixed file (a GPU
  out for repair, one file for several hosts), so status, select and the daemon go on with the
  GPUs there are and print a note naming the key, the value and the file; doctor fails on it
  and the daemon logs it at start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

SELF_CONTRADICTING = [
    ("gpus = 4\nunavailable = [9]\n",
     "[inventory] unavailable names GPU 9, but gpus = 4 declares GPUs 0 to 3"),
    ("gpus = 2\nmanage = [0, 2]\n", "[inventory] manage names GPU 2, but gpus = 2 declares"),
    ('gpus = 2\nban = ["GPU-9eacf565-bc54-4fa7-fb05-d9d6fcccec1a"]\n',
     "[inventory] ban names 'GPU-9eacf565-bc54-4fa7-fb05-d9d6fcccec1a', but gpus = 2 declares"),
    ("unavailable = [1, 1]\n", "[inventory] unavailable names GPU 1 twice; name each GPU once"),
    ('ban = [1, "01"]\n', "[inventory] ban names GPU 1 twice"),
    ('ban = ["-1"]\n', "[inventory] ban has '-1'; use GPU indices (0, 1) or UUIDs ('GPU-...')"),
    ('manage = ["cuda:0"]\n', "[inventory] manage has 'cuda:0'; use GPU indices"),
    ('ban = [""]\n', "[inventory] ban has ''; use GPU indices"),
    ('ban = ["MIG-4b5c"]\n',
     "[inventory] ban has 'MIG-4b5c'; berth hands out whole GPUs, not MIG instances"),
    ('ban_names = [""]\n', "[inventory] ban_names has ''; give parts of GPU names"),
    ("ban_names = [80]\n", "[inventory] ban_names has 80; give parts of GPU names"),
    ('memory = "80G"\n', "[inventory] memory is for declared GPUs (gpus = N)"),
    ('name = "A100"\n', "[inventory] name is for declared GPUs (gpus = N)"),
]  # fmt: skip


def _config(fake: Any, tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text("[inventory]\n" + text)
    return {"BERTH_CONFIG": str(path)}


@pytest.mark.parametrize(("text", "said"), SELF_CONTRADICTING)
def test_a_self_contradicting_inventory_is_refused_everywhere(
    fake_gpus: Any, tmp_path: Path, text: str, said: str
) -> None:
    fake_gpus.setup(n=2)
    env = _config(fake_gpus, tmp_path, text)
    where = f"config file {env['BERTH_CONFIG']!r}: "
    try:
        for command in (["status"], ["select", "-n", "1"], ["daemon"]):
            r = fake_gpus.berth(*command, env=env)
            assert r.returncode == 2, (command, r.stdout, r.stderr)
            assert where + said in r.stderr, (command, r.stderr)
            assert "Traceback" not in r.stderr and r.stdout == ""
        assert not os.path.exists(fake_gpus.socket)  # (the daemon did not start)
    finally:  # (one that did, before the fix, is not left running)
        fake_gpus.berth("daemon", "--stop")
    r = fake_gpus.berth("admin", "doctor", "--json", env=env, timeout=120)
    check = next(c for c in json.loads(r.stdout)["checks"] if c["check"] == "config")
    assert r.returncode == 2 and check["level"] == "fail" and said in check["said"]


NOT_HERE = [
    ("unavailable = [9]\n", ["[inventory] unavailable names GPU 9, but NVML sees 2 GPUs here "
                             "(0, 1); remove it from {file}, or name a GPU `nvidia-smi -L` lists"]),
    ('ban = ["GPU-0000"]\n', ["[inventory] ban names 'GPU-0000', but no GPU here has that UUID; "
                              "remove it from {file}"]),
    ('ban = ["GPU-9eacf565"]\n', ["[inventory] ban names 'GPU-9eacf565', only the start of GPU 0's "
                                 "UUID, which matches no GPU; give it whole "
                                 "('GPU-9eacf565-bc54-4fa7-fb05-d9d6fcccec1a') in {file}"]),
    ("manage = [7]\n", ["[inventory] manage names GPU 7, but NVML sees 2 GPUs here",
                        "[inventory] manage names none of the GPUs here, so berth manages none "
                        "(NVML sees 2 GPUs here (0, 1)); name some of them in {file}"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "notes"), NOT_HERE)
def test_a_gpu_this_host_lacks_is_said_and_the_rest_works(
    fake_gpus: Any, tmp_path: Path, text: str, notes: list[str]
) -> None:
    fake_gpus.setup(n=2)
    env = _config(fake_gpus, tmp_path, text)
    notes = [n.format(file=env["BERTH_CONFIG"]) for n in notes]
    status = fake_gpus.berth("status", env=env)
    assert status.returncode == 0 and "NVIDIA A100" in status.stdout, status.stderr
    select = fake_gpus.berth("select", "-n", "1", env=env)
    for r, prog in ((status, "berth"), (select, "berth select")):
        for note in notes:
            assert f"{prog}: note: {note}" in r.stderr, (prog, r.stderr)
    if "manage" not in text:  # (the GPUs there are still chosen, and run)
        assert select.returncode == 0 and select.stdout.strip() in ("0", "1"), select.stderr
        run = fake_gpus.berth("run", "-n", "1", "--", "true", env=env)
        assert run.returncode == 0 and f"berth run: note: {notes[0]}" in run.stderr, run.stderr
    r = fake_gpus.berth("admin", "doctor", "--json", env=env, timeout=120)
    checks = [c for c in json.loads(r.stdout)["checks"] if c["check"] == "inventory"]
    assert r.returncode == 2 and [c["level"] for c in checks] == ["fail"] * len(notes)
    for check, note in zip(checks, notes, strict=True):
        assert note.startswith(check["said"]) or f"{check['said']}; {check['fix']}".startswith(note)


def test_the_daemon_starts_and_says_what_is_not_here(fake_gpus: Any, tmp_path: Path) -> None:
    fake_gpus.setup(n=3)
    env = _config(fake_gpus, tmp_path, "unavailable = [1, 5]\n")
    try:
        r = fake_gpus.berth("daemon", env=env)
        assert r.returncode == 0, r.stderr
        said = "[inventory] unavailable names GPU 5, but NVML sees 3 GPUs here (0 to 2)"
        assert f"berth daemon: note: {said}; remove it from {env['BERTH_CONFIG']}" in r.stderr
        log = Path(fake_gpus.state_dir) / "daemon.log"
        wait_until(lambda: f"check fail  inventory: {said}" in log.read_text(), timeout=20,
                   message="the daemon to log the inventory check")  # fmt: skip
        queue = fake_gpus.berth("queue", env=env)
        assert queue.returncode == 0, queue.stderr
    finally:
        fake_gpus.berth("daemon", "--stop", env=env)


def test_doctor_warns_of_declared_gpus_over_real_ones(fake_gpus: Any, tmp_path: Path) -> None:
    """`berth status` said so already; doctor said only "ok, NVML not used"."""
    fake_gpus.setup(n=8)
    env = _config(fake_gpus, tmp_path, "gpus = 5\n")
    r = fake_gpus.berth("admin", "doctor", "--json", env=env, timeout=120)
    check = next(c for c in json.loads(r.stdout)["checks"] if c["check"] == "inventory")
    assert check["level"] == "warn"
    assert (
        "gpus = 5 declares 5 logical GPUs, so berth does not manage the 8 NVIDIA" in check["said"]
    )
