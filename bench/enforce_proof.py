"""What proving claim holders costs the enforcer each poll (issue 41.1).

Usage (from the repository root):

    .venv/bin/python bench/enforce_proof.py [--claims 64] [--outsiders 16] [--rounds 20]

This process holds ``--claims`` claim files (a temporary ledger, 8 GPUs) and 200 other
descriptors, as a training process may; ``--outsiders`` processes of the same user hold
none (each is re-proven every poll: only proofs found are kept). Prints the first poll's
cost (every descriptor listed) and the mean of the next ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time

from berth.claims import files
from berth.claims.ledger import Ledger
from berth.daemon.engine.enforce_proof import ClaimProofs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", type=int, default=64)
    ap.add_argument("--outsiders", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    top = tempfile.mkdtemp()
    os.chmod(top, 0o1777)
    held = []
    for i in range(args.claims):
        lease, uuid = files.new_lease_id(), f"GPU-{i % 8}"
        body = files.encode_body(
            {"v": 1, "lease": lease, "gpu": uuid, "gpus": [uuid], "pids": [os.getpid()]}
        )
        name = files.claim_name(uuid, lease, 0.125, None)
        held.append(files.create_locked(top, name, body, lease))
    held += [os.open("/dev/null", os.O_RDONLY) for _ in range(200)]
    kids = [subprocess.Popen(["sleep", "600"]) for _ in range(args.outsiders)]
    try:
        claims: dict[str, list[object]] = {}
        for c in Ledger(top).scan(bodies=True).claims:
            claims.setdefault(f"claim {c.lease}", []).append(c)
        gpu = [os.getpid(), *(k.pid for k in kids)]
        proofs = ClaimProofs()
        t = time.perf_counter()
        proven = proofs.prove(claims, gpu)  # type: ignore[arg-type]
        cold = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(args.rounds):
            proofs.prove(claims, gpu)  # type: ignore[arg-type]
        warm = (time.perf_counter() - t) / args.rounds
        print(
            f"{args.claims} claims, {len(gpu)} GPU processes ({len(proven)} proven): "
            f"first poll {cold * 1e3:.2f} ms, then {warm * 1e3:.2f} ms per poll"
        )
    finally:
        for k in kids:
            k.kill()
            k.wait()
        for fd in held:
            os.close(fd)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
