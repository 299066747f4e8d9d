"""The classification of GPU processes against what berth granted, and idle holders
(berth/core/enforce.py, issue 25): pure, fed with data."""

from __future__ import annotations

from berth.core.enforce import (
    INTRUSION,
    OUTSIDE,
    OVERRUN,
    OWN,
    Holder,
    Proc,
    classify,
    idle,
    track,
)

G = 1 << 30
TOTALS: dict[int, int | None] = {0: 80 * G, 1: 80 * G, 2: 80 * G}


def proc(gpu: int, pid: int, mem: float = 1, holder: str | None = None) -> Proc:
    return Proc(gpu, pid, 1000 + pid, 1000, "ann", int(mem * G), holder)


def kinds(found: list) -> dict[int, tuple[str, str | None]]:
    return {f.pid: (f.kind, f.victim) for f in found}


def test_each_process_is_its_holders_an_intruders_or_outside():
    job = Holder("job 1", "job", "bob", 1001, frozenset({0}))
    claim = Holder("claim L", "claim", "cy", 1002, frozenset({1}))
    procs = [
        proc(0, 10, holder="job 1"),  # the job on its GPU
        proc(1, 11, holder="claim L"),  # the claim on its GPU
        proc(0, 12),  # an outsider on the job's GPU
        proc(2, 13),  # an outsider on a GPU nobody holds
        proc(1, 14, holder="job 1"),  # the job on the claim's GPU
        proc(2, 15, holder="job 1"),  # the job on a GPU it was not granted
    ]
    assert kinds(classify(procs, [job, claim], TOTALS)) == {
        10: (OWN, None),
        11: (OWN, None),
        12: (INTRUSION, "job 1"),
        13: (OUTSIDE, None),
        14: (INTRUSION, "claim L"),
        15: (INTRUSION, None),
    }


def test_an_overrun_is_the_overrunning_holders_processes_only_with_the_tolerance():
    a = Holder("job 1", "job", "bob", 1001, frozenset({0}), share=0.5, mem=10 * G)
    b = Holder("job 2", "job", "cy", 1002, frozenset({0}), share=0.5, mem=10 * G)
    c = Holder("job 3", "job", "di", 1003, frozenset({1}), share=0.25)  # no --mem: 20G
    procs = [
        proc(0, 10, 6, "job 1"),
        proc(0, 11, 6, "job 1"),  # job 1: 12G > 10G x 1.1
        proc(0, 20, 10.9, "job 2"),  # job 2: within its tolerance
        proc(1, 30, 23, "job 3"),  # job 3: 23G > 20G x 1.1
    ]
    found = kinds(classify(procs, [a, b, c], TOTALS, tolerance=0.1))
    assert found == {
        10: (OVERRUN, "job 2"),
        11: (OVERRUN, "job 2"),
        20: (OWN, None),
        30: (OVERRUN, None),
    }
    declared = {f.pid: f.declared for f in classify(procs, [a, b, c], TOTALS)}
    assert declared[10] == 10 * G and declared[30] == 20 * G
    # A whole GPU without --mem has no memory limit.
    whole = Holder("job 4", "job", "bob", 1001, frozenset({2}))
    assert classify([proc(2, 40, 79, "job 4")], [whole], TOTALS)[0].kind == OWN


def test_since_is_kept_while_the_same_process_stays_in_its_class():
    procs = [proc(0, 12)]
    job = Holder("job 1", "job", "bob", 1001, frozenset({0}))
    first, seen = track(classify(procs, [job], TOTALS), {}, now=100.0)
    again, seen = track(classify(procs, [job], TOTALS), seen, now=105.0)
    assert first[0].since == again[0].since == 100.0
    # The same pid with another start time is another process: seen anew.
    reused = [Proc(0, 12, 9999, 1000, "ann", G)]
    other, seen = track(classify(reused, [job], TOTALS), seen, now=110.0)
    assert other[0].since == 110.0
    # Gone for a pass: forgotten.
    _, seen = track([], seen, now=115.0)
    back, _ = track(classify(procs, [job], TOTALS), seen, now=120.0)
    assert back[0].since == 120.0


def test_a_holder_is_idle_once_its_gpus_showed_nothing_for_idle_after():
    h = Holder("job 1", "job", "bob", 1001, frozenset({0, 1}), start=50.0)
    flagged, active = idle([h], {0: 0, 1: 0}, {}, now=100.0, idle_after=200.0)
    assert flagged == [] and active == {"job 1": 50.0}
    flagged, active = idle([h], {0: 0, 1: 0}, active, now=250.0, idle_after=200.0)
    assert [(i.holder, i.since) for i in flagged] == [("job 1", 50.0)]
    # One busy GPU of the holder makes it active again.
    flagged, active = idle([h], {0: 0, 1: 7}, active, now=210.0, idle_after=200.0)
    assert flagged == [] and active == {"job 1": 210.0}
    # A GPU whose utilisation is unknown is never called idle.
    flagged, _ = idle([h], {0: 0, 1: None}, {"job 1": 0.0}, now=900.0, idle_after=200.0)
    assert flagged == []


def test_every_finding_carries_the_proof_it_was_classed_on():
    """The daemon proves whose a process is (a claim's holder by the kernel's word, issue
    41.1); the finding, and so the audit log, says so in the daemon's words."""
    claim = Holder("claim L", "claim", "cy", 1002, frozenset({1}), mem=G)
    held = Proc(1, 20, 1020, 1002, "cy", 2 * G, "claim L", "pid 20 holds claim file c.x")
    alone = Proc(1, 21, 1021, 1003, "dan", G, None, "judged by NVML alone")
    found = {f.pid: f for f in classify([held, alone], [claim], TOTALS)}
    assert (found[20].kind, found[20].proof) == (OVERRUN, "pid 20 holds claim file c.x")
    assert (found[21].kind, found[21].to_dict()["proof"]) == (INTRUSION, "judged by NVML alone")
