"""Every option `--help` shows is on some page of the docs (issue 40.7): the test walks each
command's argparse parser (and its actions': `admin limits`...) and looks for each long
option in README.md or docs/*.md, as a word (`--follow`, not inside `--follow-x`)."""

from __future__ import annotations

import re
from pathlib import Path

from berth.cli.main import COMMANDS, _load, _parser

ROOT = Path(__file__).resolve().parents[2]


def _docs() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text() for p in pages)


def _options(name: str) -> list[tuple[str, str]]:
    """(command, long option) of the command and of each of its actions."""
    out: list[tuple[str, str]] = []
    todo = [(name, _parser(name, _load(name)))]
    while todo:
        what, parser = todo.pop()
        for action in parser._actions:
            if isinstance(action.choices, dict):  # actions (subcommands): name -> parser
                todo += [(f"{what} {sub}", p) for sub, p in action.choices.items()]
            out += [(what, o) for o in action.option_strings if o.startswith("--")]
    return [(w, o) for w, o in out if o != "--help"]


def test_every_long_option_is_on_a_docs_page() -> None:
    docs = _docs()
    missing = sorted(
        f"berth {what} {option}"
        for name in COMMANDS
        for what, option in _options(name)
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", docs)
    )
    assert missing == [], "on no page of README.md or docs/:\n" + "\n".join(missing)
