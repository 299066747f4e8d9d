"""No two modules of berth import each other, directly or round a longer loop, not even inside a
function (docs/ARCHITECTURE.md, "Imports"): a cycle means two modules that are one idea cut in
the wrong place, or an idea in the wrong module.

The graph is read from the source (the AST): every import counts, at the top, inside a
function, or under ``if TYPE_CHECKING:`` (for the type checker: issue 38's "import reading"
counts those too, and so a module may not name, even in its annotations, the class of a
module that imports it; a protocol of what it reads, or the class in a module of its own,
is the cure). ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else
to ``pkg`` (the name is the package's own); a module's implicit import of its parent
packages is no edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "berth"

# Cycles known and waiting for their move, typing imports counted (none now: keep it so).
KNOWN: set[frozenset[str]] = set()


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def edges(name: str, path: Path, known: dict[str, Path], *, typing: bool = True) -> dict[str, int]:
    """The modules of ``known`` that module ``name`` imports, for the type checker too (not
    with ``typing=False``: at run time only) -> the first line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        if target in known and target != name:
            out.setdefault(target, line)

    def visit(node: ast.AST) -> None:
        if _type_checking(node) and not typing:
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return out


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = set(component)
    return "; ".join(
        f"{m} imports {t} (line {line})"
        for m in component
        for t, line in sorted(graph[m].items())
        if t in inside
    )


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "berth"
    (pkg / "a").mkdir(parents=True)
    for name in ("__init__.py", "a/__init__.py", "a/x.py", "a/y.py", "b.py", "c.py"):
        (pkg / name).touch()
    (pkg / "a/x.py").write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from berth import c\n"
        "def f():\n    from . import y  # cycle\n"
    )
    (pkg / "a/y.py").write_text("from berth.a.x import f\nimport berth.b\n")
    (pkg / "b.py").write_text("from berth.a import NAME\n")
    known = modules(pkg)
    graph = {m: edges(m, p, known, typing=False) for m, p in known.items()}
    assert set(graph["berth.a.x"]) == {"berth.a.y"}  # in a function: counted; typing: not
    assert set(graph["berth.a.y"]) == {"berth.a.x", "berth.b"}
    assert set(graph["berth.b"]) == {"berth.a"}  # a name of the package itself
    assert cycles(graph) == [["berth.a.x", "berth.a.y"]]
    # x names c for the type checker only, and c imports x: a cycle, counted by default
    (pkg / "c.py").write_text("from berth.a import x\n")
    graph = {m: edges(m, p, known) for m, p in known.items()}
    assert set(graph["berth.a.x"]) == {"berth.a.y", "berth.c"}
    assert cycles(graph) == [["berth.a.x", "berth.a.y", "berth.c"]]


def test_no_two_modules_of_berth_import_each_other() -> None:
    known = modules()
    graph = {m: edges(m, p, known) for m, p in known.items()}
    found = {frozenset(c): _describe(c, graph) for c in cycles(graph)}
    new = {k: v for k, v in found.items() if k not in KNOWN}
    assert new == {}, "import cycles:\n" + "\n".join(new.values())


def test_the_known_cycles_still_exist() -> None:
    # (one that is gone leaves this list: the list only ever shrinks)
    known = modules()
    graph = {m: edges(m, p, known) for m, p in known.items()}
    assert KNOWN <= {frozenset(c) for c in cycles(graph)}
