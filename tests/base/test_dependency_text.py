"""The one parser and formatter of ``--dependency`` (berth.wire.dependency): each form
Slurm writes reads and writes back the same; a wrong one is refused naming the value."""

from __future__ import annotations

import pytest

from berth.errors import UsageError
from berth.wire.dependency import Dependency, Term, format_dependency, parse_dependency


@pytest.mark.parametrize(
    "text",
    [
        "afterok:12",
        "afterok:12:13",
        "afterok:12:13,afterany:14,afternotok:15",
        "after:12+10:13",
        "singleton",
        "afterok:12,singleton",
        "afterok:12?afternotok:12",
        "afterok:4?afterok:5",  # (any of two of one kind: never afterok:4:5, which is both)
        "after:4+10?after:5",
        "afterok:@",
        "afterany:12_3:@",
    ],
)
def test_every_form_reads_and_writes_back_the_same(text: str) -> None:
    dep = parse_dependency(text)
    assert format_dependency(dep) == str(dep) == text
    assert parse_dependency(str(dep)) == dep


def test_terms_each_name_one_job() -> None:
    dep = parse_dependency(" AfterOK:12:013 ? afterany:@ ")
    assert dep.any_of and str(dep) == "afterok:12:13?afterany:@"
    assert dep.terms == (Term("afterok", "12"), Term("afterok", "13"), Term("afterany", "@"))
    assert dep.jobs() == ["12", "13", "@"]
    assert str(dep.with_jobs(lambda j: "41" if j == "@" else j)) == "afterok:12:13?afterany:41"
    assert str(parse_dependency("afterok:12:12")) == "afterok:12"
    assert not Dependency([Term("afterok", "1")], any_of=True).any_of  # (one term: no choice)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty dependency"),
        ("afterok", "invalid dependency 'afterok'"),
        ("afterok:", "invalid dependency 'afterok:'"),
        ("afterok:x", "invalid job 'x' in dependency 'afterok:x'"),
        ("afterok:0", "invalid job '0'"),
        ("afterok:1,afterany:2?after:3", "',' (all of) and '?' (any of) cannot be mixed"),
        ("afterok:1+5", "+MINUTES goes only with after"),
        ("after:1+x", "+MINUTES goes only with after"),
        ("aftercorr:1", "berth does not take aftercorr"),
        ("before:1", "invalid dependency 'before:1'"),
        ("singleton:1", "invalid dependency 'singleton:1'"),
    ],
)
def test_a_wrong_one_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=None) as e:
        parse_dependency(text)
    assert message in str(e.value)
