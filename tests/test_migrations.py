from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from contextgraph import ContextGraph
from contextgraph.errors import DatabaseError
from contextgraph.store import blank, db
from contextgraph.store.models import metadata
from contextgraph.store.sqlcore import driver_sql
from contextgraph.sync.apply import _source_files_query, stored_files

EXPECTED_TABLES = {
    "alembic_version",
    "communities",
    "community_runs",
    "concept_strengths",
    "concept_relations",
    "entities",
    "files",
    "files_fts",
    "files_fts_config",
    "relation_weights",
    "relation_weight_windows",
    "search_dates",
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


def _migrated(path: Path) -> Engine:
    """An engine on ``path`` migrated to head by Alembic, step by step (not from the snapshot)."""
    engine = db.make_engine(path)
    command.upgrade(db.alembic_config(engine), "head")
    return engine


def test_models_match_the_migrations(db_path: Path) -> None:
    engine = _migrated(db_path)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, type_, parent: (
                    not (type_ == "table" and name is not None and name.startswith("files_fts"))
                ),
            },
        )
        assert compare_metadata(context, metadata) == []
    engine.dispose()


def _catalogue(path: Path) -> list[tuple[str, str, str, str | None]]:
    engine = db.make_engine(path)
    try:
        with engine.connect() as conn:
            return blank.catalogue(conn)
    finally:
        engine.dispose()


def test_the_shipped_schema_snapshot_is_what_the_migrations_build(db_path: Path) -> None:
    engine = _migrated(db_path)
    with engine.connect() as conn:
        fresh = blank.dump(conn)
    engine.dispose()
    assert blank.snapshot() == fresh, "run scripts/schema_snapshot.py after adding a migration"
    assert fresh["revision"] == db.SCHEMA_HEAD


def test_a_blank_file_gets_the_migrations_catalogue_without_alembic(tmp_path: Path) -> None:
    probe = (
        "import sys; from contextgraph import ContextGraph; "
        f"ContextGraph.open({str(tmp_path / 'snapshot.db')!r}).close(); "
        "print('alembic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
    _migrated(tmp_path / "migrated.db").dispose()
    made, migrated = _catalogue(tmp_path / "snapshot.db"), _catalogue(tmp_path / "migrated.db")
    assert made == migrated
    assert len(made) > len(EXPECTED_TABLES)  # indexes, the view and the triggers too
    with closing(sqlite3.connect(tmp_path / "snapshot.db")) as raw:
        assert raw.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (db.SCHEMA_HEAD,)
        ]
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_snapshot_of_another_revision_is_never_used(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blank, "snapshot", lambda: {"revision": "0006_x", "objects": ["bad"]})
    graph = ContextGraph.open(db_path)  # migrated by Alembic instead: "bad" would not run
    assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    graph.close()
    _migrated(db_path.with_name("migrated.db")).dispose()
    assert _catalogue(db_path) == _catalogue(db_path.with_name("migrated.db"))


def test_a_snapshot_that_fails_leaves_the_file_blank_with_a_clear_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = {"revision": db.SCHEMA_HEAD, "objects": ["CREATE TABLE sources (x)", "CREATE TABLE ("]}
    monkeypatch.setattr(blank, "snapshot", lambda: made)
    with pytest.raises(DatabaseError, match=r"migrating the database failed: .*syntax error"):
        ContextGraph.open(db_path)
    with closing(sqlite3.connect(db_path)) as raw:  # one transaction: nothing of it was kept
        assert raw.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    monkeypatch.undo()
    graph = ContextGraph.open(db_path)
    assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    graph.close()


def test_a_file_that_is_not_blank_is_left_to_alembic(db_path: Path) -> None:
    """An empty ``alembic_version`` table (a migration killed before its first step) is not a
    blank file: the snapshot is not used (its first table would exist), Alembic migrates it."""
    with closing(sqlite3.connect(db_path)) as raw:
        raw.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        raw.commit()
    engine = db.make_engine(db_path)
    with db.write(engine) as conn:
        assert not blank.create(conn, db.SCHEMA_HEAD)
    db.upgrade(engine)
    assert db.current_revision(engine) == db.SCHEMA_HEAD
    engine.dispose()


