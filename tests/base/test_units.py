"""Sizes and durations as people type them."""

from __future__ import annotations

import pytest

from berth.errors import UsageError
from berth.units import (
    GIB,
    MIB,
    format_duration,
    format_size,
    parse_duration,
    parse_gpu_list,
    parse_gpu_words,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20G", 20 * GIB),
        ("20GiB", 20 * GIB),
        ("20gb", 20 * GIB),
        ("1.5G", int(1.5 * GIB)),
        ("512M", 512 * MIB),
        ("512MiB", 512 * MIB),
        ("8000", 8000 * MIB),  # mgpu_srun's --mem 8000 is MiB
        ("1T", 1024 * GIB),
        (" 30G ", 30 * GIB),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "", "G", "-1G", "20X", "nan", "inf"])
def test_parse_size_rejects_and_names_the_value(text: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_size(text, what="--min-free")
    assert repr(text) in str(e.value)
    assert "--min-free" in str(e.value)


def test_parse_size_python_numbers_are_bytes() -> None:
    assert parse_size(1024) == 1024
    with pytest.raises(UsageError):
        parse_size(True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", 90),
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("1d", 86400),
        ("1:30", 90),
        ("1:30:00", 5400),
        ("2-00:00:00", 172800),
        ("1-12", 129600),
        ("inf", float("inf")),
    ],
)
def test_parse_duration(text: str, expected: float) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["soon", "1:2:3:4", "-5", "5y", ""])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_duration(text, what="--time")
    assert repr(text) in str(e.value)


def test_formatting() -> None:
    assert format_size(None) == "n/a"
    assert format_size(12 * GIB) == "12.0G"
    assert format_size(80 * GIB, unit="MiB") == "81920MiB"
    assert format_duration(65) == "1:05"
    assert format_duration(3725) == "1:02:05"
    assert format_duration(90000) == "1-01:00:00"
    assert format_duration(float("inf")) == "UNLIMITED"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0,2", ("0", "2")),
        ("0-3", ("0", "1", "2", "3")),  # the GPU Job Scheduler's allowed_gpus
        ("0-3,6", ("0", "1", "2", "3", "6")),
        ("3,0-3", ("3", "0", "1", "2")),  # order given, each once
        (" 1 , 2 ", ("1", "2")),
        ("2-2", ("2",)),
    ],
)
def test_parse_gpu_list(text: str, expected: tuple[str, ...]) -> None:
    assert parse_gpu_list(text, what="--gpu-ids") == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("3-1", "goes down"),
        ("a-b", "not a range"),
        ("1-x", "not a range"),
        ("x", "not a GPU index"),
        ("-1", "0 or more"),
        ("0-99999", "up to 1023"),
        ("", "no GPU named"),
        ("GPU-8e4c", "is a UUID"),
        ("\u00b2", "not a GPU index"),  # a superscript digit: isdigit(), but not an index
    ],
)
def test_parse_gpu_list_refuses_and_names_the_value(text: str, why: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_gpu_list(text, what="--gpu-ids")
    assert f"--gpu-ids {text!r}" in str(e.value) and why in str(e.value)


def test_parse_gpu_list_with_uuids() -> None:
    got = parse_gpu_list("GPU-8e4c,0-1,8e4c1a2b-77aa,mig-x", what="--only", uuids=True)
    assert got == ("GPU-8e4c", "0", "1", "8e4c1a2b-77aa", "mig-x")
    with pytest.raises(UsageError, match="not a range"):
        parse_gpu_list("a-b", what="--only", uuids=True)
    assert parse_gpu_words(["0", "3", "2-3", "GPU-ab"], what="GPU") == ("0", "3", "2", "GPU-ab")
