"""``could_fit`` (the reservation's cheap test) never says no where ``place()`` finds room.

``_reserve`` releases running jobs one by one and asks ``place()`` only once the counts allow
a fit; the reservation (shadow time and GPUs) is the same only if ``could_fit`` is False
exactly when it can be sure. Randomized capacities (whole and fractional holders, a job
bigger than a node), every placement, a fixed seed.
"""

from __future__ import annotations

import random

from berth.core.capacity import Capacity
from berth.core.inventory import uniform
from berth.core.job import Request
from berth.core.placement import PLACEMENTS, Profile, could_fit, place


def test_could_fit_is_false_only_where_place_finds_nothing() -> None:
    rng = random.Random(7)
    sizes = (1, 2, 3, 4, 5, 8, 12, 0.1, 0.25, 0.5, 0.75, 0.9)
    said_no = tried = 0
    for _ in range(300):
        n_nodes, per = rng.choice(((1, 8), (2, 4), (3, 4), (4, 2)))
        gpus, nodes = uniform(per, nodes=n_nodes)
        cap = Capacity(gpus, nodes)
        for p in range(len(gpus)):
            r = rng.random()
            if r < 0.4:
                cap.take([p], 1.0, None)
            elif r < 0.7:
                cap.take([p], rng.choice((0.1, 0.25, 0.5, 0.75)), None)
        profile = Profile.of([Request(gpus=g) for g in sizes])
        for g in sizes:
            if g > len(gpus):
                continue
            req = Request(gpus=g)
            ok = could_fit(cap, req)
            tried += 1
            for how in PLACEMENTS:
                if not ok:
                    assert place(cap, req, how, profile) is None, (g, cap.free, how)
            said_no += not ok
    assert 0 < said_no < tried  # both answers were exercised