def test_schema_head_constant_matches_the_scripts() -> None:
    script = ScriptDirectory(str(db.migrations_dir()))
    assert script.get_current_head() == db.SCHEMA_HEAD


def test_the_known_revisions_are_the_scripts_revisions() -> None:
    """store.ownership tells our databases from others' by the revisions the shipped scripts
    name, read from their file names without importing Alembic: every file's stem must be its
    script's revision."""
    from contextgraph.store.ownership import known_revisions

    script = ScriptDirectory(str(db.migrations_dir()))
    assert known_revisions() == {s.revision for s in script.walk_revisions()}


def test_open_upgrades_an_older_database(db_path: Path) -> None:
    engine = db.make_engine(db_path)
    db.upgrade(engine, "0001_core")
    assert db.current_revision(engine) == "0001_core"
    engine.dispose()
    graph = ContextGraph.open(db_path)
    assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    graph.close()


COUNTED = ("sources", "files", "entities", "mentions", "concept_relations", "relations", "meta")


def _counts(graph: ContextGraph) -> dict[str, int]:
    with db.read(graph.engine) as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in COUNTED}


def test_downgrade_and_upgrade_again_preserve_rows(db_path: Path, vault: Path) -> None:
    (vault / "a.md").write_text("[[Alpha]] [[Beta]] and words to search", encoding="utf-8")
    (vault / "m.py").write_text("import os\n\nclass A:\n    pass\n", encoding="utf-8")
    graph = ContextGraph.open(db_path)
    graph.sync([vault])
    before = _counts(graph)
    assert before["concept_relations"] == 1 and before["relations"] > 0
    db.downgrade(graph.engine, "0001_core")
    assert _counts(graph) == before
    db.upgrade(graph.engine)
    assert _counts(graph) == before
    assert graph.search("search").total == 1
    assert graph.doctor().ok
    graph.close()


def test_a_populated_first_revision_database_upgrades_to_head(db_path: Path) -> None:
    engine = db.make_engine(db_path)
    db.upgrade(engine, "0001_core")
    with db.write(engine) as conn:
        conn.execute(text("INSERT INTO sources VALUES (1, 'v', '/nowhere', 0)"))
        conn.execute(
            text(
                "INSERT INTO files (id, source_id, path, kind, size, mtime_ns, hash, title,"
                " modified, text, concept_count, pairs) VALUES"
                " (1, 1, 'a.md', 'note', 1, 1, 'h', 'Alpha note', 0, 'migrated words', 0, 1)"
            )
        )
    engine.dispose()
    graph = ContextGraph.open(db_path)
    assert db.current_revision(graph.engine) == db.SCHEMA_HEAD
    assert _counts(graph)["files"] == 1
    assert [h.path for h in graph.search("migrated").hits] == ["a.md"]
    graph.close()


def test_upgrade_to_0003_fills_the_code_aware_search_columns(db_path: Path, vault: Path) -> None:
    (vault / "auth.py").write_text(
        "class TokenValidator:\n    def check(self):\n        return token_store\n",
        encoding="utf-8",
    )
    graph = ContextGraph.open(db_path)
    graph.sync([vault])
    db.downgrade(graph.engine, "0002_fts")  # as a database made before 0003 holds it
    with db.read(graph.engine) as conn:
        columns = {r[1] for r in conn.execute(text("PRAGMA table_info(files)"))}
    assert "search_meta" not in columns and "search_parts" not in columns
    db.upgrade(graph.engine)
    with db.read(graph.engine) as conn:
        meta, parts = conn.execute(text("SELECT search_meta, search_parts FROM files")).one()
    assert "token validator" in meta and "tokenvalidator" in meta  # the symbol, both ways
    assert "token validator" in parts and "tokenstore" in parts
    assert [h.path for h in graph.search("token validator", all_words=True).hits] == ["auth.py"]
    assert [h.path for h in graph.search("TokenStore").hits] == ["auth.py"]
    assert graph.doctor().ok
    graph.close()


