"""berth's one import rule (docs/ARCHITECTURE.md, "Imports"): what of it a machine can check.

- Imports for the type checker only sit under ``if TYPE_CHECKING:`` after the line
  ``TYPE_CHECKING = False``: one spelling in every file, never ``typing.TYPE_CHECKING`` (which
  imports ``typing``: ~2 ms on every CLI start; tests/base/test_startpath.py keeps it off).
- An import inside a function is lazy for a reason, and says which in a comment on its line
  (``# heavy``, ``# rare: --json``, ``# cycle``...); so never of a module the same file imports
  at its top, nor of ``os``, ``sys``, ``berth.errors`` or ``berth.units`` (always loaded).
- Modules that run only in the daemon process or the simulator (daemon/, web/, sim/, core/)
  import at their top; an import inside a function there breaks an import cycle and says so
  with ``# cycle`` on its line (or loads an optional dependency: ``# optional``).

Which lazy import on the CLI's start path is worth it is a judgement (the rule: heavy, or
needed by a rare branch); the start-path test and bench/startup.py measure the result.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "berth"
ALWAYS = frozenset({"os", "os.path", "sys", "berth.errors", "berth.units"})
DAEMON_SIDE = ("daemon", "web", "sim", "core")
REASONS = ("# cycle", "# optional")


class Lazy:
    """An import statement inside a function: its line, the modules it loads, its comment."""

    __slots__ = ("comment", "line", "modules")

    def __init__(self, line: int, modules: list[str], comment: str) -> None:
        self.line, self.modules, self.comment = line, modules, comment


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module (so ``from package import name`` loads it)."""
    if name.startswith("berth."):
        path = ROOT.parent.joinpath(*name.split("."))
        return path.with_suffix(".py").exists() or (path / "__init__.py").exists()
    package, _, child = name.rpartition(".")
    if "." in package:  # finding a spec would import the parents: take the package
        return False
    spec = importlib.util.find_spec(package)
    places = (spec.submodule_search_locations or []) if spec else []
    return any((Path(p) / f"{child}.py").exists() or (Path(p) / child).is_dir() for p in places)


def _loaded(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import statement loads (relative names resolved against ``package``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    names = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
    return list(dict.fromkeys(names))


def _scan(path: Path, package: str) -> tuple[set[str], list[Lazy]]:
    """What ``path`` imports at its top (at run time), and its imports inside functions."""
    source = path.read_text()
    lines = source.splitlines()
    top: set[str] = set()
    lazy: list[Lazy] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if _type_checking_block(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child, in_function)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                return
            modules = _loaded(node, package)
            if in_function:
                text = lines[node.lineno - 1 : node.end_lineno]
                comment = " ".join("#" + t.split("#", 1)[1] for t in text if "#" in t)
                lazy.append(Lazy(node.lineno, modules, comment))
            else:
                top.update(modules)
            return
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source, str(path)), False)
    return top, lazy


def _type_checking_spelling(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    bad: list[str] = []
    defined = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "TYPE_CHECKING" for a in node.names):
            bad.append(f"line {node.lineno}: from {node.module} import TYPE_CHECKING")
        elif isinstance(node, ast.Attribute) and node.attr == "TYPE_CHECKING":
            bad.append(f"line {node.lineno}: {ast.unparse(node)}")
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TYPE_CHECKING" for t in node.targets
        ):
            if not (isinstance(node.value, ast.Constant) and node.value.value is False):
                bad.append(f"line {node.lineno}: TYPE_CHECKING = {ast.unparse(node.value)}")
            defined = True
    used = any(isinstance(n, ast.Name) and n.id == "TYPE_CHECKING" for n in ast.walk(tree))
    if used and not defined and not bad:
        bad.append("uses TYPE_CHECKING without the line `TYPE_CHECKING = False` at its top")
    return bad


def problems(path: Path, package: str, daemon_side: bool) -> list[str]:
    """What in ``path`` breaks the rule, one line each (empty: nothing)."""
    top, lazy = _scan(path, package)
    out = _type_checking_spelling(path)
    for imp in lazy:
        for name in imp.modules:
            if name in ALWAYS:
                out.append(f"line {imp.line}: {name} inside a function (always loaded: at the top)")
            elif name in top:
                out.append(f"line {imp.line}: {name} inside a function, and at the top too")
        if daemon_side and not any(reason in imp.comment for reason in REASONS):
            out.append(
                f"line {imp.line}: {', '.join(imp.modules)} inside a function of a module the CLI "
                "does not load (import it at the top; `# cycle` if that is a real cycle)"
            )
        elif not imp.comment:
            out.append(
                f"line {imp.line}: {', '.join(imp.modules)} inside a function without its reason "
                "(say why on its line: # heavy, # rare: --json, # cycle; or import it at the top)"
            )
    return out


def _modules() -> list[tuple[Path, str, bool]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found.append((path, ".".join(parts[:-1]), parts[1] in DAEMON_SIDE))
    return found


def test_every_module_follows_the_import_rule() -> None:
    found = {
        str(path.relative_to(ROOT.parent)): bad
        for path, package, daemon_side in _modules()
        if (bad := problems(path, package, daemon_side))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("source", "daemon_side", "expected"),
    [
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n", False,
         "from typing import TYPE_CHECKING"),
        ("import typing\nif typing.TYPE_CHECKING:\n    import x\n", False, "typing.TYPE_CHECKING"),
        ("TYPE_CHECKING = 0\nif TYPE_CHECKING:\n    import x\n", False, "TYPE_CHECKING = 0"),
        ("def f():\n    import os\n", False, "os inside a function (always loaded"),
        ("def f():\n    from berth.units import parse_mem\n", False, "berth.units inside"),
        ("def f():\n    from berth import errors\n", False, "berth.errors inside"),
        ("import json\ndef f():\n    import json\n", False, "json inside a function, and at"),
        ("from berth import client\ndef f():\n    from berth.client import Client\n", False,
         "berth.client inside a function, and at"),
        ("def f():\n    import json\n", True, "json inside a function of a module the CLI"),
        ("def f():\n    import json\n", False, "json inside a function without its reason"),
        ("class C:\n    def f(self):\n        import json  # heavy\n", True, "json inside a"),
    ],
)  # fmt: skip
def test_the_rule_catches_a_planted_violation(
    tmp_path: Path, source: str, daemon_side: bool, expected: str
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = problems(probe, "berth.cli", daemon_side)
    assert any(expected in line for line in found), found


@pytest.mark.parametrize(
    ("source", "daemon_side"),
    [
        ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from berth.daemon import store\n", True),
        ("def f():\n    import json  # rare: --json\n", False),
        ("def f():\n    from berth.daemon import engine  # cycle\n", True),
        ("import importlib\ndef f():\n    from importlib import resources  # rare\n", False),
        ("from berth import wire\ndef f():\n    from berth.wire import jobspec  # rare\n", False),
        ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import json\ndef f():\n"
         "    import json  # heavy\n", False),
        ("def f():\n    from berth.devices import (  # heavy\n        read_gpus,\n    )\n", False),
    ],
)  # fmt: skip
def test_the_rule_lets_what_it_allows_pass(tmp_path: Path, source: str, daemon_side: bool) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert problems(probe, "berth.cli", daemon_side) == []
