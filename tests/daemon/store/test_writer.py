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
