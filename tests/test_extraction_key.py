"""A store stays what a fresh sync would make when what extraction depends on changes: the
settings it reads, or the extraction code itself (SPEC §3; a hunt, stop 43)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Writer, snapshot

from contextgraph import ContextGraph, Settings
from contextgraph.store import db, meta


def fresh(tmp_path: Path, vault: Path, settings: Settings) -> dict[str, object]:
    with ContextGraph.open(tmp_path / "fresh.db", settings=settings) as graph:
        graph.sync([vault])
        return snapshot(graph)


@pytest.fixture
def notes(vault: Path, write: Writer) -> Path:
    write("a.md", "# A\n[[x]] [[y]] [[z]] and padding text " + "." * 80 + "\n")
    write("b.md", "# B\n[[x]] [[y]] [[a-rather-long-concept-name]]\n")
    write("c.md", "# C\n[[y]] [[z]]\n")
    return vault


@pytest.mark.parametrize(
    "changed",
    [
        {"max_file_bytes": 100},
        {"max_concepts_per_file": 2},
        {"max_concept_length": 10},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_changed_extraction_setting_reaches_the_files_stored_before(
    db_path: Path, tmp_path: Path, notes: Path, changed: dict[str, int]
) -> None:
    with ContextGraph.open(db_path) as graph:
        graph.sync([notes])
    settings = Settings().replace(**changed)
    with ContextGraph.open(db_path, settings=settings) as graph:
        report = graph.sync()
        assert snapshot(graph) == fresh(tmp_path, notes, settings)
        assert graph.sync().unchanged == 3 - len(report.failed)  # recorded: not read again
    with ContextGraph.open(db_path) as graph:  # and back
        graph.sync()
        assert snapshot(graph) == fresh(tmp_path / "back", notes, Settings())


def test_max_concept_length_drops_longer_names_and_counts_them(db_path: Path, notes: Path) -> None:
    with ContextGraph.open(db_path, settings=Settings(max_concept_length=10)) as graph:
        report = graph.sync([notes])
        assert report.dropped_links == 1
        assert graph.build_context("a-rather-long-concept-name").direct_relations == ()
        assert {r.name for r in graph.build_context("x").direct_relations} == {"y", "z"}


def test_files_stored_by_another_extraction_are_extracted_again(
    db_path: Path, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextgraph.sync import ingest

    real = ingest.meta_terms_of
    with monkeypatch.context() as patch:  # an older extraction: other search words
        patch.setattr(ingest, "meta_terms_of", lambda *a: real(*a) + "\nlegacyword")
        with ContextGraph.open(db_path) as graph:
            graph.sync([notes])
            assert graph.search("legacyword").total == 3
    with ContextGraph.open(db_path) as graph:
        with db.write(graph.engine) as conn:  # a store from before keys were recorded
            for source in graph.sources():
                meta.remove(conn, meta.extracted(source.id))
        report = graph.sync()
        assert report.updated == 3
        assert graph.search("legacyword").total == 0
        assert snapshot(graph) == fresh(tmp_path, notes, Settings())
        assert graph.doctor().ok


def test_a_reextraction_cut_short_leaves_no_key_that_vouches_for_its_files(
    db_path: Path, tmp_path: Path, vault: Path, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        write(f"n{i}.md", f"[[alpha]] [[a-long-concept-{i}]]\n")
    with ContextGraph.open(db_path, settings=Settings(batch_files=2)) as graph:
        graph.sync([vault])
    from contextgraph.sync import run

    real = run._write_batch
    batches: list[int] = []

    def second_fails(*args: object, **kwargs: object) -> bool:
        batches.append(1)
        if len(batches) == 2:
            raise KeyboardInterrupt  # Ctrl-C, or a kill, halfway through
        return real(*args, **kwargs)  # type: ignore[arg-type]

    shorter = Settings(batch_files=2, max_concept_length=5)
    with monkeypatch.context() as patch, ContextGraph.open(db_path, settings=shorter) as graph:
        patch.setattr(run, "_write_batch", second_fails)
        with pytest.raises(KeyboardInterrupt):
            graph.sync()
    with ContextGraph.open(db_path, settings=Settings(batch_files=2)) as graph:
        graph.sync()  # the first batch's files were extracted under the other key
        assert snapshot(graph) == fresh(tmp_path, vault, Settings(batch_files=2))


def test_a_file_moved_in_the_sync_that_reads_it_again_gets_the_new_facts(
    db_path: Path, tmp_path: Path, vault: Path, write: Writer
) -> None:
    write("a.md", "[[Alpha]] [[Longconceptname]]\n")
    with ContextGraph.open(db_path) as graph:
        graph.sync([vault])
        graph.read("a.md")
    (vault / "a.md").rename(vault / "b.md")
    shorter = Settings(max_concept_length=5)
    with ContextGraph.open(db_path, settings=shorter) as graph:
        report = graph.sync()
        assert report.renamed == 1
        assert snapshot(graph) == fresh(tmp_path, vault, shorter)
        with db.read(graph.engine) as conn:  # still a rename: the row, and its read, kept
            kept = conn.exec_driver_sql("SELECT last_accessed FROM files WHERE path = 'b.md'")
            assert kept.scalar() is not None
