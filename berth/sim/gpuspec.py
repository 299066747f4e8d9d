"""GPU-model constraints of trace jobs (openb's ``gpu_spec``) -> the GPUs they may use.

Semantics follow FGD's simulator (``hkust-adsl/kubernetes-scheduler-simulator``:
``data/pod_csv_to_yaml.py`` turns ``gpu_spec`` into the pod's ``gpu-card-model`` annotation,
GPU pods only; ``pkg/utils/utils.go`` ``IsNodeAccessibleToPodByType``, called from the GPU
plugin's ``Filter``): the spec is a ``|``-separated list of GPU models; a node qualifies when
its GPU model *equals* one of them (exact names: ``V100M16`` does not match ``V100M32``);
an empty spec (or only empty parts) allows any GPU.

The core needs nothing new for this: the allowed GPUs become the request's ``gpu_ids``, which
every placement (first-fit, best-fit, packer) already honours. A job whose models no node
can host (no GPU of those models, or fewer on any one node than the job needs) is
*unsatisfiable*: callers report it and never place it.
"""

from __future__ import annotations

from collections.abc import Sequence

from berth.core.inventory import Gpu
from berth.sim.traces import SimJob


class ModelIndex:
    """The GPUs of an inventory by model, with cached answers per spec."""

    __slots__ = ("_ids", "_node_size", "_nodes", "_ok", "models")

    def __init__(self, gpus: Sequence[Gpu]) -> None:
        self._nodes: dict[str, dict[str, int]] = {}  # model -> node -> GPUs of that model
        self._node_size: dict[str, int] = {}
        by_model: dict[str, list[int]] = {}
        for g in gpus:
            by_model.setdefault(g.name, []).append(g.index)
            per = self._nodes.setdefault(g.name, {})
            per[g.node] = per.get(g.node, 0) + 1
            self._node_size[g.node] = self._node_size.get(g.node, 0) + 1
        self.models = {m: tuple(ids) for m, ids in by_model.items()}
        self._ids: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._ok: dict[tuple[tuple[str, ...], int], bool] = {}

    def ids(self, models: tuple[str, ...]) -> tuple[int, ...]:
        """Indices of the GPUs whose model is one of ``models`` (sorted)."""
        got = self._ids.get(models)
        if got is None:
            got = self._ids[models] = tuple(
                sorted(i for m in set(models) for i in self.models.get(m, ()))
            )
        return got

    def satisfiable(self, models: tuple[str, ...], count: int) -> bool:
        """Whether some node has ``count`` GPUs of ``models`` (a job bigger than every node
        spans nodes, as the core's placement does: then the total must suffice)."""
        if not models:
            return True
        key = (models, count)
        ok = self._ok.get(key)
        if ok is None:
            per: dict[str, int] = {}
            for m in set(models):
                for node, k in self._nodes.get(m, {}).items():
                    per[node] = per.get(node, 0) + k
            need = max(count, 1)
            if any(k >= need for k in per.values()):
                ok = True
            else:
                spans = all(size < need for size in self._node_size.values())
                ok = spans and sum(per.values()) >= need
            self._ok[key] = ok
        return ok


def job_count(job: SimJob) -> int:
    """GPUs a job holds: its count for whole GPUs, 1 for a share, 0 for none."""
    return int(job.gpus) if job.gpus >= 1 else (1 if job.gpus > 0 else 0)


def resolve(jobs: list[SimJob], gpus: Sequence[Gpu]) -> list[SimJob]:
    """Give every model-constrained job the ``gpu_ids`` its models allow on ``gpus``
    (intersected with any ``gpu_ids`` it already had); return the unsatisfiable ones
    (their ``gpu_ids`` are set too, possibly empty: drop them, never place them)."""
    index = ModelIndex(gpus)
    bad: list[SimJob] = []
    for j in jobs:
        if not j.gpu_models or job_count(j) == 0:
            continue
        ids = index.ids(j.gpu_models)
        if j.gpu_ids is not None:
            keep = set(j.gpu_ids)
            ids = tuple(i for i in ids if i in keep)
        j.gpu_ids = ids
        if not index.satisfiable(j.gpu_models, job_count(j)) or len(ids) < job_count(j):
            bad.append(j)
    return bad


def describe(bad: list[SimJob], what: str = "jobs") -> str:
    """``"3 jobs whose gpu_spec no node here satisfies (job 12: 8 x T4, ...)"``."""
    shown = ", ".join(
        f"{j.name or f'job {j.id}'}: {job_count(j)} x {'|'.join(j.gpu_models)}" for j in bad[:3]
    )
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"{len(bad)} {what} whose gpu_spec no node here satisfies ({shown}{more})"
