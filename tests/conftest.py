"""Shared fixtures: every test gets its own HOME and database; nothing touches a real home."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from contextgraph import ContextGraph
from contextgraph.settings import Settings

# CI runs the property tests on a fixed sequence of examples (no flakes on a shared machine);
# locally every run explores new ones.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPORA = SHARED / "corpora"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOW = "2026-11-30T12:00:00+00:00"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CONTEXTGRAPH_DB", str(tmp_path / "env.db"))
    for name in list(os.environ):
        if name.startswith(("CONTEXTGRAPH_", "MAENIFOLD_")) and name != "CONTEXTGRAPH_DB":
            monkeypatch.delenv(name)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "graph.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ContextGraph]:
    """A fresh database file with the default settings and a fixed clock."""
    graph = ContextGraph.open(db_path, settings=Settings.from_env(now=_now()))
    yield graph
    graph.close()


def _now() -> object:
    from contextgraph.settings import parse_datetime

    return parse_datetime(NOW)


Writer = Callable[..., Path]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def write(vault: Path) -> Writer:
    """Write a note into the vault: ``write("a.md", "text", created="2026-11-01")``."""

    def _write(rel: str, body: str, *, created: str | None = None, root: Path = vault) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(body)
        if created is not None:
            text = f"---\ncreated: {created}\n---\n{text}"
        path.write_text(text, encoding="utf-8")
        return path

    return _write


def snapshot(graph: ContextGraph) -> dict[str, object]:
    """A canonical dump of everything sync derives from the files (ids and read times left out)."""
    from sqlalchemy import text

    from contextgraph import db

    queries = {
        "files": "SELECT s.name, f.path, f.kind, f.hash, f.size, f.title, f.created, f.text,"
        " f.facts, f.concept_count, f.pairs FROM files f JOIN sources s ON s.id = f.source_id",
        "mentions": "SELECT s.name, f.path, e.key, m.count FROM mentions m"
        " JOIN files f ON f.id = m.file_id JOIN sources s ON s.id = f.source_id"
        " JOIN entities e ON e.id = m.concept_id",
        "concept_relations": "SELECT a.key, b.key, r.count FROM concept_relations r"
        " JOIN entities a ON a.id = r.a_id JOIN entities b ON b.id = r.b_id",
        "entities": "SELECT e.kind, e.key, e.name, e.path FROM entities e",
        "relations": "SELECT a.kind, a.key, b.kind, b.key, r.type, r.weight, f.path"
        " FROM relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id"
        " JOIN files f ON f.id = r.file_id",
        "fts": "SELECT rowid, title, text, search_meta, search_parts FROM files_fts",
    }
    out: dict[str, object] = {}
    with db.read(graph.engine) as conn:
        for name, sql in queries.items():
            rows = [tuple(r) for r in conn.execute(text(sql))]
            if name == "concept_relations":  # stored by id order, which differs between stores
                rows = [(*sorted(r[:2]), r[2]) for r in rows]
            if name == "fts":
                paths = dict(conn.execute(text("SELECT id, path FROM files")).all())
                rows = [(paths.get(r[0]), r[1], r[2]) for r in rows]
            out[name] = sorted(rows, key=repr)
    return out
