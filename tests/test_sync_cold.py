"""A cold load (a sync into a SQLite store without any file) builds some things once.

The full-text insert trigger and two secondary indexes are dropped for the load and recreated
at its end (contextgraph.sync.coldload); every batch indexes its own files' text inside its
transaction, so the index never lags the files, and a sync killed mid-load leaves a consistent
store whose next sync (of any kind) recreates what was dropped before writing anything.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import Writer, kill_sync_mid_way, snapshot, write_topic_notes
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from contextgraph import ContextGraph, Settings
from contextgraph.errors import DatabaseError
from contextgraph.store import checkpoint, db, meta
from contextgraph.sync import coldload, extraction, run

REPO = Path(__file__).resolve().parents[1]


def _schema(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
    finally:
        conn.close()


def _dates(path: Path) -> list[tuple[object, ...]]:
    """search_dates by file path, after checking it holds a row for exactly the stored files
    with the reference time migration 0005's trigger computes."""
    conn = sqlite3.connect(path)
    try:
        expected = conn.execute(
            "SELECT f.path, f.source_id, max(coalesce(f.last_accessed, coalesce(f.created,"
            " f.modified)), coalesce(f.created, f.modified)) FROM files f ORDER BY f.path"
        ).fetchall()
        stored = conn.execute(
            "SELECT f.path, d.source_id, d.reference FROM search_dates d"
            " JOIN files f ON f.id = d.id ORDER BY f.path"
        ).fetchall()
        count = conn.execute("SELECT count(*) FROM search_dates").fetchone()[0]
    finally:
        conn.close()
    assert stored == expected and count == len(expected)
    return [(p, r) for p, _, r in stored]


def _index(path: Path) -> list[tuple[object, ...]]:
    """Every (term, file path, column, offset) the FTS5 index holds, and its integrity."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("INSERT INTO files_fts(files_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, files_fts, instance)")
        return sorted(
            conn.execute(
                "SELECT v.term, f.path, v.col, v.offset FROM temp.v v JOIN files f ON f.id = v.doc"
            ).fetchall()
        )
    finally:
        conn.close()


def _fts_config(path: Path) -> list[tuple[object, ...]]:
    """The FTS5 index's configuration rows (files_fts_config)."""
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT k, v FROM files_fts_config").fetchall())
    finally:
        conn.close()


def _notes(write: Writer, count: int, prefix: str = "n") -> None:
    for n in range(count):
        write(
            f"{prefix}{n:03d}.md",
            f"# Title {n}\n[[Topic {n % 7}]] and [[Topic {n % 5 + 10}]]: TokenValidator, "
            f"get_HTTPServer and prose number {n}\n",
        )


