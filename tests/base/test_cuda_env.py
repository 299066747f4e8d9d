"""The CUDA environment berth gives a command on its GPUs is built in one place
(berth/devices/visible.py's ``cuda_env``, issue 38): `berth run` (claims/launch.py), a lease
(api/lease.py) and the daemon's jobs (daemon/engine/starts.py) take it from there. Read from
the source: no other module of berth sets ``CUDA_VISIBLE_DEVICES`` or ``CUDA_DEVICE_ORDER``
(the compat/ shims, which copy other tools' own ways, aside)."""

from __future__ import annotations

import ast
from pathlib import Path

from berth.devices.visible import cuda_env

ROOT = Path(__file__).resolve().parents[2] / "berth"
NAMES = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
HOME = {"berth/devices/visible.py"}


def _sets(tree: ast.AST) -> list[int]:
    """Lines that set one of NAMES: ``x["NAME"] = ...``, ``f(NAME=...)``, ``{"NAME": ...}``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in NAMES:
                out.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg in NAMES:
            out.append(node.value.lineno)
        elif isinstance(node, ast.Dict):
            out += [k.lineno for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES]
    return out


def test_the_checker_sees_each_way_of_setting_it() -> None:
    tree = ast.parse(
        'env["CUDA_VISIBLE_DEVICES"] = "0"\nenv.update(CUDA_DEVICE_ORDER="PCI_BUS_ID")\n'
        'x = {"CUDA_VISIBLE_DEVICES": "1"}\ny = env.get("CUDA_VISIBLE_DEVICES")\n'
    )
    assert sorted(_sets(tree)) == [1, 2, 3]


def test_only_one_module_builds_the_cuda_environment() -> None:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = str(path.relative_to(ROOT.parent))
        if name in HOME or name.startswith("berth/compat/"):
            continue
        lines = _sets(ast.parse(path.read_text(), name))
        if lines:
            found[name] = lines
    assert found == {}, f"the CUDA environment set outside devices/visible.py: {found}"


def test_cuda_env_numbers_the_gpus_as_nvml_does_and_none_is_minus_one() -> None:
    assert cuda_env([2, 0]) == {"CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cuda_env(["1"])["CUDA_VISIBLE_DEVICES"] == "1"
    assert cuda_env([]) == {"CUDA_VISIBLE_DEVICES": "-1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
