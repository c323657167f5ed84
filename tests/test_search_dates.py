"""``search_dates`` (migration 0005): each file's source and decay reference time, kept in step
with ``files`` by triggers on both engines, and the recent windows stay exact without it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import select

from contextgraph import ContextGraph
from contextgraph.graph.decay import reference_sql
from contextgraph.graph.ftsquery import build_match
from contextgraph.graph.search import ranked_matches
from contextgraph.settings import Settings
from contextgraph.store import db
from contextgraph.store.models import T_FILES, T_SEARCH_DATES
from tests.helpers import Writer
from tests.test_search_ranking import NOW, every_match_scored

pytestmark = pytest.mark.engines("sqlite", "postgresql")


def _assert_in_step(graph: ContextGraph) -> None:
    f, d = T_FILES, T_SEARCH_DATES
    with db.read(graph.engine) as conn:
        files = conn.execute(select(f.c.id, f.c.source_id, reference_sql(f)).order_by(f.c.id))
        expected = [tuple(r) for r in files]
        dates = conn.execute(select(d.c.id, d.c.source_id, d.c.reference).order_by(d.c.id))
        assert expected and [tuple(r) for r in dates] == expected


def test_search_dates_follow_every_write_of_files(
    store: ContextGraph, vault: Path, write: Writer, tmp_path: Path
) -> None:
    write("a.md", "# A\n\nalpha words", created="2026-01-02")
    write("b.md", "# B\n\nbeta words")
    write("sub/c.md", "# C\n\ngamma words", created="2025-06-01")
    store.sync([vault], name="v")
    _assert_in_step(store)
    store.read("memory://v/a.md")  # last_accessed
    _assert_in_step(store)
    write("b.md", "# B\n\nbeta words changed", created="2024-03-04")  # created and modified
    (vault / "sub" / "c.md").unlink()
    store.sync([vault], name="v")
    _assert_in_step(store)
    store.write_note("memory://v/d.md", "# D\n\ndelta words")
    _assert_in_step(store)
    other = tmp_path / "other"
    write("e.md", "# E\n\nepsilon words", root=other)
    store.sync([other], name="o")
    _assert_in_step(store)
    store.remove_source("o")  # its files go by the foreign key's cascade
    _assert_in_step(store)
    assert {h.path for h in store.search("words").hits} == {"a.md", "b.md", "d.md"}


@pytest.mark.sqlite_only
def test_the_upgrade_copies_the_dates_of_existing_files(
    db_path: Path, vault: Path, write: Writer
) -> None:
    for n in range(5):
        write(f"n{n}.md", f"# N{n}\n\nwords {n}", created=f"2026-0{n + 1}-01")
    graph = ContextGraph.open(db_path)
    graph.sync([vault], name="v")
    graph.read("memory://v/n2.md")
    before = graph.search("words", now="2026-12-01T00:00:00Z").as_dict()
    db.downgrade(graph.engine, "0004_relation_weights")
    with db.read(graph.engine) as conn:
        names = set(conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
    assert not {n for n in names if n.startswith("search_dates")}
    db.upgrade(graph.engine)
    _assert_in_step(graph)
    assert graph.search("words", now="2026-12-01T00:00:00Z").as_dict() == before
    graph.close()


@pytest.fixture
def old_notes(db_path: Path, tmp_path: Path, write: Writer) -> Path:
    """300 notes of two sources, all matching "common", dated from 2010 to 2025."""
    for source in ("one", "two"):
        for n in range(150):
            body = f"# N{n}\n\ncommon words {n}"
            write(f"n{n:03d}.md", body, created=f"20{10 + n % 16}-01-01", root=tmp_path / source)
    graph = ContextGraph.open(db_path)
    for source in ("one", "two"):
        graph.sync([tmp_path / source], name=source)
    graph.close()
    return db_path


def _ranked_as_every_match(db_path: Path) -> None:
    graph = ContextGraph.open(db_path)
    match = build_match("common")
    assert match is not None
    with db.read(graph.engine) as conn:
        expected = every_match_scored(conn, match, Settings())
        found, total = ranked_matches(conn, match, settings=Settings(), now=NOW, top=10)
    graph.close()
    assert total == len(expected)
    assert found == expected[:10]


@pytest.mark.sqlite_only
def test_files_without_their_dates_rows_are_still_ranked_exactly(old_notes: Path) -> None:
    """Dates removed behind the triggers' back: the recent windows see it and rank the exact way."""
    _ranked_as_every_match(old_notes)
    with sqlite3.connect(old_notes) as conn:
        conn.execute("DELETE FROM search_dates WHERE id % 3 = 0")
    _ranked_as_every_match(old_notes)


@pytest.mark.sqlite_only
def test_files_of_a_source_deleted_without_foreign_keys_are_not_counted(old_notes: Path) -> None:
    with sqlite3.connect(old_notes) as conn:  # foreign keys off: no cascade to the files
        conn.execute("DELETE FROM sources WHERE name = 'one'")
        assert conn.execute("SELECT count(*) FROM files").fetchone() == (300,)
        assert conn.execute("SELECT count(*) FROM search_dates").fetchone() == (150,)
    _ranked_as_every_match(old_notes)