def test_relations_by_the_larger_end_are_read_from_the_index_alone(
    db_path: Path, vault: Path
) -> None:
    """0006 puts the count in the second-end index, over existing rows, and back out on a
    downgrade."""
    (vault / "a.md").write_text("[[Alpha]] [[Beta]] [[Gamma]]", encoding="utf-8")
    graph = ContextGraph.open(db_path)
    graph.sync([vault])  # rows first, then back to 0005 and up again over them
    before = _counts(graph)
    db.downgrade(graph.engine, "0005_search_dates")
    db.upgrade(graph.engine)
    assert _counts(graph) == before and before["concept_relations"] == 3
    plan = "EXPLAIN QUERY PLAN SELECT a_id, count FROM concept_relations WHERE b_id = 2"
    with db.read(graph.engine) as conn:
        detail = " ".join(str(row[-1]) for row in conn.execute(text(plan)))
        assert "COVERING INDEX ix_concept_relations_b_id_a_id_count" in detail
        db_counts = conn.execute(text("SELECT sum(count) FROM concept_relations")).scalar_one()
    assert db_counts == 3
    db.downgrade(graph.engine, "0005_search_dates")
    with db.read(graph.engine) as conn:
        names = set(
            conn.execute(
                text("SELECT name FROM sqlite_master WHERE tbl_name = 'concept_relations'")
            ).scalars()
        )
    assert "ix_concept_relations_b_id_a_id" in names
    assert "ix_concept_relations_b_id_a_id_count" not in names
    graph.close()


def test_a_sources_stored_state_is_read_from_its_own_index(db_path: Path, vault: Path) -> None:
    """0007 indexes what change detection compares, over existing rows, and drops it on a
    downgrade; the read of a source's files then never touches their rows."""
    (vault / "a.md").write_text("[[Alpha]] [[Beta]]", encoding="utf-8")
    (vault / "b.md").write_text("[[Beta]]", encoding="utf-8")
    graph = ContextGraph.open(db_path)
    graph.sync([vault])
    db.downgrade(graph.engine, "0006_relation_count_index")
    db.upgrade(graph.engine)
    with db.read(graph.engine) as conn:
        source_id = conn.execute(text("SELECT id FROM sources")).scalar_one()
        detail = " ".join(
            str(row[-1])
            for row in conn.execute(
                text(f"EXPLAIN QUERY PLAN {driver_sql(_source_files_query())}"),
                {"source": source_id},
            )
        )
        assert "COVERING INDEX ix_files_source_id_state" in detail
        assert sorted(stored_files(conn, source_id)) == ["a.md", "b.md"]
    again = graph.sync()
    assert (again.added, again.updated, again.unchanged) == (0, 0, 2)
    db.downgrade(graph.engine, "0006_relation_count_index")
    with db.read(graph.engine) as conn:
        names = set(
            conn.execute(text("SELECT name FROM sqlite_master WHERE tbl_name = 'files'")).scalars()
        )
    assert "ix_files_source_id_state" not in names
    graph.close()


def test_0008_rebuilds_the_index_with_marks_inside_words_and_back(
    db_path: Path, vault: Path
) -> None:
    """0008 rebuilds the full-text index of the files already stored, with combining marks
    inside words; a downgrade rebuilds it as 0003 made it."""
    (vault / "hi.md").write_text("नमस्ते दुनिया", encoding="utf-8")
    (vault / "water.md").write_text("केवल पानी", encoding="utf-8")
    graph = ContextGraph.open(db_path)
    graph.sync([vault])

    def found(query: str) -> list[str]:
        return sorted(hit.path for hit in graph.search(query).hits)

    def index_matches_files() -> bool:  # FTS5's own check, against the files' text too
        with closing(sqlite3.connect(db_path)) as conn:
            conn.execute("INSERT INTO files_fts(files_fts, rank) VALUES ('integrity-check', 1)")
        return True

    def tokenizer() -> str:
        with db.read(graph.engine) as conn:
            sql = "SELECT sql FROM sqlite_master WHERE name = 'files_fts'"
            return str(conn.execute(text(sql)).scalar_one())

    assert found("पानी") == ["water.md"]
    db.downgrade(graph.engine, "0007_files_state_index")
    assert "categories" not in tokenizer()
    assert index_matches_files()  # rebuilt over every stored file
    db.upgrade(graph.engine)
    assert "categories 'L* N* Co M*'" in tokenizer()
    assert found("पानी") == ["water.md"]
    assert index_matches_files()
    graph.close()
