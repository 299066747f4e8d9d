"""`berth web-token --revoke` on a full state disk (docs/web.md: "revokes every token of its
caller made until then ... kept across restarts"): a revocation that could not be saved is
not reported as done. The caller hears it failed and why, their old tokens are as they were
(valid: nothing was revoked, and nothing says otherwise), and once there is room again the
revocation is made and holds across a restart."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (CI runs as root)")


def _fill(path: str) -> None:
    with open(path, "ab", buffering=0) as f:
        for size in (65536, 512, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass


def test_a_revocation_on_a_full_disk_says_it_failed_and_keeps_nothing_half_done(web: Any) -> None:
    state = web.daemon.state_dir
    os.makedirs(state, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", state], check=True)
    try:
        web.start(gpus=1)
        old = web.token
        assert web.get("/api/whoami", token=old)[0] == 200
        filler = os.path.join(state, "filler")
        _fill(filler)
        r = web.daemon.berth("web-token", "--revoke")
        assert r.returncode != 0 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
        assert "revoked" not in r.stderr.replace("not revoked", ""), r.stderr
        assert "No space left" in r.stderr or "full" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert web.get("/api/whoami", token=old)[0] == 200  # (as it was: nothing revoked)
        assert [n for n in os.listdir(state) if n.endswith(".tmp")] == []  # (no leftover)
        os.unlink(filler)
        r = web.daemon.berth("web-token", "--revoke")
        assert r.returncode == 0 and "revoked every dashboard token" in r.stderr, r.stderr
        assert web.get("/api/whoami", token=old)[0] == 401
        web.daemon.stop()
        web.start(gpus=1)
        assert web.get("/api/whoami", token=old)[0] == 401  # (kept across the restart)
    finally:
        web.daemon.cleanup()
        subprocess.run(["umount", "-l", state], check=False)
