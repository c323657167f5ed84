"""``search_dates`` (migration 0005) holds exactly each file's dates and source, on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from contextgraph import ContextGraph
from contextgraph.graph.ftsquery import build_match
from contextgraph.graph.search import ranked_matches
from contextgraph.settings import Settings
from contextgraph.store import db
from contextgraph.store.models import T_FILES, T_SEARCH_DATES
from tests.helpers import Writer

pytestmark = pytest.mark.engines("sqlite", "postgresql")

_COLUMNS = ("id", "source_id", "created", "modified", "last_accessed")


def _rows(graph: ContextGraph, table: object) -> list[tuple[object, ...]]:
    with db.read(graph.engine) as conn:
        columns = [table.c[name] for name in _COLUMNS]  # type: ignore[attr-defined]
        return [tuple(r) for r in conn.execute(select(*columns).order_by(columns[0]))]


def _assert_in_step(graph: ContextGraph) -> None:
    files = _rows(graph, T_FILES)
    assert files
    assert _rows(graph, T_SEARCH_DATES) == files


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
    store.remove_source("o")  # files go by the sources' cascade
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
        tables = conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars().all()
    assert "search_dates" not in tables and "search_dates_insert" not in tables
    db.upgrade(graph.engine)
    _assert_in_step(graph)
    assert graph.search("words", now="2026-12-01T00:00:00Z").as_dict() == before
    graph.close()


@pytest.mark.sqlite_only
def test_a_file_without_its_dates_row_is_still_ranked_exactly(
    db_path: Path, vault: Path, write: Writer
) -> None:
    """Dates removed behind the triggers' back: the recent windows see it and rank the exact way."""
    for n in range(300):
        write(f"n{n:03d}.md", f"# N{n}\n\ncommon words {n}", created=f"20{10 + n % 16}-01-01")
    graph = ContextGraph.open(db_path)
    graph.sync([vault], name="v")
    with db.read(graph.engine) as conn:
        match = build_match("common")
        assert match is not None
        stamp = 1796083200.0  # 2026-12-01T00:00:00Z
        expected = ranked_matches(conn, match, settings=Settings(), now=stamp, top=10)
    with graph.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM search_dates WHERE id % 3 = 0")
    with db.read(graph.engine) as conn:
        assert ranked_matches(conn, match, settings=Settings(), now=stamp, top=10) == expected
    graph.close()
