"""What a local user may plant in the shared ledger directory (world-writable, like /tmp):
a lock file held for ever, a symlink, a FIFO, a socket, a directory, an unreadable file under
a claim's name, a directory of their own. None of it freezes, breaks or fools anybody else.

(Across real Unix users: test_hostile_users.py. A stopped waiter: test_fairness.py.)
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from claimkit import Holders, logical

from berth.claims import files
from berth.claims.ledger import Ledger
from berth.claims.paths import check_dir
from berth.claims.waiting import wait_claim
from berth.errors import UsageError
from berth.selection.filters import Filters

U = [g.uuid for g in logical()]

# Another process holds a flock (exclusive or shared) on a file until its stdin closes.
SITTER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX if sys.argv[2] == "ex" else fcntl.LOCK_SH)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def sitter() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        p.kill()
        p.communicate()


def _sit_on(path: str, procs: list[subprocess.Popen[str]], how: str = "ex") -> None:
    p = subprocess.Popen(
        [sys.executable, "-c", SITTER, path, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline() == "locked\n"


def test_a_lock_file_held_for_ever_blocks_no_claim(
    ledger_dir: str, sitter: list[subprocess.Popen[str]]
) -> None:
    """Berth takes no lock a user could sit on (berth before issue 11 waited 30 s on
    ``<dir>/.lock`` for every claim, freezing the daemon's event loop, then gave up)."""
    _sit_on(os.path.join(ledger_dir, ".lock"), sitter)
    ledger = Ledger(ledger_dir)
    lease = ledger.try_claim([U[0]])
    assert lease is not None
    waited = wait_claim(ledger, lambda: logical(2), Filters(1), timeout=0)
    assert waited.uuids == [U[1]]
    lease.set_pids([os.getpid()], "python test")  # body writes need no lock either
    assert [c.command for c in ledger.scan().claims] == ["python test", waited.command]


def test_a_planted_symlink_or_unreadable_lock_file_breaks_nobody(ledger_dir: str) -> None:
    lock = os.path.join(ledger_dir, ".lock")
    os.symlink("/etc/passwd", lock)  # berth before issue 11: ELOOP traceback, for root too
    ledger = Ledger(ledger_dir)
    lease = ledger.try_claim([U[0]])
    assert lease is not None
    assert wait_claim(ledger, lambda: logical(2), Filters(1), timeout=0).uuids == [U[1]]
    assert os.readlink(lock) == "/etc/passwd"  # berth neither follows nor touches it
    os.unlink(lock)
    os.mkfifo(lock, 0)
    assert ledger.try_claim([U[2]]) is not None


def test_odd_files_under_claim_names_are_not_claims(
    ledger_dir: str, holders: Holders, sitter: list[subprocess.Popen[str]]
) -> None:
    """A FIFO, a socket, a directory, a symlink (to a living claim) and an unreadable file
    (held) named like claims of every GPU: scans go on, the GPUs stay claimable."""
    real = holders.start([U[3]])
    ledger = Ledger(ledger_dir)
    (c,) = ledger.scan().claims
    d = ledger_dir
    os.mkfifo(os.path.join(d, files.claim_name(U[0], "f1f0", 1.0, None)))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(d, files.claim_name(U[0], "50c7", 1.0, None)))  # open(): ENXIO
    os.mkdir(os.path.join(d, files.claim_name(U[1], "d1d1", 1.0, None)))
    os.symlink(c.path, os.path.join(d, files.claim_name(U[1], "5e1f", 1.0, None)))
    unreadable = os.path.join(d, files.claim_name(U[2], "0000", 1.0, None))
    _sit_on(unreadable, sitter, "sh")  # held, as a living claim would be...
    os.chmod(unreadable, 0)  # ...but nobody else could read it: not berth's
    try:
        state = ledger.scan()
        assert [x.uuid for x in state.claims] == [U[3]]
        assert sorted(ledger.scan(bodies=False).held()) == [U[3]]
        lease = ledger.try_claim(U[:3])
        assert lease is not None
        assert ledger.try_claim([U[3]]) is None  # the real claim still counts
        lease.release()
        real.stdin.close()  # type: ignore[union-attr]
        real.wait()
    finally:
        sock.close()


