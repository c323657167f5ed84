from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from contextgraph import ContextGraph, db
from contextgraph.models import Base

EXPECTED_TABLES = {
    "alembic_version",
    "communities",
    "community_runs",
    "concept_relations",
    "entities",
    "files",
    "files_fts",
    "files_fts_config",
    "files_fts_data",
    "files_fts_docsize",
    "files_fts_idx",
    "meta",
    "mentions",
    "relations",
    "sources",
}


def test_blank_database_migrates_to_exactly_the_expected_tables(db_path: Path) -> None:
    graph = ContextGraph.open(db_path)
    with db.read(graph.engine) as conn:
        tables = {
            r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))
        }
    assert tables == EXPECTED_TABLES
    graph.close()


def test_models_match_the_migrations(db_path: Path) -> None:
    graph = ContextGraph.open(db_path)
    with graph.engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, type_, parent: (
                    not (type_ == "table" and name is not None and name.startswith("files_fts"))
                ),
            },
        )
        assert compare_metadata(context, Base.metadata) == []
    graph.close()


def test_schema_head_constant_matches_the_scripts() -> None:
    script = ScriptDirectory(str(db.migrations_dir()))
    assert script.get_current_head() == db.SCHEMA_HEAD


def test_open_upgrades_an_older_database(db_path: Path) -> None:
    engine = db.make_engine(db_path)
    db.upgrade(engine, "0001_core")
    assert db.current_revision(engine) == "0001_core"
    engine.dispose()
    graph = ContextGraph.open(db_path)
    assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    graph.close()


def test_downgrade_and_upgrade_again_preserve_rows(db_path: Path, vault: Path) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]] and words to search", encoding="utf-8")
    graph = ContextGraph.open(db_path)
    graph.sync([vault])
    db.downgrade(graph.engine, "0001_core")
    with db.read(graph.engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM concept_relations")).scalar_one() == 1
    db.upgrade(graph.engine)
    with db.read(graph.engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM files")).scalar_one() == 1
        hits = conn.execute(text("SELECT rowid FROM files_fts WHERE files_fts MATCH 'search'"))
        assert len(hits.all()) == 1
    graph.close()
