"""Hold claims in a separate process (for tests): claim, print "held", wait for stdin to close.

python tests/claims/holder.py DIR UUID[,UUID...] [SHARE] [MEM_BYTES]
"""

from __future__ import annotations

import sys

from berth.claims.ledger import Ledger


def main() -> int:
    path, uuids = sys.argv[1], sys.argv[2].split(",")
    share = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    mem = int(sys.argv[4]) if len(sys.argv) > 4 else None
    lease = Ledger(path).try_claim(uuids, share=share, mem=mem, respect_waiters=False)
    if lease is None:
        print("busy", flush=True)
        return 1
    print("held", lease.lease_id, flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
    lease.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
