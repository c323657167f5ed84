from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import Writer
from sqlalchemy import text

from contextgraph import ContextGraph, NotFound, UnsafePath
from contextgraph.cli import cli
from contextgraph.errors import ContextGraphError
from contextgraph.store import db

pytestmark = pytest.mark.engines("sqlite", "postgresql")


@pytest.fixture
def notes(store: ContextGraph, vault: Path, write: Writer) -> ContextGraph:
    write("ideas/Graph Theory.md", "---\ntitle: Graphs\ncreated: 2020-01-01\n---\n[[Q]] [[X]]\n")
    write("other.md", "[[Q]] [[Y]]", created="2020-01-01")
    store.sync([vault], name="v")
    return store


def test_read_by_uri_path_and_title(notes: ContextGraph) -> None:
    by_uri = notes.read("memory://v/ideas/Graph Theory.md")
    assert by_uri.title == "Graphs" and by_uri.concepts == ("q", "x")
    assert "[[Q]]" in by_uri.content
    assert notes.read("ideas/Graph Theory.md").uri == by_uri.uri
    assert notes.read("graphs").uri == by_uri.uri
    assert notes.read("graph theory").uri == by_uri.uri
    assert notes.read("Other").path == "other.md"


def test_read_sets_last_accessed_and_boosts_relations(notes: ContextGraph) -> None:
    before = {r.name: r.weighted_score for r in notes.build_context("Q").direct_relations}
    assert before["x"] == before["y"]
    note = notes.read("other.md", now="2026-11-29T00:00:00Z")
    assert note.last_accessed is not None and note.last_accessed.startswith("2026-11-29")
    after = {r.name: r.weighted_score for r in notes.build_context("Q").direct_relations}
    assert after["y"] == 1.0 > after["x"]


def test_a_read_never_moves_last_accessed_backwards(notes: ContextGraph) -> None:
    notes.read("other.md", now="2026-11-29T00:00:00Z")
    again = notes.read("other.md", now="2026-01-01T00:00:00Z")
    assert again.last_accessed is not None and again.last_accessed.startswith("2026-11-29")


def test_queries_never_write(notes: ContextGraph) -> None:
    with db.read(notes.engine) as conn:
        before = conn.execute(text("SELECT id, last_accessed FROM files ORDER BY id")).all()
    notes.build_context("Q", include_content=True)
    notes.search("Q")
    notes.expand(["Q"])
    notes.visualize("Q")
    with db.read(notes.engine) as conn:
        assert conn.execute(text("SELECT id, last_accessed FROM files ORDER BY id")).all() == before


