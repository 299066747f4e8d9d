"""The one parser and formatter of ``--dependency`` (berth.dependency): each form
Slurm writes reads and writes back the same; a wrong one is refused naming the value."""

from __future__ import annotations

import pytest

from berth.dependency import Dependency, Written, format_dependency, parse_dependency
from berth.errors import UsageError


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
    assert dep.terms == (
        Dependency("afterok", "12"), Dependency("afterok", "13"), Dependency("afterany", "@")
    )
    assert dep.jobs() == ["12", "13", "@"]
    assert str(dep.with_jobs(lambda j: "41" if j == "@" else j)) == "afterok:12:13?afterany:41"
    assert str(parse_dependency("afterok:12:12")) == "afterok:12"
    assert not Written([Dependency("afterok", "1")], any_of=True).any_of  # (one term: no choice)


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


def test_one_term_class_for_the_written_the_resolved_and_the_stored_form() -> None:
    """What people write, the core's resolved terms and the store's text are one class: a
    term read from ``--dependency`` is the core's term on the same job."""
    from berth.core import Dependency as CoreDependency
    from berth.core.job import Job

    assert CoreDependency is Dependency
    text = "afterok:12:13,after:4+10,singleton"
    terms = (Dependency("afterok", 12), Dependency("afterok", 13), Dependency("after", 4, 10),
             Dependency("singleton"))  # fmt: skip
    assert parse_dependency(text).terms == Dependency.parse_list(text) == terms
    assert parse_dependency(text).terms[0].job_id == 12
    job = Job(id=20, submit_time=0.0, dependencies=Dependency.parse_list("afterok:13/12"))
    assert Job.from_dict(job.to_dict()).dependencies == (Dependency("afterok", 13, array=12),)
    with pytest.raises(UsageError, match="unknown dependency type 'afterfoo'"):
        Dependency("afterfoo", 1)
    import copy
    import pickle

    assert copy.deepcopy(job).dependencies == job.dependencies  # (the simulator copies jobs)
    assert pickle.loads(pickle.dumps(parse_dependency(text))) == parse_dependency(text)


def test_berth_declares_one_dependency_class_and_one_parser() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "berth"
    classes, parsers = [], []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = str(path.relative_to(root.parent))
            if isinstance(node, ast.ClassDef) and node.name in ("Dependency", "Term"):
                classes.append(where)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("parse"):
                if "depend" in node.name or node.name == "parse_list":
                    parsers.append(where)
    assert classes == ["berth/dependency.py"]
    assert sorted(set(parsers)) == ["berth/dependency.py"]
