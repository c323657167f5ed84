"""Hostile input on both engines (a hunt of the PostgreSQL tier, stop 42): what SQLite took,
PostgreSQL refused, or the other way round."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import Writer

from contextgraph import ContextGraph
from contextgraph.errors import DatabaseError

pytestmark = pytest.mark.engines("sqlite", "postgresql")


def test_a_nul_escaped_in_a_frontmatter_title_stops_no_sync(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("nul.md", '---\ntitle: "bad\\0title"\n---\n[[A]] [[B]]\n')
    write("ok.md", "[[A]] [[C]]\n")
    with ContextGraph.open(db_url) as graph:
        report = graph.sync([vault])
        assert (report.added, report.failed) == (2, [])
        assert graph.read("nul.md").title == "bad\ufffdtitle"


def test_a_nul_in_a_looked_up_name_finds_nothing_on_either_engine(
    db_url: str, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Block]] and [[Other]]\n")
    with ContextGraph.open(db_url) as graph:
        graph.sync([vault])
        assert graph.build_context("x\0y").direct_relations == ()
        assert graph.expand(["block", "x\0y"]).matched == ("block",)
        assert graph.search("bl\0ock").total == graph.search("bl\ufffdock").total


def test_a_database_name_with_a_space_is_synced(
    backend: str, pg_cluster: object, vault: Path, write: Writer
) -> None:
    if backend != "postgresql":
        pytest.skip("a PostgreSQL URL")
    name = f"cg space {os.getpid()}"
    pg_cluster.admin(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        write("a.md", "[[A]] [[B]]\n")
        url = pg_cluster.url(name.replace(" ", "%20"))  # type: ignore[attr-defined]
        with ContextGraph.open(url) as graph:
            assert graph.sync([vault]).added == 1  # the sync lock's own session connects too
    finally:
        pg_cluster.drop(name)  # type: ignore[attr-defined]


def test_another_applications_database_is_left_untouched(backend: str, pg_cluster: object) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite's case is in test_database_files")
    name = f"cg_foreign_{os.getpid()}"
    pg_cluster.admin(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        import psycopg

        url = pg_cluster.url(name)  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id int)")
        with pytest.raises(DatabaseError, match="another application"):
            ContextGraph.open(url).stats()
        with psycopg.connect(url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
        assert tables == [("customers",)]
    finally:
        pg_cluster.drop(name)  # type: ignore[attr-defined]


def test_a_url_whose_port_is_no_number_is_one_clear_error() -> None:
    with pytest.raises(DatabaseError, match="invalid database URL"):
        ContextGraph.open("postgresql://postgres@localhost:notaport/x")
