from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from berth.core import GIB, Gpu, Job, Request


def gpus(n: int, mem_gib: int = 80, name: str = "NVIDIA A100-SXM4-80GB") -> list[Gpu]:
    return [Gpu(i, f"GPU-{i}", name, mem_gib * GIB) for i in range(n)]


@pytest.fixture
def make_job() -> Callable[..., Job]:
    counter = itertools.count(1)

    def make(gpus: float = 1, *, t: float | None = None, **kw: Any) -> Job:
        i = kw.pop("id", None) or next(counter)
        req_keys = ("mem", "gpu_ids", "prefer", "name", "cpu", "ram")
        req = Request(gpus=gpus, **{k: kw.pop(k) for k in req_keys if k in kw})
        return Job(id=i, submit_time=float(i) if t is None else t, request=req, **kw)

    return make
