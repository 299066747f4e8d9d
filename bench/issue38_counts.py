"""Issue 38's acceptance figures, read from the source: the verbs handlers, the web and MCP
reach on the engine's front, import cycles (typing imports counted too), the files of the start
path in docs/ARCHITECTURE.md. ``.venv/bin/python bench/issue38_counts.py`` from the repository
root (the readers are the tests': tests/base/test_front.py, test_import_cycles.py,
test_startpath.py)."""

from __future__ import annotations

import sys


def main() -> None:
    sys.path[:0] = ["tests/base", "tests"]
    import test_front as front
    import test_import_cycles as cycles
    import test_startpath as path

    names = front._front_names(front._sources())
    print(f"front verbs reached from requests/, web/, mcpserver.py: {len(names)}: {sorted(names)}")
    known = cycles.modules()
    for typing in (False, True):
        graph = {m: cycles.edges(m, p, known, typing=typing) for m, p in known.items()}
        what = "typing imports counted" if typing else "run time only"
        print(f"import cycles ({what}): {len(cycles.cycles(graph))}")
    steps = path._start_path(path.ARCH.read_text())
    print(f"start path files: {len(steps)}, problems: {path._problems(steps)}")


if __name__ == "__main__":
    main()
