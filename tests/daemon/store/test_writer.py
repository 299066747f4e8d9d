"""The daemon's committer thread: batches commit in order, durably, and report on the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from berth.daemon.store.store import open_store
from berth.daemon.store.writer import Writer


def test_batches_commit_in_order_and_answer_on_the_loop(tmp_path):
    store = open_store(str(tmp_path))
    store.close()

    async def main() -> list[tuple[int, BaseException | None, bool]]:
        loop = asyncio.get_running_loop()
        writer = Writer(str(tmp_path / "berth.db"), loop)
        done: list[tuple[int, BaseException | None, bool]] = []
        futs = []
        for i in range(5):
            fut = loop.create_future()
            futs.append(fut)
            sql = "INSERT INTO meta(key, value) VALUES (?, ?)"

            def cb(err, i=i, fut=fut):
                done.append((i, err, asyncio.get_running_loop() is loop))
                fut.set_result(None)

            writer.submit([(sql, [(f"k{i}", str(i))])], cb)
        await asyncio.gather(*futs)
        writer.close()
        return done

    done = asyncio.run(main())
    assert done == [(i, None, True) for i in range(5)]
    db = sqlite3.connect(tmp_path / "berth.db")
    assert db.execute("SELECT key FROM meta ORDER BY rowid").fetchall() == [
        (f"k{i}",) for i in range(5)
    ]


def test_a_failed_batch_changes_nothing_and_reports_the_error(tmp_path):
    open_store(str(tmp_path)).close()

    async def main() -> BaseException | None:
        loop = asyncio.get_running_loop()
        writer = Writer(str(tmp_path / "berth.db"), loop)
        fut: asyncio.Future[BaseException | None] = loop.create_future()
        batch = [
            ("INSERT INTO meta(key, value) VALUES (?, ?)", [("a", "1")]),
            ("INSERT INTO meta(key, value) VALUES (?, ?)", [("a", "2")]),  # duplicate key
        ]
        writer.submit(batch, fut.set_result)
        err = await fut
        writer.close()
        return err

    err = asyncio.run(main())
    assert isinstance(err, sqlite3.IntegrityError)
    db = sqlite3.connect(tmp_path / "berth.db")
    assert db.execute("SELECT COUNT(*) FROM meta").fetchone() == (0,)


def test_a_committed_batch_is_let_go_before_the_next_one_comes(tmp_path):
    """Its rows and its ``done`` (which holds a request's jobs and specs: a 10,000-line jobs
    file's) are freed once it is committed, not held by the thread until the next batch
    (issue 35: two requests' memory at once, ~25 MB more RSS for `submit --file`)."""
    import gc
    import weakref

    store = open_store(str(tmp_path))
    store.close()

    class Rows(list):  # (weakly referable, as a batch's rows are not)
        pass

    async def main() -> tuple[weakref.ref[Any], weakref.ref[Any]]:
        loop = asyncio.get_running_loop()
        writer = Writer(str(tmp_path / "berth.db"), loop)
        fut = loop.create_future()

        class Done:
            def __call__(self, err: BaseException | None) -> None:
                fut.set_result(err)

        done, rows = Done(), Rows([("k", "v")])
        writer.submit([("INSERT INTO meta(key, value) VALUES (?, ?)", rows)], done)
        gone = weakref.ref(done), weakref.ref(rows)
        del done, rows
        assert await fut is None
        await asyncio.sleep(0)  # (the loop's own reference to the callback dropped)
        from helpers import wait_until

        def freed() -> bool:  # (the thread drops its last reference as its commit returns)
            gc.collect()
            return gone[0]() is None and gone[1]() is None

        wait_until(freed, message="the committed batch let go (the thread held it)")
        writer.close()
        return gone

    gone = asyncio.run(main())
    assert gone[0]() is None and gone[1]() is None
def test_a_batch_s_gates_open_once_committed_and_its_answer_waits_for_the_log_s_sync(
    tmp_path, monkeypatch
):
    """The order that keeps a start safe and its answer durable (berth/daemon/store/writer.py):
    COMMIT (another connection, as a restarted daemon would, sees the rows) -> the batch's
    start gates open -> the write-ahead log is forced to disk -> the loop hears of it."""
    import os

    from berth.daemon.store import writer as writer_mod
    from berth.daemon.supervisor import gate

    open_store(str(tmp_path)).close()
    path = str(tmp_path / "berth.db")
    events: list[str] = []
    real_open, real_sync = gate.open_all, os.fdatasync

    def seen() -> list[tuple[str]]:
        db = sqlite3.connect(path)
        try:
            return db.execute("SELECT key FROM meta WHERE key = 'started'").fetchall()
        finally:
            db.close()

    def open_all(fds: list[int]) -> None:
        events.append(f"gates ({'committed' if seen() else 'NOT committed'})")
        real_open(fds)

    def fdatasync(fd: int) -> None:
        assert os.path.samestat(os.fstat(fd), os.stat(path + "-wal"))  # the database's log
        events.append("log synced")
        real_sync(fd)

    monkeypatch.setattr(writer_mod.gate, "open_all", open_all)
    monkeypatch.setattr(writer_mod.os, "fdatasync", fdatasync)
    wait, go = gate.make()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        writer = Writer(path, loop)
        fut: asyncio.Future[None] = loop.create_future()

        def done(err: BaseException | None) -> None:
            events.append(f"answered ({err})")
            fut.set_result(None)

        writer.submit(
            [("INSERT INTO meta(key, value) VALUES (?, ?)", [("started", "1")])], done, [go]
        )
        await fut
        writer.close()

    asyncio.run(main())
    os.close(go)
    assert gate.passed(wait)
    assert events == ["gates (committed)", "log synced", "answered (None)"]


def test_a_log_that_cannot_be_synced_makes_every_later_commit_sync_inside_itself(
    tmp_path, monkeypatch, caplog
):
    """The committer's own sync of the log fails (a disk error): the batch stands (it is
    committed) and is answered; the failure is logged, and the connection is back to
    ``synchronous=FULL``, so later commits sync inside the ``COMMIT`` and no gate waits
    on a sync that cannot be done."""
    import os

    from berth.daemon.store import writer as writer_mod

    open_store(str(tmp_path)).close()
    path = str(tmp_path / "berth.db")
    calls = []

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(writer_mod.os, "fdatasync", fdatasync)

    async def main() -> tuple[list[BaseException | None], int]:
        loop = asyncio.get_running_loop()
        writer = Writer(path, loop)
        errors: list[BaseException | None] = []
        for key in ("a", "b"):
            fut: asyncio.Future[None] = loop.create_future()

            def done(err: BaseException | None, fut: asyncio.Future[None] = fut) -> None:
                errors.append(err)
                fut.set_result(None)

            writer.submit([("INSERT INTO meta(key, value) VALUES (?, ?)", [(key, "1")])], done)
            await fut
        mode = writer.db.execute("PRAGMA synchronous").fetchone()[0]
        writer.close()
        return errors, mode

    errors, mode = asyncio.run(main())
    assert errors == [None, None]
    assert len(calls) == 1  # (tried once; the second commit synced inside itself)
    assert mode == 2  # FULL
    assert "cannot force the state database's log to disk" in caplog.text
    db = sqlite3.connect(path)
    assert db.execute("SELECT key FROM meta WHERE key IN ('a', 'b') ORDER BY key").fetchall() == [
        ("a",),
        ("b",),
    ]
    assert os.path.exists(path + "-wal")
