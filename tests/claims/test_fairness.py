"""Fairness: older waiters reserve what they wait for; younger claims may not take it, but
may take what no older waiter can use. Waking: a freed claim wakes a waiter at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until

from berth.api.lease import build_request, claim
from berth.claims.ledger import Claim, Ledger
from berth.errors import WaitTimeout

WAITER = """
import sys, time, berth
kw = eval(sys.argv[1])
with berth.acquire(timeout=30, poll=60, **kw) as lease:
    print("got", ",".join(map(str, sorted(lease.ids))), time.time(), flush=True)
"""


def hold(i: int) -> Claim:
    lease, _ = claim(build_request(1, only=str(i)), timeout=0)
    return lease


@pytest.fixture
def spawn(fake_gpus: Any) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(**kw: Any) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [sys.executable, "-c", WAITER, repr(kw)],
            env=fake_gpus.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()


def _waiter_reserving(n: int) -> bool:
    waiters = Ledger().scan().waiters
    return bool(waiters) and len(waiters[0].reserve) == n


def test_big_waiter_is_not_starved_by_small_claims(fake_gpus: Any, spawn: Any) -> None:
    fake_gpus.setup(n=4)
    held = [hold(i) for i in range(4)]
    big = spawn(gpus=4)
    wait_until(lambda: _waiter_reserving(4), timeout=10, message="the 4-GPU waiter to reserve")
    held[0].release()
    # GPU 0 is free, but the older 4-GPU waiter reserved it: a newcomer must queue.
    with pytest.raises(WaitTimeout, match="GPU 0: reserved for an older waiter"):
        claim(build_request(1), timeout=0)
    assert big.poll() is None
    for lease in held[1:]:
        lease.release()
    out, err = big.communicate(timeout=10)
    assert out.startswith("got 0,1,2,3"), err


def test_small_claims_still_use_gpus_the_big_waiter_cannot(fake_gpus: Any, spawn: Any) -> None:
    fake_gpus.setup(n=4)
    held = [hold(i) for i in range(4)]
    big = spawn(gpus=2, only="0,1")
    wait_until(lambda: _waiter_reserving(2), timeout=10, message="the 2-GPU waiter to reserve")
    assert {u for u, _, _ in Ledger().scan().waiters[0].reserve} == set(fake_gpus.uuids[:2])
    held[2].release()
    lease, _ = claim(build_request(1), timeout=0)  # GPU 2: outside the waiter's --only
    assert lease.indices == [2]
    held[0].release()
    with pytest.raises(WaitTimeout):
        claim(build_request(1), timeout=0)  # GPU 0 is reserved
    held[1].release()
    out, err = big.communicate(timeout=10)
    assert out.startswith("got 0,1"), err
    lease.release()
    held[3].release()


def test_killed_holder_wakes_a_waiter_at_once(fake_gpus: Any, spawn: Any) -> None:
    fake_gpus.setup(n=2)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import berth,sys; l=berth.acquire(2); print('held', flush=True); sys.stdin.read()",
        ],
        env=fake_gpus.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        waiter = spawn(gpus=1)  # poll=60: only the ledger event can wake it in time
        wait_until(lambda: Ledger().scan().waiters, timeout=10, message="the waiter")
        killed = time.time()
        holder.kill()
        out, err = waiter.communicate(timeout=10)
        assert out.startswith("got"), err
        started = float(out.split()[2])
        assert started - killed < 1.0, f"waiter started {started - killed:.3f} s after the kill"
    finally:
        holder.kill()
        holder.communicate()


def test_timeout_says_what_was_missing(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4, memory="80G")
    for i in range(4):
        fake_gpus.update(i, memory_used=(70 - 2 * i) * (1 << 30))
    import berth

    t0 = time.monotonic()
    with pytest.raises(WaitTimeout) as e:
        berth.acquire(2, min_free="20G", max_procs=None, timeout=0.3, poll=0.1)
    assert time.monotonic() - t0 < 3
    msg = str(e.value)
    assert msg.startswith("waited 0.3 s for 2 GPUs with >= 20.0G free; best seen:"), msg
    assert "GPU 3: free 16.0G < 20.0G" in msg
    assert Ledger().scan().waiters == []  # the waiter file went with the timeout


def test_reservation_is_deterministic_whatever_the_order() -> None:
    """A reservation that changed on every look would wake the other waiters in a loop."""
    from claimkit import logical

    from berth.claims.fairness import reservation
    from berth.selection.choose import Claimed
    from berth.selection.filters import Filters

    gpus = logical(8)
    claims = {g.uuid: Claimed(1.0) for g in gpus}  # all held: the waiter reserves for later
    older = {gpus[1].uuid: Claimed(1.0)}
    picks = {
        tuple(reservation(gpus, Filters(3, order="random"), [], claims, older)) for _ in range(50)
    }
    assert picks == {((gpus[0].uuid, 1.0, 0), (gpus[2].uuid, 1.0, 0), (gpus[3].uuid, 1.0, 0))}
    preferred = reservation(gpus, Filters(2, prefer="5"), [], claims, older)
    assert [u for u, _, _ in preferred] == [gpus[5].uuid, gpus[0].uuid]
    # A waiter that berth claims ending cannot satisfy reserves nothing.
    assert reservation(gpus, Filters(8), [], claims, older) == []


def _first_waiter_reserving(n: int) -> bool:
    waiters = Ledger().scan().waiters
    return bool(waiters) and not waiters[0].stale and len(waiters[0].reserve) == n


def test_a_stopped_waiter_reserves_nothing_and_keeps_its_place(fake_gpus: Any, spawn: Any) -> None:
    """A waiter stopped with Ctrl-Z (or frozen) cannot take what it waits for: within a few
    seconds its reservation lapses, so idle GPUs go to others (before issue 11 they stayed idle
    for as long as it was stopped). Resumed, it reserves again from its old place in line."""
    fake_gpus.setup(n=2)
    held = [hold(i) for i in range(2)]
    big = spawn(gpus=2)
    wait_until(lambda: _first_waiter_reserving(2), timeout=10, message="the waiter to reserve")
    os.kill(big.pid, signal.SIGSTOP)
    for lease in held:
        lease.release()
    small, _ = claim(build_request(1), timeout=15)  # a newcomer gets an idle GPU
    (w,) = Ledger().scan().waiters
    assert w.stale and w.reserve == [] and len(w.wanted) == 2
    status = fake_gpus.berth("status")
    assert "stopped or not answering" in status.stdout, status.stdout
    os.kill(big.pid, signal.SIGCONT)
    wait_until(lambda: _first_waiter_reserving(2), timeout=10, message="the waiter to return")
    with pytest.raises(WaitTimeout, match="reserved for an older waiter"):
        claim(build_request(1), timeout=0)  # first in line again: the free GPU is its
    small.release()
    out, err = big.communicate(timeout=10)
    assert out.startswith("got 0,1"), err
