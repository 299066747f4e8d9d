"""Each user's log directory under a root daemon's state (berth/daemon/engine/admission/userdir.py):
made for the user, owned by them; an entry of that name that is not their directory is
refused with what to do; a checked directory is taken as it was for a second (a stream of
submits does not check it three system calls a submit), then checked again.

Needs root (to give the directory to another uid), as CI runs the suite."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from berth.daemon.engine.admission import userdir
from berth.wire.protocol import ProtocolError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")

UID, GID = 54_321, 54_321  # (no such user needed: the directory is only given to the uid)


def test_made_for_the_user_refused_when_not_theirs_and_checked_again_after_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(userdir.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(userdir, "_CHECKED", {})
    state = str(tmp_path / "state")
    os.makedirs(state, mode=0o700)
    userdir.prepare(state)
    path = userdir.user_dir(state, "ann", UID, GID)
    assert path == os.path.join(state, "logs", "ann")
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (UID, GID, 0o700)
    # someone else's directory takes its place (only root could do it)
    shutil.rmtree(path)
    os.mkdir(path)  # root's
    clock[0] += 0.5
    assert userdir.user_dir(state, "ann", UID, GID) == path  # (checked half a second ago)
    clock[0] += 0.6
    with pytest.raises(ProtocolError) as e:
        userdir.user_dir(state, "ann", UID, GID)
    assert f"the log directory {path} is a directory owned by uid 0, not by ann ({UID})" \
        in e.value.message  # fmt: skip
    assert "ask the admin to move it away" in e.value.message
    os.rmdir(path)  # moved away: the next submit makes it again
    assert userdir.user_dir(state, "ann", UID, GID) == path
    assert os.stat(path).st_uid == UID


def test_a_dry_run_checks_the_directory_as_a_submit_does_and_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(userdir, "_CHECKED", {})
    state = str(tmp_path / "state")
    os.makedirs(state, mode=0o700)
    userdir.prepare(state)
    path = userdir.user_dir(state, "ann", UID, GID, make=False)
    assert path == os.path.join(state, "logs", "ann") and not os.path.exists(path)
    assert userdir._CHECKED == {}  # (not remembered as checked: the real submit makes it)
    os.mkdir(path)  # root's, not ann's
    with pytest.raises(ProtocolError) as e:
        userdir.user_dir(state, "ann", UID, GID, make=False)
    assert "is a directory owned by uid 0, not by ann" in e.value.message
