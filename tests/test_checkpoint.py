"""A sync copies its WAL into the database file while its communities compute
(store/checkpoint.py): in a thread that never outlives the step and hands its error on."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import Writer
from sqlalchemy import Engine, text

from contextgraph import ContextGraph
from contextgraph.errors import DatabaseError
from contextgraph.store import checkpoint, db


def _copying() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == checkpoint.THREAD_NAME]


def test_the_wal_is_copied_into_the_database_file_meanwhile(db_path: Path) -> None:
    graph = ContextGraph.open(db_path)
    before = db_path.stat().st_size
    with db.write(graph.engine) as conn:  # about 1 MB, far below wal_autocheckpoint
        conn.execute(text("CREATE TABLE scratch (x TEXT)"))
        conn.execute(text("INSERT INTO scratch VALUES (:x)"), [{"x": "y" * 4000}] * 250)
    assert db_path.stat().st_size == before  # committed, but in the WAL only
    with checkpoint.meanwhile(graph.engine):
        deadline = time.monotonic() + 30
        while db_path.stat().st_size < before + 1_000_000 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert db_path.stat().st_size >= before + 1_000_000
    assert not _copying()  # joined when the block ended
    with db.read(graph.engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM scratch")).scalar_one() == 250
    graph.close()


def _spy_meanwhile(
    monkeypatch: pytest.MonkeyPatch, on_leave: Callable[[Engine], None] | None = None
) -> list[Engine]:
    """Wrap checkpoint.meanwhile: the engines of the blocks entered, in order; ``on_leave``
    runs as each block's body ends, before the block is left (its thread still running)."""
    entered: list[Engine] = []
    meanwhile = checkpoint.meanwhile

    @contextmanager
    def spy(engine: Engine, first: Callable[[], None] | None = None) -> Iterator[None]:
        with meanwhile(engine, first):
            entered.append(engine)
            yield
            if on_leave is not None:
                on_leave(engine)

    monkeypatch.setattr(checkpoint, "meanwhile", spy)
    return entered


def test_a_sync_copies_while_its_communities_compute_and_leaves_no_thread(
    db_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = ContextGraph.open(db_path)
    entered = _spy_meanwhile(monkeypatch)
    write("a.md", "[[Alpha]] and [[Beta]].")
    assert graph.sync([vault]).communities
    assert entered == [graph.engine] and not _copying()
    assert graph.sync([vault]).unchanged == 1  # no community to compute: nothing to copy
    assert entered == [graph.engine]
    assert graph.doctor().ok
    graph.close()


def test_the_communities_are_stored_inside_the_block(
    db_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's write overlaps the work beside it (the WAL copy blocks no writer)."""
    graph = ContextGraph.open(db_path)
    stored: list[int] = []

    def count_runs(engine: Engine) -> None:
        with db.read(engine) as conn:
            stored.append(conn.execute(text("SELECT count(*) FROM community_runs")).scalar_one())

    _spy_meanwhile(monkeypatch, count_runs)
    write("a.md", "[[Alpha]] and [[Beta]].")
    assert graph.sync([vault]).communities
    assert stored == [1]
    graph.close()


def test_igraph_loads_with_the_first_partition_not_with_its_module() -> None:
    """So that a sync checks its arguments and claims the run before the 20-30 ms import,
    which then overlaps the work beside the run."""
    probe = (
        "import sys\n"
        "from contextgraph.graph import partition\n"
        "before = 'igraph' in sys.modules\n"
        "partition.partition(2, [(0, 1)], [1.0], algorithm='leiden', resolution=1.0, seed=1)\n"
        "print(before, 'igraph' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("where", ["memory", "read-only"])
def test_there_is_nothing_to_copy_in_memory_or_read_only(
    db_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if where == "memory":
        graph = ContextGraph.open(":memory:")
    else:
        ContextGraph.open(db_path).close()
        monkeypatch.setattr(db, "_writable", lambda _path: False)
        graph = ContextGraph.open(db_path)
        assert db.is_read_only(graph.engine)
    with checkpoint.meanwhile(graph.engine):
        assert not _copying()
    graph.close()


def test_the_copys_error_reaches_the_caller_unless_the_block_failed(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = ContextGraph.open(db_path)

    def broken() -> object:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(graph.engine, "raw_connection", broken)
    with pytest.raises(DatabaseError, match="disk I/O error"), checkpoint.meanwhile(graph.engine):
        pass
    block = checkpoint.meanwhile(graph.engine)
    with pytest.raises(KeyError, match="the block's own") as failed, block:
        raise KeyError("the block's own")
    assert failed.value.__notes__ == [
        f"meanwhile, in the {checkpoint.THREAD_NAME} thread: disk I/O error"
    ]
    assert not _copying()
    graph.close()


def test_a_first_step_runs_in_the_thread_before_the_copy_or_before_the_block(
    db_path: Path,
) -> None:
    graph = ContextGraph.open(db_path)
    ran: list[str] = []

    def first() -> None:
        ran.append(threading.current_thread().name)

    with checkpoint.meanwhile(graph.engine, first):
        pass
    assert ran == [checkpoint.THREAD_NAME] and not _copying()
    graph.close()
    ran.clear()
    with ContextGraph.open(":memory:") as memory, checkpoint.meanwhile(memory.engine, first):
        assert ran == [threading.current_thread().name]  # no thread of its own: done already


def test_a_first_step_that_fails_skips_the_copy_and_reaches_the_caller(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = ContextGraph.open(db_path)
    copies: list[object] = []
    connect = graph.engine.raw_connection
    monkeypatch.setattr(graph.engine, "raw_connection", lambda: copies.append(1) or connect())

    def first() -> None:
        raise sqlite3.OperationalError("database disk image is malformed")

    with pytest.raises(DatabaseError, match="malformed"), checkpoint.meanwhile(graph.engine, first):
        pass
    assert copies == [] and not _copying()
    graph.close()