PAYLOADS = [
    "../x.md",
    "..\\x.md",
    "ideas/../../x.md",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "~/secret.md",
    "memory://v/../../etc/passwd",
    "memory://v/%2e%2e/x.md",
    "%2e%2e/x.md",
    "..%2fx.md",
    "%252e%252e/x.md",
    "file:///etc/passwd",
    "other.md\x00.txt",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_unsafe_identifiers_are_refused(notes: ContextGraph, payload: str) -> None:
    with pytest.raises(UnsafePath):
        notes.read(payload)


def test_symlink_out_of_the_source_is_refused(
    notes: ContextGraph, vault: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret [[S]] [[T]]")
    notes.sync()
    (vault / "inside.md").write_text("[[S]] [[T]]")
    notes.sync()
    (vault / "inside.md").unlink()
    (vault / "inside.md").symlink_to(outside)
    with pytest.raises(UnsafePath):
        notes.read("inside.md")


def test_database_files_are_never_served(tmp_path: Path, write: Writer) -> None:
    vault = tmp_path / "v2"
    write("a.md", "[[A]] [[B]]", root=vault)
    graph = ContextGraph.open(vault / "graph.db")
    graph.sync([vault])
    for name in ("graph.db", "graph.db-wal", "graph.db-shm"):
        with pytest.raises((UnsafePath, NotFound)):
            graph.read(name)
    graph.close()


def test_unknown_and_ambiguous_identifiers(notes: ContextGraph, vault: Path, write: Writer) -> None:
    with pytest.raises(NotFound):
        notes.read("no such note")
    write("sub/other.md", "[[Z]]")
    notes.sync()
    with pytest.raises(ContextGraphError, match="ambiguous"):
        notes.read("other")


def test_read_command(notes: ContextGraph, db_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db_url, "read", "other.md", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["uri"] == "memory://v/other.md"
    result = runner.invoke(cli, ["--db", db_url, "read", "../../etc/passwd"])
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "://" in db_url or os.path.exists(db_url)


def test_read_by_title_folds_case_and_normalization_beyond_ascii(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """A title is matched case-insensitively for every letter, not only ASCII ones (SQLite's
    lower() and LIKE fold ASCII alone), and in either Unicode normal form: a vault written on
    macOS names files in NFD, a terminal types NFC."""
    write("Éclair.md", "[[Pastry]]")
    write("t.md", "---\ntitle: Ärger\n---\n[[Mood]]")
    write("Cafe\u0301.md", "[[Coffee]]")  # NFD: e + combining acute
    store.sync([vault], name="v")
    for title in ("Éclair", "éclair", "ÉCLAIR"):
        assert store.read(title).path == "Éclair.md", title
    for title in ("Ärger", "ärger", "ÄRGER"):
        assert store.read(title).path == "t.md", title
    for title in ("Café", "café", "Cafe\u0301", "Café.md"):  # NFC, and the file's own NFD
        assert store.read(title).path == "Cafe\u0301.md", title
    with pytest.raises(NotFound):
        store.read("eclair")  # a different letter is still a different title


def test_a_frontmatter_title_with_surrounding_blanks_reads_by_its_words(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """YAML keeps a quoted title's blanks and a block scalar's final newline (Dendron's vault
    has both); search shows such a title stripped, and read must find the note by it."""
    write("spaced.md", '---\ntitle: "How to know everything "\n---\n[[Knowing]]')
    write("folded.md", "---\ntitle: >\n  10,000 Tables\n---\n[[Tables]]")
    store.sync([vault], name="v")
    hits = {h.path: h.title for h in store.search("everything tables").hits}
    assert hits == {"spaced.md": "How to know everything", "folded.md": "10,000 Tables"}
    for path, title in hits.items():
        assert store.read(title).path == path
        assert store.read(title.lower() + " ").path == path


def test_read_finds_a_note_by_the_heading_title_search_shows(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """Search titles a note without a frontmatter title by its first ``#`` heading; read takes
    that title too, and says it. A frontmatter title wins over a heading, as in search."""
    write("code-of-conduct.md", "Intro line.\n\n# Code of Conduct\n\nBe kind. [[Community]]\n")
    write("titled.md", "---\ntitle: Rules\n---\n# Heading Not Title\n[[Community]]\n")
    write("bom.md", "\ufeff# Pinned Heading\n[[Community]]\n")
    store.sync([vault], name="v")
    hits = {h.path: h.title for h in store.search("community kind rules pinned").hits}
    assert hits["code-of-conduct.md"] == "Code of Conduct"
    for path in ("code-of-conduct.md", "bom.md"):
        note = store.read(hits[path])
        assert note.path == path and note.title == hits[path]
        assert store.read(hits[path].upper()).path == path
    assert store.read("code-of-conduct").title == "Code of Conduct"  # the file name still reads
    assert store.read("Rules").path == "titled.md"
    with pytest.raises(NotFound):
        store.read("Heading Not Title")


def test_a_path_in_the_other_normal_form_reads_and_filters(
    store: ContextGraph, vault: Path, write: Writer
) -> None:
    """A macOS vault's paths are NFD; a URI or folder typed (or copied) in NFC names them too."""
    write("Cafe\u0301/Cre\u0300me.md", "Brûlée [[Dessert]]")  # both parts in NFD
    store.sync([vault], name="v")
    stored = "Cafe\u0301/Cre\u0300me.md"
    for typed in (stored, "Café/Crème.md"):
        assert store.read(f"memory://v/{typed}").path == stored, typed
        assert store.read(typed).path == stored, typed
    for folder in ("Cafe\u0301", "Café"):
        assert [h.path for h in store.search("dessert brûlée", folder=folder).hits] == [stored]
