"""`berth select` on a real GPU a PyTorch process uses, outside berth and under a claim."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from gpukit import ON_GPU0, real_gpu

GiB = 1 << 30


def test_select_skips_a_gpu_a_pytorch_process_uses(gpu: Any) -> None:
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=4, wait="stdin", env=ON_GPU0)
        started.append(p)
        p.next_event("ready", timeout=120)
        busy = gpu.berth("select", "--only", "0", "--explain")
        allowed = gpu.berth("select", "--only", "0", "--max-procs", "1")
        free = gpu.status_json()["gpus"][0]["memory_free"]
        too_much = gpu.berth("select", "--only", "0", "--max-procs", "1", "--explain",
                             "--min-free", f"{free // GiB + 2}G")  # fmt: skip
    assert busy.returncode == 1 and busy.stdout == ""
    assert "1 process > 0" in busy.stderr
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "0"), allowed.stderr
    assert too_much.returncode == 1 and "free" in too_much.stderr, too_much.stderr


def test_a_claims_own_process_is_not_outside_use(gpu: Any) -> None:
    """Half the GPU under `berth run` with PyTorch in it: another half fits (its process,
    which NVML lists, is the claim's, not an outsider's), 0.75 more does not."""
    with real_gpu.progs() as started:
        run = gpu.start_prog(wrap=gpu.berth_argv("run", "-g", "0.5", "--mem", "20G", "--"),
                             mem_gib=4, wait="stdin")  # fmt: skip
        started.append(run)
        job = run.next_event("ready", timeout=120)
        code = (
            "import json, berth.api as a\n"
            "print(json.dumps({str(s): [g.index for g in a.selection(1, share=s, mem='20G',"
            " max_procs=0, only=[0]).chosen] for s in (0.5, 0.75)}))\n"
        )
        r = subprocess.run([gpu.python, "-c", code], env=gpu.env, capture_output=True,
                           text=True, timeout=60, check=False)  # fmt: skip
        status = gpu.status_json()
        assert run.finish() == 0
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"0.5": [0], "0.75": []}
    assert real_gpu.proc_entry(status, job["pid"]) is not None
    claims = status["claims"]["claims"]
    assert [c["share"] for c in claims] == [0.5]