def test_a_ledger_dir_behind_another_users_symlink_is_refused(tmp_path: str) -> None:
    """Whoever owns a symlink can re-point it at any moment, splitting the host's claims
    between two directories (a GPU would then be handed out twice)."""
    target = os.path.join(tmp_path, "real")
    os.mkdir(target, 0o700)
    os.chmod(target, 0o1777)
    link = os.path.join(tmp_path, "claims")
    os.symlink(target, link)
    assert check_dir(link) == link  # our own symlink: fine
    os.lchown(link, 65534, 65534)  # nobody's
    with pytest.raises(UsageError, match=r"symbolic link .* belongs to (nobody|65534)"):
        check_dir(link)


def test_a_world_writable_dir_without_the_sticky_bit_is_refused(tmp_path: str) -> None:
    d = os.path.join(tmp_path, "claims")
    os.mkdir(d)
    os.chmod(d, 0o777)  # anyone could remove anyone's claims
    with pytest.raises(UsageError, match=r"not sticky .*chmod \+t"):
        check_dir(d)
    os.chmod(d, 0o1777)
    assert check_dir(d) == d


def test_claims_made_at_once_never_overlap(ledger_dir: str, tmp_path: str) -> None:
    """Without a lock, two claimers that check at the same moment could both see a GPU free:
    each checks again after making its claim and withdraws on a conflict, so at most one
    stands. 8 processes race for 2 GPUs (0.6 of one each), many times over, and note when
    each claim stood (from its check to its release): no two on one GPU may overlap."""
    racer = (
        "import sys, time; from berth.claims.ledger import Ledger\n"
        "l = Ledger(sys.argv[1]); us = sys.argv[2].split(','); out = open(sys.argv[4], 'w')\n"
        "for k in range(int(sys.argv[3])):\n"
        "    lease = l.claim([(us[k % 2], k % 2)], 0.6, None)\n"
        "    if lease is not None:\n"
        "        start = time.monotonic()\n"
        "        time.sleep(0.0005)\n"
        "        out.write(f'{k % 2} {start} {time.monotonic()}\\n')\n"
        "        lease.release()\n"
    )
    logs = [os.path.join(tmp_path, f"racer{k}") for k in range(8)]
    procs = [
        subprocess.Popen([sys.executable, "-c", racer, ledger_dir, ",".join(U[:2]), "300", log])
        for log in logs
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    stood: list[tuple[int, float, float]] = []
    for log in logs:
        with open(log) as f:
            stood += [(int(g), float(a), float(b)) for g, a, b in (line.split() for line in f)]
    for gpu in (0, 1):
        spans = sorted((a, b) for g, a, b in stood if g == gpu)
        assert spans, f"no claim of GPU {gpu} ever stood"
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end < start, f"two claims of GPU {gpu} stood at once"


def test_a_look_that_keeps_nothing_does_not_stat_planted_files(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41.2: `berth status` (a scan in a fresh process) made a system call for each of
    100,000 planted dead files (2 s). A living ledger file is locked by its holder, and
    /proc/locks names every locked inode: the others are not looked at, the claim is seen."""
    lease = Ledger(ledger_dir).try_claim([U[0]])
    assert lease is not None
    try:
        for i in range(5000):
            path = os.path.join(ledger_dir, f"c.{files.escape(U[0])}.p{i:05d}.1000.0")
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
            os.chown(path, 65534, 65534)
        looked: list[str] = []
        real_lstat, real_probe = os.lstat, files.probe

        def lstat(path: str, *args: object, **kw: object) -> os.stat_result:
            looked.append(str(path))
            return real_lstat(path)

        def probe(path: str, **kw: bool) -> files.Probe:
            looked.append(path)
            return real_probe(path, **kw)

        snapshots: list[object] = []
        real_locked = files.locked_inodes

        def locked_inodes() -> set[int] | None:
            snapshots.append(real_locked())
            return snapshots[-1]  # type: ignore[return-value]

        monkeypatch.setattr(os, "lstat", lstat)
        monkeypatch.setattr(files, "probe", probe)
        monkeypatch.setattr(files, "locked_inodes", locked_inodes)
        claims = Ledger(ledger_dir).scan().claims
        assert [c.lease for c in claims] == [lease.lease_id]
        if snapshots == [None]:  # /proc/locks longer than one read here: no snapshot, every
            assert len(looked) > 5000  # file is looked at (tests/claims/test_locks_torn.py)
        else:
            assert len(looked) < 10, f"{len(looked)} files looked at"
    finally:
        lease.release()
