"""docs/ARCHITECTURE.md says which way imports point; these tests keep it true.

Every import in a module counts, also those inside functions (the CLI imports lazily, so a
function-level import is as much a dependency as a top-level one). Imports under
``if TYPE_CHECKING:`` are for the type checker only and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "berth"


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _imports(path: Path, package: str | None = None, typing: bool = False) -> set[str]:
    """The absolute module names ``path`` imports at run time (``typing``: and for the type
    checker; relative imports resolved against ``package``, by default the one ``path`` is
    in)."""
    tree = ast.parse(path.read_text(), str(path))
    if package is None:
        package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node) and not typing:
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules(*parts: str) -> list[Path]:
    base = ROOT.joinpath(*parts)
    if base.suffix == ".py":
        return [base]
    return sorted(base.rglob("*.py"))


def _berth(names: set[str]) -> set[str]:
    return {n for n in names if n == "berth" or n.startswith("berth.")}


def _offending(paths: list[Path], allowed: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in paths:
        bad = sorted(
            n
            for n in _berth(_imports(path))
            if n != "berth" and not any(n == a or n.startswith(a + ".") for a in allowed)
        )
        if bad:
            out[str(path.relative_to(ROOT.parent))] = bad
    return out


def test_the_import_walker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    sample = tmp_path / "probe.py"
    sample.write_text(
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n    from berth.daemon import store\n"
        "def f():\n    from berth.daemon.engine.engine import Engine\n"
        "from . import queue\n"
    )
    names = _imports(sample, "berth.cli")
    assert "berth.daemon.engine.engine" in names  # inside a function: counted
    assert "berth.cli.queue" in names  # relative, resolved
    assert "berth.daemon.store.store" not in names  # typing only: not counted


def test_core_is_pure_and_imports_only_the_leaves() -> None:
    leaves = ("berth.core", "berth.errors", "berth.units", "berth.state_codes", "berth.dependency")
    assert _offending(_modules("core"), leaves) == {}
    io = {"os", "time", "subprocess", "socket", "sqlite3", "asyncio", "pathlib", "shutil"}
    users = {
        str(p.relative_to(ROOT.parent)): sorted(io & {n.split(".")[0] for n in _imports(p)})
        for p in _modules("core")
    }
    assert {k: v for k, v in users.items() if v} == {}


def test_wire_imports_no_other_berth_layer() -> None:
    # wire/ is what client and daemon share: the standard library, the leaves
    # berth.errors/units/dependency at most
    allowed = ("berth.wire", "berth.errors", "berth.units", "berth.dependency")
    assert _offending(_modules("wire"), allowed) == {}


@pytest.mark.parametrize("layer", ["devices", "selection", "config", "record.py"])
def test_lower_layers_know_nothing_of_claims_jobs_or_the_cli(layer: str) -> None:
    forbidden = ("berth.claims", "berth.core", "berth.daemon", "berth.cli", "berth.client",
                 "berth.web", "berth.sim", "berth.backends", "berth.api")  # fmt: skip
    for path in _modules(layer):
        hits = [n for n in _berth(_imports(path)) if n.startswith(forbidden)]
        assert hits == [], f"{path.relative_to(ROOT.parent)} imports {hits}"


def test_the_cli_and_client_reach_the_daemon_only_to_start_one() -> None:
    starters = {"berth/cli/daemon.py", "berth/cli/inside_slurm.py"}
    paths = [*_modules("cli"), *_modules("client.py"), *_modules("backends")]
    hits = {
        str(p.relative_to(ROOT.parent)): sorted(
            n for n in _berth(_imports(p)) if n.startswith("berth.daemon")
        )
        for p in paths
    }
    assert {k: v for k, v in hits.items() if v and k not in starters} == {}


def test_claims_knows_nothing_of_jobs() -> None:
    forbidden = ("berth.core", "berth.daemon", "berth.cli", "berth.web", "berth.sim")
    for path in _modules("claims"):
        hits = [n for n in _berth(_imports(path)) if n.startswith(forbidden)]
        assert hits == [], f"{path.relative_to(ROOT.parent)} imports {hits}"


def test_the_library_does_not_import_screens() -> None:
    paths = [*_modules("api"), *_modules("claims"), *_modules("devices")]
    for path in paths:
        hits = [n for n in _berth(_imports(path)) if n.startswith(("berth.cli", "berth.web"))]
        assert hits == [], f"{path.relative_to(ROOT.parent)} imports {hits}"


# The daemon's rooms (docs/ARCHITECTURE.md, "daemon/"): what each may import of the others.
# The supervisor outlives the daemon and knows nothing of it; the store keeps rows and knows
# nothing of who changes them; the engine answers requests but imports none of their
# handlers; only the daemon's start-up (daemon/main.py) knows the web.
_ROOMS = {
    "supervisor": ("berth.daemon.engine", "berth.daemon.requests", "berth.daemon.store",
                   "berth.daemon.procs", "berth.daemon.main", "berth.daemon.options"),
    "store": ("berth.daemon.engine", "berth.daemon.requests", "berth.daemon.procs",
              "berth.daemon.main"),
    "procs": ("berth.daemon.requests", "berth.daemon.store", "berth.daemon.main",
              "berth.daemon.engine"),
    "engine": ("berth.daemon.requests", "berth.daemon.main", "berth.daemon.procs"),
    "requests": ("berth.daemon.procs", "berth.daemon.supervisor", "berth.daemon.main"),
    # `berth report`'s arithmetic, pure: no other room (the store and the web use it)
    "report": ("berth.daemon.engine", "berth.daemon.requests", "berth.daemon.store",
               "berth.daemon.procs", "berth.daemon.supervisor", "berth.daemon.main",
               "berth.daemon.options", "berth.devices", "berth.claims"),
}  # fmt: skip


@pytest.mark.parametrize("room", sorted(_ROOMS))
def test_each_room_of_the_daemon_imports_only_what_its_rules_allow(room: str) -> None:
    forbidden = (*_ROOMS[room], "berth.web", "berth.cli")
    hits = {
        str(p.relative_to(ROOT.parent)): sorted(
            n for n in _berth(_imports(p)) if n.startswith(forbidden)
        )
        for p in _modules("daemon", room)
    }
    assert {k: v for k, v in hits.items() if v} == {}


def test_the_engine_and_the_processes_import_nothing_of_each_other_even_for_the_type_checker() -> None:
    # (they meet at their port, berth/daemon/ports.py; daemon/main.py gives the engine its
    # supervisors)
    hits = {
        str(p.relative_to(ROOT.parent)): sorted(
            n for n in _berth(_imports(p, typing=True)) if n.startswith(f"berth.daemon.{other}")
        )
        for room, other in (("engine", "procs"), ("procs", "engine"))
        for p in _modules("daemon", room)
    }
    assert {k: v for k, v in hits.items() if v} == {}


def test_only_the_daemons_start_up_knows_the_web() -> None:
    hits = {
        str(p.relative_to(ROOT.parent))
        for p in _modules("daemon")
        if any(n.startswith("berth.web") for n in _berth(_imports(p)))
    }
    assert hits == {"berth/daemon/main.py"}


# The layers below the scheduling core, bottom up (docs/ARCHITECTURE.md, "Layers"): each
# imports only its own and the layers under it. (config/projects.py checks a project's name
# by wire/'s rule, a rare import of the layer that the client and daemon share.)
_LOWER = [
    ("units.py", "record.py", "errors.py", "state_codes.py", "inotify.py", "dependency.py"),
    ("config",),
    ("devices",),
    ("selection",),
    ("claims",),
    ("api",),
]
_EXCEPTIONS = {"berth/config/projects.py": ("berth.wire",)}


def _module_name(part: str) -> str:
    return "berth." + part.removesuffix(".py")


@pytest.mark.parametrize("level", range(len(_LOWER)), ids=[p[0] for p in _LOWER])
def test_each_lower_layer_imports_only_the_layers_under_it(level: int) -> None:
    below = tuple(_module_name(p) for layer in _LOWER[: level + 1] for p in layer)
    hits: dict[str, list[str]] = {}
    for part in _LOWER[level]:
        for path in _modules(part):
            name = str(path.relative_to(ROOT.parent))
            allowed = (*below, *_EXCEPTIONS.get(name, ()))
            bad = _offending([path], allowed)
            if bad:
                hits.update(bad)
    assert hits == {}


def test_berth_select_stays_the_function_once_the_selection_package_is_loaded() -> None:
    # a package named berth/select/ would replace the attribute berth.select (the public
    # function) with itself the moment anything imported one of its modules
    import berth.api
    import berth.selection.choose

    assert berth.select is berth.api.select
    assert callable(berth.select)
