"""FTS5's counts are reused only while the index holds the same content (SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event

from contextgraph import ContextGraph
from contextgraph.graph import searchbounds
from contextgraph.graph.ftsquery import build_match
from contextgraph.store import db
from tests.helpers import Writer

NOW = "2026-12-01T00:00:00Z"


def _counts(graph: ContextGraph, query: str, *, counted: bool = True) -> searchbounds.FtsCounts:
    """FTS5's counts for ``query``; ``counted``: whether FTS5 was asked (not all reused)."""
    match = build_match(query)
    assert match is not None
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(graph.engine, "before_cursor_execute", seen)
    try:
        with db.read(graph.engine) as conn:
            counts = searchbounds.fts_counts(conn, match)
    finally:
        event.remove(graph.engine, "before_cursor_execute", seen)
    assert counts is not None
    assert any("MATCH" in s for s in statements) == counted
    return counts


def _notes(vault: Path, write: Writer, count: int) -> None:
    for n in range(count):
        write(f"n{n:03d}.md", f"# N{n}\n\nshared words {n} {'rare' if n % 50 == 0 else ''}")


def test_counts_follow_writes_through_the_library(
    db_path: Path, vault: Path, write: Writer
) -> None:
    _notes(vault, write, 300)
    graph = ContextGraph.open(db_path)
    graph.sync([vault], name="v")
    first = _counts(graph, "shared rare")
    assert (first.rows, first.matches, first.files_with) == (300, 300, {"shared": 300, "rare": 6})
    assert _counts(graph, "shared rare", counted=False) == first  # reused
    assert _counts(graph, "rare", counted=False).matches == 6
    assert graph.search("shared", now=NOW).total == 300
    write("extra.md", "# Extra\n\nshared rare words")
    graph.sync([vault], name="v")
    again = _counts(graph, "shared rare")
    assert (again.rows, again.matches, again.files_with) == (301, 301, {"shared": 301, "rare": 7})
    assert graph.search("shared", now=NOW).total == 301
    graph.close()


def test_counts_follow_text_changed_behind_the_librarys_back(
    db_path: Path, vault: Path, write: Writer
) -> None:
    """No graph version replaced, the same row count and token totals: the index's own
    structure record still tells the contents apart."""
    _notes(vault, write, 300)
    graph = ContextGraph.open(db_path)
    graph.sync([vault], name="v")
    assert _counts(graph, "rare").matches == 6
    assert _counts(graph, "rare", counted=False).matches == 6
    assert graph.search("rare", now=NOW).total == 6
    averages = "SELECT block FROM files_fts_data WHERE id = 1"
    with sqlite3.connect(db_path) as conn:
        before = conn.execute(averages).fetchone()
    with sqlite3.connect(db_path) as conn:  # one word for another: same tokens, same lengths
        conn.execute(
            "UPDATE files SET text = replace(text, 'words 1 ', 'rare 1 ') WHERE path = 'n001.md'"
        )
    with sqlite3.connect(db_path) as conn:
        assert conn.execute(averages).fetchone() == before
    assert _counts(graph, "rare").matches == 7
    assert graph.search("rare", now=NOW).total == 7
    graph.close()
