"""Request handlers, the dashboard and MCP reach the engine through its front's verbs only
(issue 38; docs/ARCHITECTURE.md, "engine/"): read from the source, every ``X`` of ``front.X``
or ``engine.X`` (also ``self.server.front.X``...) in ``berth/daemon/requests/``, ``berth/web/``
and ``berth/mcpserver.py`` is counted; none may be one of the engine's parts, and they may not
grow in number. None of them imports the engine's class, even for the type checker.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "berth"

# The engine's parts: what it holds and its front keeps to itself.
PARTS = {
    "store", "journal", "loop", "procs", "jobs", "res", "accounts", "pauses", "reservations",
    "enforcer", "opts", "clock", "jobtable", "estimates", "runs", "order", "notes",
}  # fmt: skip

# Verbs reached, at most (issue 38): the read answers are one verb, ``view(kind, ...)``; a
# jobs file is ``admit(..., each=True)``; ``show`` finds the job it shows.
MOST = 15


def _front_names(paths: list[Path]) -> dict[str, set[str]]:
    """name -> the files that reach ``<front or engine>.name``."""
    out: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute):
                continue
            v = node.value
            holder = (isinstance(v, ast.Name) and v.id in ("engine", "front")) or (
                isinstance(v, ast.Attribute) and v.attr in ("engine", "front")
            )
            if holder:
                out.setdefault(node.attr, set()).add(str(path.relative_to(ROOT.parent)))
    return out


def _sources() -> list[Path]:
    return [
        *sorted((ROOT / "daemon" / "requests").rglob("*.py")),
        *sorted((ROOT / "web").rglob("*.py")),
        ROOT / "mcpserver.py",
    ]


def test_the_counter_sees_what_it_counts(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f(front, engine, self):\n"
        "    front.admit(1)\n    engine.store.spec(2)\n    self.server.front.queue()\n"
        "    other.jobs\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        names = _front_names([probe])
    finally:
        ROOT = saved
    assert set(names) == {"admit", "store", "queue"}


def test_handlers_web_and_mcp_reach_no_part_of_the_engine() -> None:
    names = _front_names(_sources())
    parts = {n: sorted(names[n]) for n in PARTS & set(names)}
    assert parts == {}, f"the engine's parts reached (give the front a verb): {parts}"


def test_they_reach_at_most_so_many_verbs() -> None:
    names = _front_names(_sources())
    assert len(names) <= MOST, f"{len(names)} verbs of the engine's front: {sorted(names)}"


def test_none_of_them_imports_the_engine_itself() -> None:
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "berth.daemon.engine.engine":
                found.append(str(path.relative_to(ROOT.parent)))
    assert found == []


def test_the_engine_imports_nothing_of_requests_even_for_the_type_checker() -> None:
    # (admission takes a Caller: the requests' Peer fits it; nothing of requests/ is named)
    found = []
    for path in sorted((ROOT / "daemon" / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "berth.daemon.requests"
            ):
                found.append(f"{path.relative_to(ROOT.parent)}: {node.module}")
    assert found == []


def test_the_engine_holds_its_parts_and_inherits_from_none() -> None:
    # (issue 38: not Engine(Lifecycle(Launching)); each part given what it needs)
    bases = {}
    for path in sorted((ROOT / "daemon" / "engine").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name in ("Engine", "Launcher", "Control"):
                bases[node.name] = [ast.unparse(b) for b in node.bases]
    assert bases == {"Engine": [], "Launcher": [], "Control": []}
    engine = (ROOT / "daemon" / "engine" / "engine.py").read_text()
    assert "self.launcher = Launcher(" in engine and "self.control = Control(" in engine
