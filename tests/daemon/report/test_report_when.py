"""`berth report`'s --since/--until and --by as typed (berth.cli.report): durations back
from now, dates in local time, this-month and last-month (which implies its end), and what a
bad value is told."""

from __future__ import annotations

import time

import pytest

from berth.cli import report
from berth.errors import UsageError

NOW = time.mktime((2026, 11, 28, 13, 0, 0, 0, 0, -1))  # local time


def _local(*ymd: int) -> float:
    return time.mktime((*ymd, 0, 0, 0, 0, 0, -1))


def test_durations_dates_and_month_words() -> None:
    assert report.window("7d", None, NOW) == (NOW - 7 * 86400, NOW)
    assert report.window("12h", "now", NOW) == (NOW - 12 * 3600, NOW)
    assert report.window("2026-11-01", "2026-11-15", NOW) == (
        _local(2026, 11, 1),
        _local(2026, 11, 15),
    )
    assert report.window("2026-11-01T08:00", None, NOW)[0] == _local(2026, 11, 1) + 8 * 3600
    assert report.window("this-month", None, NOW) == (_local(2026, 11, 1), NOW)
    assert report.window("last-month", None, NOW) == (_local(2026, 10, 1), _local(2026, 11, 1))
    assert report.window("today", None, NOW) == (_local(2026, 11, 28), NOW)
    january = time.mktime((2027, 1, 5, 9, 0, 0, 0, 0, -1))
    assert report.window("last-month", None, january) == (_local(2026, 12, 1), _local(2027, 1, 1))


@pytest.mark.parametrize(
    ("since", "until", "said"),
    [
        ("lastweek", None, "--since 'lastweek': not a time"),
        ("1d", "2026-13-01", "--until '2026-13-01': not a time"),
        ("1d", "2d", "is not before --until 2d"),
    ],
)
def test_bad_windows_are_refused_naming_the_value(since: str, until: str | None, said: str) -> None:
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        report.window(since, until, NOW)


def test_groupings_comma_separated_or_repeated() -> None:
    assert report.keys(["user,project", "week"]) == ["user", "project", "week"]
    with pytest.raises(UsageError, match="--by 'tenant': not a grouping"):
        report.keys(["user,tenant"])
    with pytest.raises(UsageError, match="named twice"):
        report.keys(["user", "user"])
