"""Shares of one GPU between queued jobs and daemonless claims (docs/scheduling.md, "What
counts as used": "shares add up to at most 1 and declared memory to at most the card's
memory"; ../shared/DESIGN.md invariant 1: across the daemon and daemonless scripts
together). A `berth run`-style claim of half a GPU with 60G keeps a queued `-g 0.5 --mem
30G` job waiting (90G > 80G) while a quarter with 10G runs beside it; a queued job of half
with 60G keeps a `berth run -g 0.5 --mem 30G` waiting while one with 10G gets the GPU."""

from __future__ import annotations

from helpers import wait_until

from berth.claims.ledger import Ledger

G = 2**30


def test_a_claims_memory_keeps_a_queued_share_off_and_a_smaller_one_fits(daemon):
    daemon.start("--poll-interval", "0.2", gpus=1)
    uuid = daemon.fake.uuids[0]
    lease = Ledger().try_claim([uuid], share=0.5, mem=60 * G, memory_total={uuid: 80 * G},
                               label="berth run")  # fmt: skip
    assert lease is not None
    try:
        too_much = daemon.submit("true", gpus=0.5, mem=30 * G)
        fits = daemon.submit("true", gpus=0.25, mem=10 * G)
        assert daemon.wait_done([fits], timeout=20)[fits]["state"] == "COMPLETED"
        wait_until(lambda: (daemon.job(too_much).get("reason") or "").startswith("Resources"),
                   timeout=15, message="the 30G share waits for the claim's 60G")  # fmt: skip
        assert daemon.job(too_much)["state"] == "PENDING"
    finally:
        lease.release()
    assert daemon.wait_done([too_much], timeout=20)[too_much]["state"] == "COMPLETED"


def test_a_queued_shares_memory_keeps_a_berth_run_off_and_a_smaller_one_fits(daemon):
    daemon.start("--poll-interval", "0.2", gpus=1)
    gate = daemon.fake.root / "gate"
    job = daemon.submit(wrap=f"while [ ! -e {gate} ]; do sleep 0.05; done", gpus=0.5,
                        mem=60 * G)  # fmt: skip
    wait_until(lambda: daemon.job(job)["state"] == "RUNNING", timeout=15)
    refused = daemon.berth("run", "-g", "0.5", "--mem", "30G", "--timeout", "1", "--", "true")
    assert refused.returncode != 0 and "60.0G" in refused.stderr, refused.stderr
    beside = daemon.berth("run", "-g", "0.25", "--mem", "10G", "--timeout", "10", "--",
                          "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"')  # fmt: skip
    assert beside.returncode == 0 and beside.stdout.strip() == "0", beside.stderr
    gate.touch()
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"
