"""berth.selection.filters.Filters: each filter named once, for the Python API and the CLI alike."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Any

import pytest

import berth
from berth.api import selection
from berth.cli import filters as cli_filters
from berth.errors import UsageError
from berth.record import Record, field, record
from berth.selection.filters import KEYWORDS, Filters

FILTERS = Path(__file__).resolve().parents[2] / "berth" / "selection" / "filters.py"


def test_the_typed_keywords_are_the_keyword_fields() -> None:
    # FilterArgs exists for type checkers only: read its keys from the source
    tree = ast.parse(FILTERS.read_text())
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "FilterArgs"]
    assert len(found) == 1
    keys = [s.target.id for s in found[0].body if isinstance(s, ast.AnnAssign)]  # type: ignore[union-attr]
    assert keys == list(KEYWORDS)


@pytest.mark.parametrize(
    "call",
    [
        lambda: berth.select(min_fre="20G"),
        lambda: selection(min_fre="20G"),
        lambda: berth.acquire(1, min_fre="20G", timeout=0),
    ],
)
def test_an_unknown_keyword_is_a_type_error_naming_it(fake_gpus: Any, call: Any) -> None:
    fake_gpus.setup(n=1)
    with pytest.raises(
        TypeError,
        match=r"got an unexpected keyword argument 'min_fre' \(did you mean 'min_free'\?\)",
    ):
        call()


def test_the_api_names_the_function_called() -> None:
    with pytest.raises(TypeError, match=r"^select\(\) got"):
        berth.select(cuont=2)
    with pytest.raises(TypeError, match=r"^acquire\(\) got"):
        berth.acquire(1, count=2)  # count is acquire's gpus: not a filter


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    cli_filters.add_arguments(p, order_help="the order")
    return p.parse_args(argv)


def test_the_cli_options_are_the_fields_that_have_one() -> None:
    p = argparse.ArgumentParser()
    cli_filters.add_arguments(p, order_help="the order")
    flags = {s for a in p._actions for s in a.option_strings} - {"-h", "--help", "--all"}
    assert flags == {
        "--min-free", "--max-util", "--max-mem-util", "--max-power", "--max-procs", "--name",
        "--only", "--exclude", "--prefer", "--order",
        # gpuselect's names for four of them, long and short:
        "--util", "--mem_util", "--mem-util", "--processes", "--devices",
        "-u", "-m", "-p", "-d",
        # scheduler.py's for two:
        "--forced_gpu", "-fg", "--prefered_gpu", "-pg",
    }  # fmt: skip


def test_cli_and_python_build_the_same_filters() -> None:
    args = _parse(
        "--min-free", "20G", "--max-util", "80%", "--max-power", "250W", "--max-procs", "1",
        "--only", "0-2", "--prefer", "2", "--order", "packed", "--name", "A100",
    )  # fmt: skip
    built = cli_filters.from_args(args, "2")
    assert built == Filters.of(
        2, 1.0, "test", min_free=20 * 1024**3, max_util=80, max_power=250, max_procs=1,
        only=["0", "1", "2"], prefer=2, order="packed", name="A100",
    )  # fmt: skip
    assert built.max_mem_util is None  # "auto" with processes allowed: no limit
    assert cli_filters.from_args(_parse(), 1) == Filters()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (("--max-util", "150"), "--max-util '150': expected a number, 0 to 100"),
        (("--max-procs", "-1"), "--max-procs '-1': expected a whole number, 0 or more"),
        (("--min-free", "lots"), "--min-free 'lots'"),
        (("--order", "fastest"), "--order 'fastest'"),
    ],
)
def test_one_message_for_a_bad_value_from_cli_or_python(argv: tuple[str, str], needle: str) -> None:
    with pytest.raises(UsageError) as cli:
        cli_filters.from_args(_parse(*argv), 1)
    assert needle in str(cli.value)
    key = argv[0][2:].replace("-", "_")
    with pytest.raises(UsageError) as py:
        Filters.of(1, 1.0, "test", **{key: argv[1]})  # type: ignore[misc]
    assert str(py.value) == str(cli.value)


def test_filters_are_frozen_and_defaults_follow_the_share() -> None:
    f = Filters(2)
    with pytest.raises(AttributeError, match="frozen"):
        f.count = 3  # type: ignore[misc]
    assert (f.order, f.max_util, f.max_mem_util, f.max_procs) == ("random", 0, 0, 0)
    assert Filters(1, 0.5).order == "packed"
    assert Filters(1, 0.5, order="index").order == "index"
    with pytest.raises(UsageError, match=r"share 0\.5 of 2 GPUs"):
        Filters(2, 0.5)


def test_records_positional_keyword_and_replace() -> None:
    @record
    class Point(Record):
        x: int = field(default=0, check=lambda v, label: int(v))
        y: int = 0
        tag: str = field(default="", kw_only=True)

    p = Point(1, "2", tag="a")
    assert (p.x, p.y, p.tag) == (1, "2", "a")
    assert p == Point(1, "2", tag="a") and hash(p) == hash(Point(1, "2", tag="a"))
    assert p.replace(x="5") == Point(5, "2", tag="a")
    assert repr(p) == "Point(x=1, y='2', tag='a')"
    assert not hasattr(p, "__dict__")
    with pytest.raises(TypeError, match="takes 2 positional arguments, 3 given"):
        Point(1, 2, "a")
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        Point(1, x=2)