def test_a_cold_load_equals_a_row_by_row_load_and_keeps_the_schema(
    tmp_path: Path, vault: Path, write: Writer
) -> None:
    _notes(write, 60)
    settings = Settings.from_env(batch_files=7, workers=1)
    cold_db, warm_db = tmp_path / "cold.db", tmp_path / "warm.db"
    with ContextGraph.open(cold_db, settings=settings) as cold:
        cold.sync([vault])
    # The same files, indexed row by row by the trigger: a store that already holds a file
    # is not cold, so seed one in another source, then sync the vault and drop the seed.
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "seed.md").write_text("[[Seed]]\n", encoding="utf-8")
    with ContextGraph.open(warm_db, settings=settings) as warm:
        warm.sync([seed], name="seed")
        warm.sync([vault], name="vault")
        warm.remove_source("seed")
    with ContextGraph.open(cold_db) as cold, ContextGraph.open(warm_db) as warm:
        assert snapshot(cold) == snapshot(warm)
        with db.read(cold.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert cold.doctor().ok
    assert _schema(cold_db) == _schema(warm_db)  # the triggers are back, exactly as they were
    assert _fts_config(cold_db) == _fts_config(warm_db)  # hashsize too
    assert _index(cold_db) == _index(warm_db)
    assert _dates(cold_db) == _dates(warm_db)  # written by the batches, not the trigger


@pytest.mark.parametrize("before", [None, {"hashsize": 300_000, "automerge": 8}])
def test_a_cold_load_writes_the_index_in_larger_pieces_and_sets_the_options_back(
    tmp_path: Path,
    vault: Path,
    write: Writer,
    monkeypatch: pytest.MonkeyPatch,
    before: dict[str, int] | None,
) -> None:
    """In every batch of the load FTS5's hashsize is coldload.LOAD_HASH_BYTES and its
    automerge 0 (the batches' segments stay unmerged); afterwards both are what they were:
    FTS5's defaults (no rows), or what the database had configured."""
    _notes(write, 12)
    database = tmp_path / "graph.db"
    with ContextGraph.open(database):
        pass
    with sqlite3.connect(database) as conn:
        for option, value in (before or {}).items():
            conn.execute("INSERT INTO files_fts(files_fts, rank) VALUES (?, ?)", (option, value))
    configured = _fts_config(database)
    seen: list[object] = []
    real = coldload.fill_search_dates

    def spy(conn: Connection, file_ids: Any) -> None:
        rows = "SELECT k, v FROM files_fts_config WHERE k IN ('hashsize', 'automerge')"
        seen.append({str(k): v for k, v in conn.exec_driver_sql(rows)})
        real(conn, file_ids)

    monkeypatch.setattr("contextgraph.sync.apply.fill_search_dates", spy)
    with ContextGraph.open(database, settings=Settings.from_env(batch_files=5, workers=1)) as graph:
        graph.sync([vault])
        assert graph.search("prose").total == 12
    assert seen == [{"hashsize": coldload.LOAD_HASH_BYTES, "automerge": 0}] * 3
    assert _fts_config(database) == configured


def test_each_batch_of_a_cold_load_indexes_its_files_in_one_statement(
    tmp_path: Path, vault: Path, write: Writer
) -> None:
    """FTS5 writes out what it holds as a new segment at each statement that writes it: a
    batch of more files than an id list's chunk (sqlcore.CHUNK) still indexes them in one."""
    from sqlalchemy import event

    from contextgraph.store.sqlcore import CHUNK

    files = CHUNK + 100
    _notes(write, files)
    statements: list[str] = []
    settings = Settings.from_env(batch_files=files, workers=1)
    with ContextGraph.open(tmp_path / "graph.db", settings=settings) as graph:

        def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
            if statement.startswith("INSERT INTO files_fts(rowid"):
                statements.append(statement)

        event.listen(graph.engine, "before_cursor_execute", seen)
        graph.sync([vault])
        assert graph.search("prose").total == files
        assert graph.doctor().ok
    assert len(statements) == 1


def test_a_load_into_a_store_with_files_keeps_the_trigger(
    store: ContextGraph, vault: Path, write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _notes(write, 3)
    store.sync([vault])
    deferred: list[bool] = []
    real = coldload.defer
    monkeypatch.setattr(coldload, "defer", lambda conn: deferred.append(real(conn)))
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("[[Xylophone]] and [[Yak]]\n", encoding="utf-8")
    _notes(write, 3, prefix="o")
    store.sync([other], name="other")
    store.sync()
    assert deferred == []
    assert [h.uri for h in store.search("xylophone").hits]
    assert len(store.search("prose").hits) == 6


def _crashed_cold_load(database: Path, vault: Path, settings: Settings) -> None:
    """The state a cold load killed after its first batch leaves: trigger off, rows indexed."""
    with ContextGraph.open(database, settings=settings) as graph:
        graph.sync([vault])
        with db.write(graph.engine) as conn:
            assert coldload.defer(conn)
    with sqlite3.connect(database) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert not names & set(coldload.DEFERRED)


@pytest.mark.parametrize("how", ["sync", "sync_paths", "forget"])
def test_the_next_sync_restores_the_trigger_before_writing(
    tmp_path: Path, vault: Path, write: Writer, how: str
) -> None:
    _notes(write, 5)
    database = tmp_path / "graph.db"
    settings = Settings.from_env(workers=1)
    _crashed_cold_load(database, vault, settings)
    fresh_schema = tmp_path / "fresh.db"
    with ContextGraph.open(fresh_schema):
        pass
    write("late.md", "[[Late Topic]] with TokenValidator\n")
    with ContextGraph.open(database, settings=settings) as graph:
        assert graph.doctor().ok  # the index matches the files: only the trigger is off
        if how == "sync":
            graph.sync()
        elif how == "sync_paths":
            from contextgraph.sync.run import sync_paths

            sync_paths(graph.engine, settings, graph.sources()[0].name, ["late.md"])
        else:
            graph.remove_source(graph.sources()[0].name)
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        if how != "forget":
            assert [h.uri for h in graph.search("late topic").hits]
        assert graph.doctor().ok
    assert _schema(database) == _schema(fresh_schema)
    assert _fts_config(database) == _fts_config(fresh_schema)  # hashsize set back


def test_a_cold_load_killed_mid_way_is_consistent_and_completed_by_the_next(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    write_topic_notes(vault, 300, " FooBar")
    database = tmp_path / "graph.db"
    kill_sync_mid_way(database, vault, files=300)
    with ContextGraph.open(database) as live:
        assert live.doctor().ok  # every committed file is indexed
        with db.read(live.engine) as conn:
            indexed = conn.execute(text("SELECT count(*) FROM files_fts_docsize")).scalar_one()
            stored = conn.execute(text("SELECT count(*) FROM files")).scalar_one()
        assert indexed == stored
        assert len(_dates(database)) == stored  # every committed file has its dates row
        live.sync()
        with db.read(live.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert live.doctor().ok
    with ContextGraph.open(tmp_path / "fresh.db") as fresh:
        fresh.sync([vault])
    assert _index(database) == _index(tmp_path / "fresh.db")
    assert _dates(database) == _dates(tmp_path / "fresh.db")
    assert _schema(database) == _schema(tmp_path / "fresh.db")


def test_a_cold_load_of_two_folders_killed_in_the_second_is_completed_by_the_next(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_topic_notes(first, 30, " FooBar")
    write_topic_notes(second, 300, " Quux")
    database = tmp_path / "graph.db"
    committed = kill_sync_mid_way(database, [first, second], files=330, after=60)
    assert committed > 30  # the second folder was loading into the first one's deferral
    with ContextGraph.open(database) as live:
        assert live.doctor().ok
        with db.read(live.engine) as conn:
            indexed = conn.execute(text("SELECT count(*) FROM files_fts_docsize")).scalar_one()
            assert meta.is_stale(conn, coldload.COLD_LOAD)  # left by the kill
        assert indexed == committed  # the second folder's committed files are indexed too
        assert len(_dates(database)) == committed
        live.sync()
        with db.read(live.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert live.doctor().ok
    with ContextGraph.open(tmp_path / "fresh.db") as fresh:
        fresh.sync([first, second])
    assert _index(database) == _index(tmp_path / "fresh.db")
    assert _dates(database) == _dates(tmp_path / "fresh.db")
    assert _schema(database) == _schema(tmp_path / "fresh.db")


def test_a_no_change_sync_does_not_write(
    store: ContextGraph, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _notes(write, 12)
    store.sync([vault])
    writes: list[str] = []
    real_write = db.write

    def counting_write(*args: object, **kwargs: object) -> object:
        writes.append("write")
        return real_write(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(db, "write", counting_write)
    with db.read(store.engine) as conn:
        version = meta.graph_version(conn)
    report = store.sync()
    assert (report.unchanged, report.added, report.updated, report.deleted) == (12, 0, 0, 0)
    assert writes == []
    with db.read(store.engine) as conn:
        assert meta.graph_version(conn) == version


def test_only_a_cold_load_writes_without_foreign_key_checks(
    tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def checks(conn: Connection) -> int:
        return int(conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one())

    writes: list[int] = []  # every write transaction's setting
    batches: list[int] = []  # the file batches' setting
    real_write, real_apply = db.write, run.apply_ops

    @contextmanager
    def spying_write(*args: Any, **kwargs: Any) -> Iterator[Connection]:
        with real_write(*args, **kwargs) as conn:
            writes.append(checks(conn))
            yield conn

    def spying_apply(conn: Connection, *args: Any, **kwargs: Any) -> tuple[bool, bool]:
        batches.append(checks(conn))
        return real_apply(conn, *args, **kwargs)

    monkeypatch.setattr(db, "write", spying_write)
    monkeypatch.setattr(run, "apply_ops", spying_apply)
    _notes(write, 12)
    cold = Settings.from_env(batch_files=5, workers=1)
    with ContextGraph.open(tmp_path / "graph.db", settings=cold) as graph:
        graph.sync([vault])
        assert batches == [0, 0, 0]  # 12 files in batches of 5
        assert writes.count(0) == 3 and len(writes) > 3  # the source, the restore, communities
        writes.clear()
        batches.clear()
        write("n000.md", "[[Topic 0]] and [[Brand New]]\n")
        graph.sync()  # a store with files: every write checks
        assert batches == [1] and set(writes) == {1}
        with real_write(graph.engine) as conn:  # the pooled connection has its checks back
            assert checks(conn) == 1
            with pytest.raises(IntegrityError):
                conn.exec_driver_sql(
                    "INSERT INTO mentions (file_id, concept_id, count) VALUES (999999, 1, 1)"
                )
        assert graph.doctor().ok


def test_a_sync_leaves_the_writing_process_a_core() -> None:
    # (workers, background helpers): the writer keeps a core; one core extracts in-process
    sizes = [extraction.pool_size(0, cores) for cores in (1, 2, 3, 4, 5, 8, 64)]
    assert sizes == [(0, 0), (1, 1), (2, 1), (3, 1), (4, 1), (4, 1), (4, 1)]
    set_ = [extraction.pool_size(workers, 2) for workers in (1, 2, 6)]
    assert set_ == [(0, 0), (2, 0), (6, 0)]  # the setting


def _fresh_schema(tmp_path: Path) -> list[tuple[str, str, str]]:
    with ContextGraph.open(tmp_path / "fresh-schema.db"):
        pass
    return _schema(tmp_path / "fresh-schema.db")


def test_a_cold_load_restores_beside_its_communities_and_before_their_write(
    tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.graph import communities

    events: list[str] = []
    real_restore, real_membership = coldload.restore, communities._write_membership

    def restore(conn: Connection) -> None:
        real_restore(conn)
        events.append(f"restored in {threading.current_thread().name}")

    def membership(conn: Connection, rows: list[dict[str, int]]) -> None:
        events.append("membership written")
        real_membership(conn, rows)

    monkeypatch.setattr(coldload, "restore", restore)
    monkeypatch.setattr(communities, "_write_membership", membership)
    _notes(write, 30)
    database = tmp_path / "graph.db"
    with ContextGraph.open(database, settings=Settings.from_env(batch_files=7)) as graph:
        assert graph.sync([vault]).communities
        assert events == [f"restored in {checkpoint.THREAD_NAME}", "membership written"]
        assert not [t for t in threading.enumerate() if t.name == checkpoint.THREAD_NAME]
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert graph.doctor().ok
    assert _schema(database) == _fresh_schema(tmp_path)


def test_a_cold_load_of_two_folders_loads_both_and_restores_once(
    tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    restored: list[str] = []
    real_restore = coldload.restore

    def restore(conn: Connection) -> None:
        restored.append(threading.current_thread().name)
        real_restore(conn)

    monkeypatch.setattr(coldload, "restore", restore)
    other = tmp_path / "other"
    _notes(write, 9)
    for n in range(4):
        write(f"o{n}.md", f"[[Other {n}]] and [[Topic 1]]: xylophone {n}\n", root=other)
    database = tmp_path / "graph.db"
    with ContextGraph.open(database, settings=Settings.from_env(batch_files=3)) as graph:
        restored.clear()  # opening may restore what a killed load left (nothing here)
        graph.sync([vault, other])  # one sync: the second folder loads into the first's
        assert restored == [checkpoint.THREAD_NAME]  # deferral, recreated once, at the end
        assert len(graph.search("xylophone").hits) == 4  # indexed by the batches themselves
        assert len(graph.search("prose").hits) == 9
        assert graph.doctor().ok
    assert _schema(database) == _fresh_schema(tmp_path)
    assert len(_dates(database)) == 13
    with ContextGraph.open(tmp_path / "one-by-one.db") as fresh:
        fresh.sync([vault])
        fresh.sync([other])
    assert _index(database) == _index(tmp_path / "one-by-one.db")


def test_a_missing_folder_between_two_cold_loads_keeps_the_deferral(
    tmp_path: Path, write: Writer
) -> None:
    first, gone, last = (tmp_path / name for name in ("a-first", "b-gone", "c-last"))
    for folder in (first, gone, last):
        folder.mkdir()
    database = tmp_path / "graph.db"
    with ContextGraph.open(database) as graph:
        graph.sync([first, gone, last])  # empty folders: registered, nothing stored
        assert [s.name for s in graph.sources()] == ["a-first", "b-gone", "c-last"]
    for n in range(5):
        write(f"f{n}.md", f"[[Topic {n % 2}]] and [[First {n}]]: prose {n}\n", root=first)
    for n in range(3):
        write(f"l{n}.md", f"[[Last {n}]] and [[Topic 1]]: xylophone {n}\n", root=last)
    gone.rmdir()
    with ContextGraph.open(database, settings=Settings.from_env(batch_files=2)) as graph:
        report = graph.sync()  # in that order: cold, missing, then the last into the deferral
        assert report.missing == ["b-gone"]
        assert len(graph.search("xylophone").hits) == 3  # the last folder's own batches
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert graph.doctor().ok
    assert _schema(database) == _fresh_schema(tmp_path)
    assert len(_dates(database)) == 8


@pytest.mark.parametrize("vault_holds", ["notes without links", "code only"])
def test_a_cold_load_without_communities_to_compute_restores_all_the_same(
    tmp_path: Path, vault: Path, write: Writer, vault_holds: str
) -> None:
    for n in range(6):
        if vault_holds == "code only":
            write(f"m{n}.py", f"import m{(n + 1) % 6}\n\ndef f{n}():\n    return {n}\n")
        else:
            write(f"n{n}.md", f"# Plain {n}\nNo link here, prose {n}.\n")
    database = tmp_path / "graph.db"
    with ContextGraph.open(database) as graph:
        report = graph.sync([vault])
        assert not report.graph_changed and report.added == 6
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert graph.doctor().ok
    assert _schema(database) == _fresh_schema(tmp_path)


def test_a_restore_that_fails_fails_the_sync_and_the_next_sync_restores(
    tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    _notes(write, 10)
    database = tmp_path / "graph.db"
    with ContextGraph.open(database) as graph:
        with monkeypatch.context() as patched:
            patched.setattr(coldload, "restore", broken)
            with pytest.raises(DatabaseError, match="disk I/O error"):
                graph.sync([vault])
        with db.read(graph.engine) as conn:
            assert meta.is_stale(conn, coldload.COLD_LOAD)  # left for the next sync
        assert graph.doctor().ok  # the rows are all there and indexed: only slower meanwhile
        write("late.md", "[[Late Topic]] and [[Topic 1]]\n")
        graph.sync()
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
        assert [h.uri for h in graph.search("late topic").hits]
        assert graph.doctor().ok
    assert _schema(database) == _fresh_schema(tmp_path)


def test_a_cold_load_in_memory_restores_before_its_communities(vault: Path, write: Writer) -> None:
    _notes(write, 8)
    with ContextGraph.open(":memory:") as graph:
        assert graph.sync([vault]).communities
        with db.read(graph.engine) as conn:
            assert not meta.is_stale(conn, coldload.COLD_LOAD)
            names = set(conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
        assert set(coldload.DEFERRED) <= names
        write("late.md", "[[Late Topic]] and xylophone\n")
        graph.sync()
        assert [h.uri for h in graph.search("xylophone").hits]
