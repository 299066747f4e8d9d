"""Sizes that keep berth readable (issue 19.6): no file under berth/ longer than 400 lines,
no function (or method, nested or not) longer than 80, from its ``def`` line to its last line
(docstring included, decorators not), as ``ast`` measures them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

BERTH = Path(__file__).resolve().parents[2] / "berth"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80

# Today's offenders, each with its size (a file: "path"; a function: "path:qualified.name").
# They are being split right now; this list may only shrink: the test fails when an entry
# stops exceeding its limit (remove it), grows past the size written here, or disappears
# (moved or renamed: remove it). Nothing new may join it.
KNOWN: dict[str, int] = {
}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function under ``tree``, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            yield prefix + node.name, node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def sizes() -> dict[str, tuple[int, int]]:
    """Every file and function of berth: {key as in KNOWN: (lines, limit)}."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(BERTH.rglob("*.py")):
        rel = path.relative_to(BERTH).as_posix()
        text = path.read_text(encoding="utf-8")
        out[rel] = (len(text.splitlines()), MAX_FILE_LINES)
        for name, lines in _functions(ast.parse(text, filename=str(path))):
            key = f"{rel}:{name}"  # (a name defined twice, e.g. a property's setter: the longer)
            out[key] = (max(lines, out.get(key, (0, 0))[0]), MAX_FUNCTION_LINES)
    return out


def test_the_measure_counts_from_def_to_last_line_nested_and_in_classes() -> None:
    tree = ast.parse(
        "@decorated\n"
        "def f():\n"
        '    """doc"""\n'
        "    def inner():\n"
        "        pass\n"
        "    return inner\n"
        "class K:\n"
        "    async def m(self):\n"
        "        pass\n"
    )
    assert dict(_functions(tree)) == {"f": 5, "f.inner": 2, "K.m": 2}


def test_no_file_or_function_of_berth_is_too_long() -> None:
    over = {
        key: lines for key, (lines, limit) in sizes().items() if lines > limit and key not in KNOWN
    }
    assert not over, (
        f"over {MAX_FILE_LINES} lines (a file) or {MAX_FUNCTION_LINES} (a function): {over}; "
        "split them by what they do"
    )


def test_the_known_offenders_are_still_accurate() -> None:
    """The list may only shrink: an entry is removed once it fits, never left behind."""
    now = sizes()
    stale = {key: size for key, size in KNOWN.items() if key not in now}
    assert not stale, f"no longer in berth/ (moved or renamed?): remove {stale} from KNOWN"
    fits = {key: now[key][0] for key in KNOWN if now[key][0] <= now[key][1]}
    assert not fits, f"these fit their limit now: remove them from KNOWN: {fits}"
    grew = {key: (KNOWN[key], now[key][0]) for key in KNOWN if now[key][0] > KNOWN[key]}
    assert not grew, f"grew since listed (listed, now): {grew}; make them smaller, not larger"
