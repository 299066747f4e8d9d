"""Each kind of cgroup the daemon can use (v2, v1 freezer, v1 pids), where this machine has
it writable: a process that joined one as root and became another user cannot leave it, and
killing the cgroup ends every process in it, even one in a session of its own that closed
every descriptor (berth.daemon.procs.cgroup, berth.daemon.supervisor.ingroup)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import alive, wait_until

from berth.daemon.procs import cgroup
from berth.daemon.supervisor import ingroup

NOBODY = 65534


def _kinds() -> list[str]:
    if os.geteuid() != 0:
        return []
    return [k for k in (cgroup.V2, cgroup.FREEZER, cgroup.PIDS) if cgroup._mount(k)]


def _groups(kind: str | None) -> Iterator[cgroup.Cgroups]:
    if kind is None:
        pytest.skip("needs root and a cgroup hierarchy")
    mount = cgroup._mount(kind)
    assert mount is not None
    root = os.path.join(mount + cgroup._own(kind), f"berth-test-{os.getpid()}-{kind}")
    try:
        os.mkdir(root)
    except OSError as e:
        pytest.skip(f"cannot make a {kind} cgroup here: {e.strerror}")
    g = cgroup.Cgroups(kind, root)
    try:
        yield g
    finally:
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if os.path.isdir(path):
                g.kill(path)
                wait_until(lambda p=path: g.remove(p), message="its cgroup is empty")
        os.rmdir(root)


@pytest.fixture(params=_kinds() or [None])
def groups(request: pytest.FixtureRequest) -> Iterator[cgroup.Cgroups]:
    yield from _groups(request.param)


@pytest.fixture(params=[k for k in _kinds() if k == cgroup.V2] or [None])
def v2_groups(request: pytest.FixtureRequest) -> Iterator[cgroup.Cgroups]:
    yield from _groups(request.param)



def _member(path: str, report: int) -> int:
    """A child that joins ``path`` as root, becomes nobody, tries to leave the cgroup, and
    starts a grandchild in a session of its own with no descriptors; writes to ``report``
    whether leaving failed and the grandchild's pid."""
    os.mkdir(path)  # (the daemon makes it)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ingroup.enter(path)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            parent = os.path.join(os.path.dirname(path), "cgroup.procs")
            try:
                with open(parent, "w") as f:
                    f.write(str(os.getpid()))
                stuck = b"left"
            except OSError:
                stuck = b"stuck"
            grandchild = os.fork()
            if grandchild == 0:
                os.setsid()
                os.closerange(0, 65536)
                time.sleep(300)
                os._exit(0)
            os.write(report, stuck + b" %d\n" % grandchild)
            time.sleep(300)
        finally:
            os._exit(0)
    return pid


def test_nothing_leaves_the_cgroup_and_killing_it_ends_all(groups: cgroup.Cgroups) -> None:
    path = groups.path(1)
    r, w = os.pipe()
    child = _member(path, w)
    os.close(w)
    with os.fdopen(r) as f:
        stuck, grandchild = f.readline().split()
    assert stuck == "stuck"  # as nobody, it could not move itself out of its cgroup
    assert set(ingroup.members(path)) == {child, int(grandchild)}
    assert groups.owns(path) and not groups.owns(os.path.dirname(path))
    assert groups.kill(path) == 2
    os.waitpid(child, 0)
    wait_until(lambda: not alive(int(grandchild)), message="the grandchild is killed")
    wait_until(lambda: groups.remove(path), message="the empty cgroup is removed")
    assert not os.path.exists(path)


def test_the_v2_freeze_way_when_there_is_no_cgroup_kill(v2_groups: cgroup.Cgroups) -> None:
    groups = v2_groups
    path = groups.path(2)
    r, w = os.pipe()
    child = _member(path, w)
    os.close(w)
    with os.fdopen(r) as f:
        _, grandchild = f.readline().split()
    groups.has_kill = False  # (as on Linux < 5.14)
    assert groups.kill(path) == 2  # frozen, each member SIGKILLed, thawed
    os.waitpid(child, 0)
    wait_until(lambda: not alive(int(grandchild)), message="the grandchild is killed")
    with open(os.path.join(path, "cgroup.freeze")) as f:
        assert f.read().strip() == "0"  # thawed again


def test_where_no_hierarchy_is_writable_find_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\n")
    monkeypatch.setattr(cgroup, "MOUNTS", str(mounts))
    groups, why = cgroup.find(str(tmp_path))
    assert groups is None and why.startswith("no writable cgroup hierarchy")
    assert "v2: not mounted" in why and "tracked by their process group and session" in why
    # Mounted where nothing can be made (read-only, as in many containers):
    mounts.write_text("cgroup2 /proc/sys cgroup2 ro 0 0\n")
    groups, why = cgroup.find(str(tmp_path))
    assert groups is None and "v2 at /proc/sys:" in why
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    groups, why = cgroup.find(str(tmp_path))
    assert groups is None and why.startswith("not root")
