"""After every attempt its supervisor reads its cgroup's members (what the job left behind
is killed): with bare system calls, not a buffered text file (issue 35.3: 5 calls and the
file objects fewer, per attempt)."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from berth.daemon.supervisor import ingroup


def test_members_are_read_with_bare_system_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = list(range(1000, 1000 + 20000, 7))  # (more than one read's worth)
    (tmp_path / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))

    def no_open(*a: object, **kw: object) -> None:
        raise AssertionError("a buffered file")

    monkeypatch.setattr(builtins, "open", no_open)
    assert ingroup.members(str(tmp_path)) == pids
    assert ingroup.members(str(tmp_path / "gone")) == []
    (tmp_path / "cgroup.procs").write_text("12\nnot-a-pid\n")
    assert ingroup.members(str(tmp_path)) == []
