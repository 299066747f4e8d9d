"""What creating a job's log file costs on a filesystem, in CPU time a create (w8-thru): 2,000
files made in a new directory, 2,000 more beside them, then 2,000 more after the first 4,000
are removed. On an ext4 without a journal a new inode skips every inode of its block group
freed in the last 60 s (300 s while the inode table's block is dirty), reading each one's
deletion time (``recently_deleted``), so a group where thousands of files were just removed
(a test suite's /tmp, a bench run that removed its logs) makes each create dear; a fresh
group does not. Run with directories to try (each made and removed here):

    python3 bench/log_inodes.py /tmp /dev/shm /var/tmp
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time


def _make(d: str, n: int = 2000) -> float:
    """Microseconds of CPU a create of ``n`` new files in the new directory ``d``."""
    os.makedirs(d)
    t = time.thread_time()
    for i in range(n):
        os.close(os.open(f"{d}/{i}.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    return round((time.thread_time() - t) / n * 1e6, 1)


def main() -> int:
    for where in sys.argv[1:] or ["/tmp"]:
        top = tempfile.mkdtemp(prefix="log-inodes-", dir=where)
        try:
            fresh, beside = _make(f"{top}/a"), _make(f"{top}/b")
            shutil.rmtree(f"{top}/a")
            shutil.rmtree(f"{top}/b")
            after = _make(f"{top}/c")
            print(f"{where}: us a create: fresh {fresh}, beside them {beside}, "
                  f"after 4,000 removed {after}")  # fmt: skip
        finally:
            shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
